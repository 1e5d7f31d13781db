#!/usr/bin/env bash
# tempo9 (CUDA) beside llama.cpp (CUDA) on one synthetic GGUF, on the device machine (H200).
#
# Here first:  TEMPO9_CUDA_BUILD=build-cuda2 scripts/device_test_ops.sh build   (-> .devrun)
#              scripts/build_peer_cuda.sh && scripts/build_peer_cuda.sh stage  (-> .devrun-peer)
# There (run tool, carry [".devrun", ".devrun-peer"], repo root):
#   bash bench/h200_bench.sh [PARTS]      PARTS: comma list of
#       single   tempo9 run --backend cuda (512-token prompt + 128 generated) and llama-bench
#                -ngl 99 -p 512 -n 128 on the same file
#       long     llama-bench -p 8192 -n 0 and tempo9 run with an 8192-token prompt
#       serve    tempo9 serve --backend cuda vs llama-server -ngl 99 -np 32, both driven by
#                `tempo9 bench cold` at 8 and 32 concurrent requests (A = tempo9, B = llama)
#       default: single,serve
# Environment: STAGE (folder with bin/tempo9[.xz] and lib/, default .devrun), PRESET (qwen3-8b), QUANT (Q4_K_M), MODEL (an existing GGUF: skip synth),
#              WAYS ("8 32"), GEN (128).
# Everything goes to $OUT (bench.log, bench_*.json); a summary is printed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/h200out}
mkdir -p "$OUT"
PARTS=${1:-single,serve}
PRESET=${PRESET:-qwen3-8b}
QUANT=${QUANT:-Q4_K_M}
WAYS=${WAYS:-8 32}
GEN=${GEN:-128}
LOG=$OUT/bench.log
exec > >(tee -a "$LOG") 2>&1

unxz_dir() {
  for f in "$1"/bin/*.xz; do
    [ -f "$f" ] || continue
    python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$f"
    chmod +x "${f%.xz}" && rm "$f"
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

setup() {
  local st=$ROOT/${STAGE:-.devrun}
  unxz_dir "$st"
  T9=$st/bin/tempo9
  export LD_LIBRARY_PATH=$st/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -d "$ROOT/.devrun-peer" ]; then
    unxz_dir "$ROOT/.devrun-peer"
    local cb
    cb=$(cublas_dir)
    echo "cuBLAS for the peer: ${cb:-NOT FOUND}"
    PEER_LD=$ROOT/.devrun-peer/lib${cb:+:$cb}
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv
  echo "cores: $(nproc), date: $(date -u +%FT%TZ)"
  if [ -n "${MODEL:-}" ]; then
    M=$MODEL
  else
    M=/tmp/${PRESET}-${QUANT}.gguf
    local t0=$SECONDS
    "$T9" synth --preset "$PRESET" --quant "$QUANT" --seed 1 -o "$M" 2>&1 | tail -1
    echo "synth $PRESET $QUANT: $((SECONDS - t0)) s, $(stat -c %s "$M") bytes"
  fi
}

peer() { LD_LIBRARY_PATH=$PEER_LD "$ROOT/.devrun-peer/bin/$1" "${@:2}"; }

# tempo9 run: N-token raw prompt ('x' is one token in the synth vocabulary), GEN tokens.
ours_run() {
  local n=$1 p
  p=$(python3 -c "print('x'*$n)")
  for rep in 1 2; do
    "$T9" run -m "$M" --raw -p "$p" -n "$GEN" --temp 0 --ignore-eos --backend cuda \
      --ctx $((n + GEN + 64)) >/dev/null 2>/tmp/t9run.err
    cat /tmp/t9run.err >>"$OUT/runs.err"
    echo "tempo9 run --backend cuda prompt $n gen $GEN (rep $rep): $(grep '^\[prompt' /tmp/t9run.err)"
  done
}

single() {
  echo "== single stream"
  ours_run 512
  [ -n "${PEER_LD:-}" ] && peer llama-bench -m "$M" -ngl 99 -p 512 -n "$GEN" -r 3 -o md
}

long() {
  echo "== long prompt"
  ours_run 8192
  [ -n "${PEER_LD:-}" ] && peer llama-bench -m "$M" -ngl 99 -p 8192 -n 0 -r 2 -o md
}

wait_http() {
  for _ in $(seq 240); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server at $1 did not come up"
  return 1
}

serve() {
  echo "== batched decode (tempo9 bench cold, prompt ~300 tokens, $GEN generated each)"
  local max=0 w
  for w in $WAYS; do [ "$w" -gt "$max" ] && max=$w; done
  "$T9" serve -m "$M" --backend cuda --port 18411 --ctx 2048 --max-seqs "$max" \
    --kv-memory 16G >"$OUT/serve_tempo9.log" 2>&1 &
  local p1=$! p2=""
  wait_http http://127.0.0.1:18411/v1/models
  local cmp=()
  if [ -n "${PEER_LD:-}" ]; then
    peer llama-server -m "$M" -ngl 99 -np "$max" -c $((max * 2048)) --host 127.0.0.1 \
      --port 18412 --no-webui >"$OUT/serve_llama.log" 2>&1 &
    p2=$!
    wait_http http://127.0.0.1:18412/health && cmp=(--compare http://127.0.0.1:18412)
  fi
  for w in $WAYS; do
    echo "-- $w ways (A = tempo9 serve --backend cuda, B = llama-server -ngl 99 -np $max)"
    "$T9" bench cold --url http://127.0.0.1:18411 "${cmp[@]}" --agents "$w" --turns 1 \
      --system-tokens 256 --turn-tokens 32 --gen-tokens "$GEN" --max-seconds 240 \
      --json "$OUT/bench_${w}way.json" 2>&1 | grep -vE '^\s*$'
  done
  kill $p1 $p2 2>/dev/null
  wait $p1 $p2 2>/dev/null
  tail -3 "$OUT/serve_tempo9.log"
}

setup
IFS=, read -ra parts <<<"$PARTS"
for part in "${parts[@]}"; do "$part"; done
echo "h200_bench done: $PARTS"
