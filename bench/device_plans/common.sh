# Sourced by the device plans (bench/device_plans/*.sh), run there from the repository root with
# .devrun carried (scripts/device_stage.sh): the log in $OUT/log.txt, the staged binaries and the
# tokenizer unpacked, the library path and the fixtures' directory set. Sets ROOT, T0, TOK, T9.
set -u
ROOT=$PWD
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$SECONDS
export TOK=$ROOT/.devrun/shared/fixtures/tokenizers/qwen3/tokenizer.json
python3 -c "import lzma; open('$TOK','wb').write(lzma.open('$TOK.xz').read())"
export LD_LIBRARY_PATH=$ROOT/.devrun/lib
export TEMPO9_SHARED_DIR=$ROOT/.devrun/shared
T9=$ROOT/.devrun/bin/tempo9
python3 scripts/devrun_unpack.py .devrun  # lib.tar.xz and bin/*.xz (a no-op once done)

# The plans' two 8-layer files, written once a machine (a file already there is kept): the
# Qwen3.5-35B-A3B shape cut to 8 layers (6 Gated DeltaNet; Q8_0 unless $2; ~20 s) with the real
# tokenizer, and the Qwen3-8B shape cut to 8 layers, Q4_K_M (~40 s).
synth_35b_8l() {
  [ -f "$1" ] || "$T9" synth --arch qwen35moe --config bench/device_plans/qwen35moe_8layer.json \
    --quant "${2:-Q8_0}" --seed 1 --tokenizer "$TOK" -o "$1" >/dev/null 2>&1 || echo "synth failed"
}
synth_8b_8l() {
  [ -f "$1" ] || "$T9" synth --arch qwen3 --config bench/device_plans/qwen3_8b_8layer.json \
    --quant Q4_K_M --seed 1 -o "$1" >/dev/null 2>&1 || echo "synth failed"
}

# One 8-agent run of the 35B file through h200_bench.sh (the plan sets S35 and M): tag, then
# extra environment (VAR=value ...). Prints the TTFT / ITL / throughput line, the breakdown and
# the server log's graph, error and warm-up lines.
agents() {
  local tag=$1
  shift
  # shellcheck disable=SC2086,SC2154  # S35: word-split on purpose; S35, M: the plan's
  env "$@" $S35 AGENTS=8 MODEL=$M OUT=/tmp/agents_$tag bash bench/h200_bench.sh agents >/dev/null 2>&1
  echo "agents $tag: $(grep -E 'turn 1 TTFT p50|turn 2 TTFT p50|turn 3 TTFT p50|ITL p50|wall s|effective tok/s' /tmp/agents_$tag/agents_tempo9.txt | tr '\n' ' ')"
  cat /tmp/agents_$tag/agents_breakdown_tempo9.txt
  grep -E "cuda graphs|error|warm-up" /tmp/agents_$tag/serve_agents_tempo9.log | tail -3
}

# One 8B 32-way serve run (h200_bench.sh serve, ROUNDS=2) with the few-row GEMV's MMA_ROWS_MIN=$1
# (MAX 32); the plan sets S8 and M. Prints the wall / tok/s / ITL / TTFT line.
serve32() {
  # shellcheck disable=SC2086,SC2154  # S8: word-split on purpose; S8, M: the plan's
  env TEMPO9_CUDA_MMA_ROWS_MIN="$1" TEMPO9_CUDA_MMA_ROWS_MAX=32 $S8 MODEL=$M WAYS=32 ROUNDS=2 \
    OUT=/tmp/serve_$1 bash bench/h200_bench.sh serve 2>&1 | grep -E 'wall s|tok/s|ITL p50|TTFT p50' |
    tr '\n' ' ' | sed "s/^/8B 32-way, MMA_ROWS_MIN=$1: /"
  echo
}

# One 8-row sampled run of $M with logprobs (top 5; top-k 40, so the device settles every draw),
# beside the device's draw ($1 = 0) or over rows copied to the host ($1 = 1); text in /tmp/lp_$1.txt.
logprobs_run() {
  local p host=()
  p=$(python3 -c "print('x'*800)")
  [ "$1" = 1 ] && host=(TEMPO9_SAMPLE_ON_HOST=1)  # set at all = on (engine_runner.cpp)
  # shellcheck disable=SC2154  # M: the plan's
  env -u TEMPO9_SAMPLE_ON_HOST "${host[@]}" "$T9" run -m "$M" --raw -p "$p" -n 64 --temp 0.8 --top-k 40 \
    --seed 5 --logprobs 5 --ignore-eos --backend cuda --ctx 1000 --parallel 8 \
    --warmup >"/tmp/lp_$1.txt" 2>/tmp/e.txt
  echo "8B 8 rows logprobs, SAMPLE_ON_HOST=$1: $(grep -E '^\[(engine|logprobs)' /tmp/e.txt | tr '\n' ' ')"
}

# One greedy decode of a 512-character prompt + 128 tokens of $M (the plan's; warm-up first), the
# text in /tmp/one_TAG.txt: tag, then extra environment (VAR=value ...). Prints "$NAME TAG: " and
# tempo9 run's prompt and engine lines.
decode_one() {
  local tag=$1 p
  shift
  p=$(python3 -c "print('x'*${PROMPT_X:-512})")  # PROMPT_X: another length
  # shellcheck disable=SC2154  # M, NAME: the plan's
  # PARALLEL=N: N copies of the prompt decoded together (a batched step's rows). GEN: tokens
  # generated (128; more averages out the host's noise, which whole-35B runs see most), the
  # context room for them beside the prompt (<= 512 tokens).
  local gen=${GEN:-128}
  env "$@" "$T9" run -m "$M" --raw -p "$p" -n "$gen" --temp 0 --ignore-eos --backend cuda \
    --ctx $((gen > 400 ? gen + 600 : 1000)) --warmup ${PARALLEL:+--parallel "$PARALLEL"} >"/tmp/one_$tag.txt" 2>/tmp/e.txt
  echo "$NAME $tag: $(grep -E '^\[(prompt|engine)' /tmp/e.txt | tr '\n' ' ')"
  [ -s "/tmp/one_$tag.txt" ] || tail -3 /tmp/e.txt  # a failed run says why
}

# One kernel of the plan's file M under ncu (h200_bench.sh ncu1, its sections, then the warp
# samples per SASS instruction: NCU_SASS): tag, the demangled-name regex (ncu's form, casts
# included), launches to skip, launches to profile. KERNELS_PROMPT: the plan's prompt length.
ncu_profile() {
  echo "== $1"
  SIDES=ours MODEL=$M OUT="$OUT/$1" KERNELS_GEN=12 NCU_KERNEL="$2" NCU_SKIP="$3" \
    NCU_COUNT="$4" NCU_SASS_COUNT="$4" NCU_S=240 NCU_SASS=1 bash bench/h200_bench.sh ncu1 2>&1 |
    grep -vE "^h200_bench done"
  grep -E "^  void |Executed Instructions|Issued Instructions|Registers Per Thread|Warp Cycles Per Issued|Duration" \
    "$OUT/$1/ncu1.txt" | head -40
  head -120 "$OUT/$1/ncu1_sass.txt"  # the stalls per SASS instruction
}

# The CUDA op tests matching gtest filter $1 (full output in $OUT/tests.txt): the card, the
# return code, the PASSED / FAILED lines and the first failure details.
op_tests() {
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  .devrun/bin/test_cuda_ops --gtest_filter="$1" >"$OUT/tests.txt" 2>&1
  echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.txt" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|Expected|Which is|got |CHECK failed' "$OUT/tests.txt" | head -20
}

# A 512- and a 2048-token prompt ('x' is one token of the synthetic vocabulary) with 32 tokens
# greedy after each, for each value of the environment variable $1 among $2 (space-separated),
# the values alternated twice; the texts in /tmp/ab_VALUE_N-REP.txt, then each value's first texts
# compared with the first value's (an A/B of forms that must give the same bits). The plan sets M
# and NAME.
prompt_ab() {
  local var=$1 vals=$2 rep v n p first=${2%% *}
  for rep in 1 2; do
    for v in $vals; do
      for n in 512 2048; do
        p=$(python3 -c "print('x'*$n)")
        # shellcheck disable=SC2154  # M: the plan's
        env "$var=$v" "$T9" run -m "$M" --raw -p "$p" -n 32 --temp 0 --ignore-eos --backend cuda \
          --ctx $((n + 64)) --warmup >"/tmp/ab_${v}_$n-$rep.txt" 2>/tmp/e.txt
        echo "$NAME $var=$v, prompt $n ($rep): $(grep -E '^\[prompt' /tmp/e.txt | tr '\n' ' ')"
      done
    done
  done
  for v in $vals; do
    [ "$v" = "$first" ] && continue
    for n in 512 2048; do
      cmp -s "/tmp/ab_${first}_$n-1.txt" "/tmp/ab_${v}_$n-1.txt" && echo "text $var=$v, $n: = $first" ||
        echo "text $var=$v, $n: DIFFERS from $var=$first's"
    done
  done
}
