#!/usr/bin/env bash
# tempo9 (CUDA) beside llama.cpp (CUDA) on one synthetic GGUF, on the device machine (H200).
#
# Here first:  TEMPO9_CUDA_BUILD=build-cuda2 scripts/device_test_ops.sh build   (-> .devrun)
#              and the peer: scripts/build_peer_cuda.sh && scripts/build_peer_cuda.sh stage
#              (-> .devrun-peer/bin), or scripts/build_peer_cuda.sh pack and
#              `bash scripts/build_peer_cuda.sh device-build` there (-> /tmp/peer/bin).
#              One call carries 64 MiB: for `agents`/`serve` beside the peer, stage it with
#              PEER_BINS=llama-server and drop from .devrun what the call does not use (the
#              test binary, the benches, shared/fixtures/reference).
# There (run tool, carry the stage folders, repo root):
#   bash bench/h200_bench.sh [PARTS]      PARTS: comma list of
#       single   tempo9 run --backend cuda (512-token prompt + GEN generated, twice) and
#                llama-bench -ngl 99 -p 512 -n GEN -r 3 on the same file, and its tgGEN again at
#                ours' depth (-p 0 -d PEER_DEPTH, default 512; 0: not run)
#       long     the same with an 8192-token prompt (llama-bench -p 8192 -n 0 -r 2)
#       serve    tempo9 serve --backend cuda and llama-server -ngl 99 -np 32, each driven by
#                `tempo9 bench cold` with the same workload at each of WAYS concurrent requests
#       agents   issue 9's agent load: tempo9 serve and llama-server (-np AGENTS), each driven
#                by `tempo9 bench agents` (AGENTS agents, a shared SYSTEM-token system prompt,
#                TURNS (3) turns of TURN_TOKENS (300) new tokens, AGENT_GEN (128) generated,
#                AGENT_S (300) seconds at most; same --run-id: same prompts; SERVE_ARGS: more
#                tempo9 serve flags). AGENTS=1 TURN_TOKENS=40: one agent's warm turns with a
#                short tool result (issue 9's 50 ms warm TTFT)
#       legacy   single's tempo9 run with TEMPO9_CUDA_LEGACY_GEMV=1 (the pre-mma kernels)
#       nographs single's tempo9 run with TEMPO9_CUDA_GRAPHS=0 (every decode step launched op by
#                op: the before/after for CUDA graphs)
#       profile  tempo9 run with TEMPO9_CUDA_PROFILE=1 (per-op GPU times, $OUT/profile_*.txt)
#       trace    single's tempo9 run once with TEMPO9_CUDA_TRACE ($OUT/trace_*.tsv: every kernel's
#                device times and the host's CUDA calls, graphs and PDL on) and
#                bench/kernel_trace.py on it: each kernel's share of a decode step's chain over
#                the last 100 steps, the steps' idle device time, and the last 2 steps' timeline
#                ($OUT/trace_*.txt). CUPTI 13 is found in the CUDA install (TEMPO9_CUPTI_LIB:
#                another libcupti.so.13). Tracing slows decode 7-14%: rank with it, decide untraced
#       pipeline pipelined decode steps (`--pipeline`, docs/CUDA.md stage 34): single's tempo9 run
#                with --pipeline off, on, off, on (twice each), then greedy identity: the text of
#                PIPE_GEN (96) tokens of a short prompt with --pipeline on against off, at 1 and
#                PARALLEL (8) rows ("identical" or cmp's first difference). For the trace part
#                pass TRACE_ARGS="--pipeline on", for agents SERVE_ARGS="--pipeline on"
#                (agents also takes BENCH_ARGS, e.g. "--tools-in-request" with SERVE_ARGS=
#                "--tool-grammar on|off": the lazy tool-call grammar's cost on every request)
#       kernels  ncu's time for every kernel of a KERNELS_PROMPT-token prompt (4) and
#                KERNELS_GEN (3) tokens (graphs off), summarised per kernel for the last window
#                by bench/ncu_kernels.py ($OUT/ncu_*.csv, $OUT/kernels_*.txt); for the prompt's
#                kernels run `bench/ncu_kernels.py CSV --window 0` on the CSV (with KERNELS_GEN=1
#                the last window is only the logits' few kernels; KERNELS_WINDOW=0 summarises
#                the prompt's window instead); KERNELS_PARALLEL=8: the
#                prompt as 8 concurrent requests (an 8-row decode step over shared pages)
#       ncu1     ncu's detailed sections (speed of light, occupancy, scheduler, warp states,
#                memory, instructions) for one launch of the kernel matching NCU_KERNEL, after
#                NCU_SKIP (40) matching launches (NCU_COUNT launches, 1), with the launch
#                statistics (grid, registers, shared memory) and the source counters (branches,
#                excess global sectors and shared wavefronts), in the `kernels` run's workload
#                (KERNELS_*; more tokens: KERNELS_GEN, default 12 here) -> $OUT/ncu1.txt.
#                NCU_KERNEL is a
#                regex on ncu's demangled name, casts included, e.g.
#                'gemv_slice_kernel<\(t9::GgmlType\)8, \(int\)8, \(bool\)1, \(int\)2, \(int\)4>'
#                (the form of ncu's own kernel list; without the casts nothing matched in run
#                106; runs 109 and 112 used it). NCU_SASS=1: then the warp samples per SASS
#                instruction of the first such launch -> $OUT/ncu1_sass.txt (bench/ncu_sass.py)
#       batched  PARALLEL (8) copies of one SINGLE_X prompt through `tempo9 run --parallel`: the
#                engine's per-step time of a PARALLEL-row decode over shared pages (ours only)
#       parity   `tempo9 parity --backend cuda`: teacher-forced logits against the CPU backend
#       structured  one request under a JSON schema beside PARALLEL-1 free ones
#                (bench/structured_load.py): the free rows' tok/s with and without it (ours only)
#       synth    only make the file
#       default: single,serve
# Environment: SIDES (ours,peer), STAGE (folder with bin/tempo9[.xz] and lib/, default .devrun),
#              PEER_BIN (folder with llama-bench/llama-server[.xz], default .devrun-peer/bin),
#              PRESET (qwen3-8b), QUANT (Q4_K_M), MODEL (an existing GGUF: no synth; a synth
#              file already in /tmp is reused), TOKENIZER (a tokenizer.json for synth --tokenizer;
#              staged: .devrun/shared/fixtures/tokenizers/qwen3/tokenizer.json), WAYS ("8 32"), GEN (128), AGENTS (8),
#              SYSTEM (10000), RATIO (2) or CTX (agents' context per sequence), RUN_ARGS (the
#              sampling flags of single/long, default "--temp 0"; e.g. "--temp 0.7 --top-k 40"),
#              WARMUP (single/long: 1 = each run warms up first, as llama-bench does; 0 = cold),
#              ROUNDS (serve: rounds of the batched workload per server, 1; the 32-way figures
#              vary ~10% between single samples).
# Everything goes to $OUT (bench.log, runs.err, bench_*way_*.json, serve logs).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/h200out}
mkdir -p "$OUT"
PARTS=${1:-single,serve}
SIDES=${SIDES:-ours,peer}
PRESET=${PRESET:-qwen3-8b}
QUANT=${QUANT:-Q4_K_M}
WAYS=${WAYS:-8 32}
GEN=${GEN:-128}
exec > >(tee -a "$OUT/bench.log") 2>&1

# FILE.xz -> FILE (no xz binary on the device image).
unxz_file() {
  python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$1"
}
unxz_dir() {
  for f in "$1"/*.xz; do
    [ -f "$f" ] || continue
    unxz_file "$f" && chmod +x "${f%.xz}" && rm "$f"
  done
}

# The peer links cuBLAS dynamically; the device's CUDA 13 (toolkit or PyTorch's wheels) has it.
cublas_dir() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublas.so.13" ] && { echo "$d"; return; }
  done
  d=$(find / -xdev -name 'libcublas.so.13*' -print -quit 2>/dev/null)
  [ -n "$d" ] && dirname "$d"
}

has() { [[ ",$SIDES," == *",$1,"* ]]; }

setup() {
  local st=$ROOT/${STAGE:-.devrun}
  python3 "$ROOT/scripts/devrun_unpack.py" "$st"  # lib.tar.xz and bin/*.xz
  T9=$st/bin/tempo9
  # The tokenizer may travel compressed (11 MB of JSON, ~2 MB as .xz).
  if [ -n "${TOKENIZER:-}" ] && [ ! -f "$TOKENIZER" ] && [ -f "$TOKENIZER.xz" ]; then
    unxz_file "$TOKENIZER.xz"
  fi
  export LD_LIBRARY_PATH=$st/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if has peer; then
    PB=${PEER_BIN:-$ROOT/.devrun-peer/bin}
    unxz_dir "$PB"
    local cb
    cb=$(cublas_dir)
    PEER_LD=$(dirname "$PB")/lib${cb:+:$cb}
    echo "peer: $PB, cuBLAS from ${cb:-NOT FOUND}"
    # llama-server serves `serve` and `agents`; llama-bench only `single` and `long` (a call's
    # 64 MiB holds one of them beside tempo9: build_peer_cuda.sh stage with PEER_BINS).
    [ -x "$PB/llama-server" ] || [ -x "$PB/llama-bench" ] ||
      { echo "peer binaries missing in $PB"; SIDES=${SIDES//peer/}; }
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv
  echo "cores: $(nproc), date: $(date -u +%FT%TZ), sides: $SIDES"
  # TOKENIZER=PATH/tokenizer.json: the synth file carries that real vocabulary (synth
  # --tokenizer) instead of the synthetic one, which cuts text into ~3.3x as many tokens.
  M=${MODEL:-/tmp/${PRESET}-${QUANT}${TOKENIZER:+-tok}.gguf}
  if [ ! -f "$M" ]; then
    local t0=$SECONDS
    "$T9" synth --preset "$PRESET" --quant "$QUANT" --seed 1 ${TOKENIZER:+--tokenizer "$TOKENIZER"} \
      -o "$M" 2>&1 | tail -1
    echo "synth $PRESET $QUANT: $((SECONDS - t0)) s, $(stat -c %s "$M") bytes"
  fi
}

peer() { LD_LIBRARY_PATH=$PEER_LD "$PB/$1" "${@:2}"; }

# tempo9 run: N-token raw prompt ('x' is one token in the synth vocabulary), GEN tokens.
# tempo9 run twice on an n-'x' prompt. --warmup (WARMUP=0: off; runs before 149 were cold): an
# untimed run of the same shape first, as llama-bench does before its repetitions, so the figures
# leave out first-use costs (lazy kernel loading, scratch growth, decode graph capture).
ours_run() {
  local n=$1 p warm=--warmup
  p=$(python3 -c "print('x'*$n)")
  [ "${WARMUP:-1}" = 0 ] && warm=
  for rep in 1 2; do
    # shellcheck disable=SC2086  # RUN_ARGS: more tempo9 run flags, word-split on purpose
    "$T9" run -m "$M" --raw -p "$p" -n "$GEN" ${RUN_ARGS:---temp 0} --ignore-eos --backend cuda \
      --ctx $((n + GEN + 64)) $warm >/dev/null 2>/tmp/t9run.err
    cat /tmp/t9run.err >>"$OUT/runs.err"
    echo "tempo9 run --backend cuda prompt $n gen $GEN${warm:+ warm} (rep $rep): $(grep -E '^\[(prompt|engine|cuda graphs|pipelined)' /tmp/t9run.err | tr '\n' ' ')"
  done
}

single() {
  echo "== single stream ($M)"
  # SINGLE_X: the prompt's 'x' count (with TOKENIZER's real vocabulary 8 x's are one token:
  # SINGLE_X=4096 gives 512 tokens).
  has ours && ours_run "${SINGLE_X:-512}"
  # SINGLE_X0 (e.g. 8: one token with the real vocabulary): ours from an (almost) empty context
  # too, the shape of llama-bench's tgN below (its decode starts at position 0).
  has ours && [ -n "${SINGLE_X0:-}" ] && ours_run "$SINGLE_X0"
  has peer && [ -x "$PB/llama-bench" ] && peer llama-bench -m "$M" -ngl 99 -p 512 -n "$GEN" -r 3 -o md
  # llama-bench's tgN above decodes from an empty context, ours after its 512-token prompt: the
  # same decode at ours' depth too (-d; "tgN @ d512"), so that the ratio compares equal contexts.
  has peer && [ -x "$PB/llama-bench" ] && [ "${PEER_DEPTH:-512}" -gt 0 ] &&
    peer llama-bench -m "$M" -ngl 99 -p 0 -n "$GEN" -d "${PEER_DEPTH:-512}" -r 3 -o md
}

# tempo9 with TEMPO9_CUDA_LEGACY_GEMV=1: Q4_K/Q6_K/Q8_0 on the previous dp4a GEMV for every row
# count (no tensor cores), the same run's before/after for the mma work.
legacy() {
  echo "== single stream, TEMPO9_CUDA_LEGACY_GEMV=1"
  TEMPO9_CUDA_LEGACY_GEMV=1 ours_run 512
}

kernels() {
  local f=$OUT/ncu_$(basename "$M" .gguf).csv
  TEMPO9_CUDA_GRAPHS=0 timeout "${NCU_S:-300}" ncu --clock-control none --csv --print-units base \
    --metrics gpu__time_duration.sum "$T9" run -m "$M" --raw \
    -p "$(python3 -c "print('x' * ${KERNELS_PROMPT:-4})")" -n "${KERNELS_GEN:-3}" --temp 0 \
    --ignore-eos --backend cuda --ctx $((${KERNELS_PROMPT:-4} + 64)) \
    --parallel "${KERNELS_PARALLEL:-1}" >"$f" 2>"$OUT/ncu_run.err"
  echo "ncu rc $?: $(grep -c gpu__time_duration "$f") kernels timed"
  # KERNELS_WINDOW=0: the prompt's window (a prefill step's map) instead of the last one.
  python3 "$ROOT/bench/ncu_kernels.py" "$f" ${KERNELS_WINDOW:+--window "$KERNELS_WINDOW"} |
    tee "$OUT/kernels_$(basename "$M" .gguf).txt" | head -48
}

# NCU_CACHE=none: ncu keeps the caches between its replay passes instead of flushing them, so a
# kernel finds what its predecessor left in L2, as in the step's chain (the 8B's bf16 GEMVs: their
# activation row's loads 21-36% of the samples flushed, run 287, and 20-24% kept, run 288).
ncu1() {
  local n=${KERNELS_PROMPT:-4}
  TEMPO9_CUDA_GRAPHS=0 timeout "${NCU_S:-300}" ncu --clock-control none \
    --cache-control "${NCU_CACHE:-all}" --kernel-name-base demangled \
    -k "regex:${NCU_KERNEL:?NCU_KERNEL: a regex on the demangled name}" \
    --launch-skip "${NCU_SKIP:-40}" --launch-count "${NCU_COUNT:-1}" --section LaunchStats \
    --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
    "$T9" run -m "$M" --raw -p "$(python3 -c "print('x' * $n)")" \
    -n "${KERNELS_GEN:-12}" --temp 0 --ignore-eos --backend cuda --ctx $((n + 64)) \
    --parallel "${KERNELS_PARALLEL:-1}" >"$OUT/ncu1.txt" 2>&1
  echo "ncu rc $?"
  grep -E "Grid Size|Duration|Memory Throughput|Achieved Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|No kernels were profiled" \
    "$OUT/ncu1.txt" | head -40
  [ "${NCU_SASS:-0}" = 1 ] || return 0
  # NCU_SASS=1: then the first NCU_SASS_COUNT (1) of those launches' warp samples per SASS
  # instruction (the smallest sampling interval: a decode kernel lasts microseconds), by
  # bench/ncu_sass.py.
  TEMPO9_CUDA_GRAPHS=0 timeout "${NCU_S:-300}" ncu --clock-control none \
    --cache-control "${NCU_CACHE:-all}" --kernel-name-base demangled -k "regex:$NCU_KERNEL" \
    --launch-skip "${NCU_SKIP:-40}" \
    --launch-count "${NCU_SASS_COUNT:-1}" --warp-sampling-interval 0 --section SourceCounters \
    --page source --print-source sass --csv "$T9" run -m "$M" --raw \
    -p "$(python3 -c "print('x' * $n)")" \
    -n "${KERNELS_GEN:-12}" --temp 0 --ignore-eos --backend cuda --ctx $((n + 64)) \
    --parallel "${KERNELS_PARALLEL:-1}" >"$OUT/ncu1_sass.csv" 2>&1
  echo "ncu sass rc $?"
  python3 "$ROOT/bench/ncu_sass.py" "$OUT/ncu1_sass.csv" >"$OUT/ncu1_sass.txt" 2>&1
}

nographs() {
  echo "== single stream, TEMPO9_CUDA_GRAPHS=0"
  TEMPO9_CUDA_GRAPHS=0 ours_run 512
}

long() {
  echo "== long prompt"
  has ours && ours_run 8192
  has peer && [ -x "$PB/llama-bench" ] && peer llama-bench -m "$M" -ngl 99 -p 8192 -n 0 -r 2 -o md
}

wait_http() {
  for _ in $(seq 240); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server at $1 did not come up"
  return 1
}

# One server at a time (they never share the GPU), the same workload for each.
drive() {
  local name=$1 url=$2 w
  for w in $WAYS; do
    echo "-- $name, $w concurrent requests (tempo9 bench cold: prompt ~300 tokens, $GEN generated)"
    "$T9" bench cold --url "$url" --agents "$w" --turns 1 --system-tokens 256 --turn-tokens 32 \
      --gen-tokens "$GEN" --rounds "${ROUNDS:-1}" --max-seconds 240 \
      --json "$OUT/bench_${w}way_$name.json" 2>&1 |
      tee "$OUT/bench_${w}way_$name.txt" |
      grep -E 'requests,|prompt tokens \||completion tokens|wall s|tok/s|TTFT p50|ITL p50|E2E p50|bench:|rror'
    echo "bench exit ${PIPESTATUS[0]}"
  done
}

serve() {
  echo "== batched decode"
  local max=0 w pid
  for w in $WAYS; do [ "$w" -gt "$max" ] && max=$w; done
  if has ours; then
    "$T9" serve -m "$M" --backend cuda --port 18411 --ctx 2048 --max-seqs "$max" \
      --kv-memory 16G >"$OUT/serve_tempo9.log" 2>&1 &
    pid=$!
    wait_http http://127.0.0.1:18411/v1/models && drive tempo9 http://127.0.0.1:18411
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
  fi
  if has peer; then
    peer llama-server -m "$M" -ngl 99 -np "$max" -c $((max * 2048)) --host 127.0.0.1 \
      --port 18412 --no-webui >"$OUT/serve_llama.log" 2>&1 &
    pid=$!
    wait_http http://127.0.0.1:18412/health && drive llama http://127.0.0.1:18412
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
  fi
}

agents() {
  local n=${AGENTS:-8} sys=${SYSTEM:-10000} pid ctx
  # Context per agent: RATIO (default 2) times the bench's approximate tokens, or CTX. The bench
  # sizes text for real tokenizers; the synthetic vocabulary cuts the same text into ~3.3x as
  # many tokens (SYSTEM=3000 RATIO=4 gives a ~10k-token system prompt and room for 3 turns).
  local turn=${TURN_TOKENS:-300}
  ctx=${CTX:-$((${RATIO:-2} * (sys + ${TURNS:-3} * (turn + ${AGENT_GEN:-128})) + 512))}
  echo "== agents: $n agents, $sys-token shared system prompt, ${TURNS:-3} turns of $turn"
  # BENCH_ARGS: extra `tempo9 bench agents` flags (e.g. --tools-in-request), word-split.
  # shellcheck disable=SC2206
  local args=(bench agents --agents "$n" --system-tokens "$sys" --turns "${TURNS:-3}"
    --turn-tokens "$turn" --gen-tokens "${AGENT_GEN:-128}" --run-id h200 --max-seconds
    "${AGENT_S:-300}" ${BENCH_ARGS:-})
  if has ours; then
    # shellcheck disable=SC2086  # SERVE_ARGS: extra serve flags, word-split on purpose
    "$T9" serve -m "$M" --backend cuda --port 18411 --ctx "$ctx" --max-seqs "$n" \
      --kv-memory 24G ${SERVE_ARGS:-} >"$OUT/serve_agents_tempo9.log" 2>&1 &
    pid=$!
    wait_http http://127.0.0.1:18411/v1/models &&
      "$T9" "${args[@]}" --url http://127.0.0.1:18411 --json "$OUT/agents_tempo9.json" 2>&1 |
      tee "$OUT/agents_tempo9.txt" | tail -25
    # The engine's own counters (steps, busy seconds by part, step-time histogram): busy time
    # against the bench's wall says how much of a round the device sat idle.
    curl -s http://127.0.0.1:18411/metrics >"$OUT/agents_metrics_tempo9.txt" 2>/dev/null
    python3 "$ROOT/bench/agents_breakdown.py" "$OUT/agents_tempo9.json" \
      "$OUT/agents_metrics_tempo9.txt" | tee "$OUT/agents_breakdown_tempo9.txt"
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
  fi
  if has peer; then
    peer llama-server -m "$M" -ngl 99 -np "$n" -c $((n * ctx)) --host 127.0.0.1 --port 18412 \
      --no-webui >"$OUT/serve_agents_llama.log" 2>&1 &
    pid=$!
    wait_http http://127.0.0.1:18412/health &&
      "$T9" "${args[@]}" --url http://127.0.0.1:18412 --json "$OUT/agents_llama.json" 2>&1 |
      tee "$OUT/agents_llama.txt" | tail -25
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
  fi
}

synth() { :; }  # the file only (setup makes it)

# `tempo9 parity`: the file's teacher-forced logits on CUDA (whole batch and one token per step)
# against the CPU backend (PARITY_TOKENS, 256; exit 1 when a clear top-1 differs).
parity() {
  echo "== parity, cuda vs cpu ($M)"
  "$T9" parity -m "$M" --backend cuda --tokens "${PARITY_TOKENS:-256}" 2>&1 | tee "$OUT/parity.txt"
  echo "parity exit ${PIPESTATUS[0]}"
}

# PARALLEL (8) copies of one prompt (SINGLE_X x's; 80000 is ~10k tokens with TOKENIZER's
# vocabulary) through `tempo9 run --parallel`: the engine's per-step time of a PARALLEL-row
# decode over shared pages, without HTTP or the bench client (ours only).
batched() {
  local n=${SINGLE_X:-512} k=${PARALLEL:-8} p
  echo "== $k requests of one prompt ($M)"
  p=$(python3 -c "print('x'*$n)")
  for rep in 1 2; do
    "$T9" run -m "$M" --raw -p "$p" -n "$GEN" --temp 0 --ignore-eos --backend cuda \
      --ctx $((n + GEN + 64)) --parallel "$k" >/dev/null 2>/tmp/t9run.err
    cat /tmp/t9run.err >>"$OUT/runs.err"
    echo "tempo9 run --parallel $k prompt $n gen $GEN (rep $rep): $(grep -E '^\[(prompt|engine|parallel)' /tmp/t9run.err | tr '\n' ' ')"
  done
}

profile() {
  local p f=$OUT/profile_$(basename "$M" .gguf).txt
  p=$(python3 -c "print('x'*512)")
  TEMPO9_CUDA_PROFILE=1 "$T9" run -m "$M" --raw -p "$p" -n "$GEN" --temp 0 --ignore-eos \
    --backend cuda --ctx $((512 + GEN + 64)) >/dev/null 2>"$f"
  head -24 "$f"
}

trace() {
  local n=${SINGLE_X:-512} p f
  f=$OUT/trace_$(basename "$M" .gguf)
  p=$(python3 -c "print('x'*$n)")
  # shellcheck disable=SC2086  # TRACE_ARGS: more tempo9 run flags, word-split on purpose
  TEMPO9_CUDA_TRACE=$f.tsv "$T9" run -m "$M" --raw -p "$p" -n "$GEN" --temp 0 --ignore-eos \
    --backend cuda --ctx $((n + GEN + 64)) --warmup ${TRACE_ARGS:-} >/dev/null 2>/tmp/t9run.err
  cat /tmp/t9run.err >>"$OUT/runs.err"
  echo "tempo9 run --backend cuda traced, prompt $n gen $GEN: $(grep -E '^\[(prompt|engine)|TRACE' /tmp/t9run.err | tr '\n' ' ')"
  { python3 "$ROOT/bench/kernel_trace.py" "$f.tsv" --last 100 --top 40
    python3 "$ROOT/bench/kernel_trace.py" "$f.tsv" --timeline 2
    echo "(two pipelined steps: 20 windows before the last)"
    python3 "$ROOT/bench/kernel_trace.py" "$f.tsv" --timeline 2 --skip 20
    echo "(one step's kernels in chain order: 20 windows before the last)"
    python3 "$ROOT/bench/kernel_trace.py" "$f.tsv" --sequence --skip 20; } >"$f.txt"
  head -32 "$f.txt"
}

pipeline() {
  local mode k p
  echo "== pipelined steps ($M)"
  for mode in off on off on; do
    RUN_ARGS="${RUN_ARGS:---temp 0} --pipeline $mode" ours_run "${SINGLE_X:-512}"
  done
  p=$(python3 -c "print('x'*800)")
  for k in 1 "${PARALLEL:-8}"; do
    for mode in off on; do
      "$T9" run -m "$M" --raw -p "$p" -n "${PIPE_GEN:-96}" --temp 0 --ignore-eos --backend cuda \
        --ctx 1000 --parallel "$k" --pipeline "$mode" >"$OUT/pipe_${k}_$mode.txt" 2>/tmp/t9run.err
      cat /tmp/t9run.err >>"$OUT/runs.err"
    done
    echo "greedy text at $k rows, --pipeline on vs off: $(cmp "$OUT/pipe_${k}_off.txt" \
      "$OUT/pipe_${k}_on.txt" >/dev/null 2>&1 && echo identical ||
      cmp "$OUT/pipe_${k}_off.txt" "$OUT/pipe_${k}_on.txt" 2>&1 | head -1) ($(wc -c <"$OUT/pipe_${k}_on.txt") bytes)"
  done
}

# One constrained request beside PARALLEL-1 free ones (bench/structured_load.py): what a row
# whose logits come to the host (structured output) costs the rows batched with it. SERVE_ARGS:
# more tempo9 serve flags (e.g. --pipeline on).
structured() {
  local pid
  echo "== structured output beside free rows ($M)"
  # shellcheck disable=SC2086  # SERVE_ARGS: more tempo9 serve flags, word-split on purpose
  "$T9" serve -m "$M" --backend cuda --port 18413 --ctx 2048 --max-seqs "${PARALLEL:-8}" \
    --kv-memory 16G ${SERVE_ARGS:-} >"$OUT/serve_structured.log" 2>&1 &
  pid=$!
  wait_http http://127.0.0.1:18413/v1/models &&
    python3 "$ROOT/bench/structured_load.py" --url http://127.0.0.1:18413 --rows "${PARALLEL:-8}" \
      --gen "$GEN"
  kill $pid 2>/dev/null
  wait $pid 2>/dev/null
}

setup
IFS=, read -ra parts <<<"$PARTS"
for part in "${parts[@]}"; do "$part"; done
echo "h200_bench done: $PARTS ($SIDES)"
