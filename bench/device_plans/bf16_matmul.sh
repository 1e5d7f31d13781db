#!/usr/bin/env bash
# The bf16 tensor-core matmul of fragment-ordered Q4_K and Q6_K weights (sessions 44-45,
# docs/CUDA.md stages 42-43; TEMPO9_CUDA_BF16=1) in the served Qwen3-8B shape (Q4_K_M: Q6_K for
# attn_v and ffn_down in half the layers, and the output head): its op tests, then the same runs
# three ways side by side: int8 (bf16=0), bf16 for Q4_K only (TEMPO9_CUDA_BF16_Q6K=0), bf16 for
# both: a single greedy decode (512-token prompt + 128), a 6000-token prompt, 8 and 32 rows
# decoding together; then issue 7's 32-way serve round for int8 and for both. Text is compared on
# its first 96 bytes (the paths round differently: the texts may part).
# Here: `bash scripts/device_stage.sh cuda_gemv_bench`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/bf16_matmul.sh` (~7 min with the synth; stdout). With the bench staged
# it first times the 8B's Q4_K and Q6_K shapes alone, int8 against bf16.
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests 'CudaBf16*:Cuda.Matmul*:Cuda.GetRows*'

# The kernels alone (cuda_gemv_bench; us a call, GB/s, GFLOP/s), the 8B's shapes at 1, 8, 32 and
# 512 rows: gate/up and down (Q4_K here), attn_v (4096 -> 1024), ffn_down (12288 -> 4096) and the
# output head (4096 -> 151936) as Q6_K.
if [ -x .devrun/bin/cuda_gemv_bench ]; then
  K4=4096x24576x1,4096x24576x8,4096x24576x32,4096x24576x512,12288x4096x1,12288x4096x32
  K6=4096x1024x1,4096x1024x8,12288x4096x1,12288x4096x8,12288x4096x32,12288x4096x512
  K6=$K6,4096x151936x1,4096x151936x32
  for b in 0 1; do
    T9_BENCH_BF16=$b .devrun/bin/cuda_gemv_bench 3350 Q4_K "$K4" 2>&1 | grep -E '^Q4_K'
    T9_BENCH_BF16=$b .devrun/bin/cuda_gemv_bench 3350 Q6_K "$K6" 2>&1 | grep -E '^Q6_K'
  done
  echo "t=$((SECONDS - T0)) s"
fi

S8="SINGLE_X=512 GEN=128 PRESET=qwen3-8b QUANT=Q4_K_M SIDES=ours"
M=/tmp/qwen3-8b-Q4_K_M.gguf
NAME=8B
env $S8 OUT=/tmp/synth8 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"

rows_run() {  # bf16 flag (0, q4k, 1), rows, prompt x's, generated tokens
  local p q6k=1 bf16=$1
  [ "$bf16" = q4k ] && bf16=1 q6k=0
  p=$(python3 -c "print('x'*$3)")
  env TEMPO9_CUDA_BF16="$bf16" TEMPO9_CUDA_BF16_Q6K="$q6k" "$T9" run -m "$M" --raw -p "$p" \
    -n "$4" --temp 0 --ignore-eos --backend cuda --ctx $(($3 + $4 + 64)) --parallel "$2" --warmup >/dev/null 2>/tmp/e.txt
  echo "8B bf16=$1, $2 rows, $3-token prompt: $(grep -E '^\[(prompt|engine|parallel)' /tmp/e.txt | tr '\n' ' ')"
  grep -iE "error|check failed" /tmp/e.txt | head -3
}

# BF16_FORMS (default "0 q4k 1") and PROFILE_ROWS ("1 32") shorten the plan when device time is short.
for b in ${BF16_FORMS:-0 q4k 1}; do
  if [ $b = q4k ]; then
    decode_one "bf16_$b" TEMPO9_CUDA_BF16=1 TEMPO9_CUDA_BF16_Q6K=0
  else
    decode_one "bf16_$b" TEMPO9_CUDA_BF16=$b
  fi
  echo "  text: $(head -c 96 /tmp/one_bf16_$b.txt | tr '\n' ' ')"
  rows_run $b 1 6000 8
  rows_run $b 8 512 64
  rows_run $b 32 512 64
  echo "t=$((SECONDS - T0)) s"
done
# The GEMV's first weight copies before its dependent-launch wait (session 45), off:
decode_one bf16_1_late TEMPO9_CUDA_BF16=1 TEMPO9_CUDA_BF16_EARLY=0
cmp -n 96 /tmp/one_bf16_0.txt /tmp/one_bf16_1.txt && echo "first 96 bytes of text: same"
for b in 0 1; do
  # shellcheck disable=SC2086  # S8: word-split on purpose
  env TEMPO9_CUDA_BF16=$b $S8 MODEL=$M WAYS=32 ROUNDS=2 OUT=/tmp/serve_b$b \
    bash bench/h200_bench.sh serve 2>&1 | grep -E 'wall s|tok/s|ITL p50|TTFT p50' | tr '\n' ' ' |
    sed "s/^/8B 32-way serve, bf16=$b: /"
  echo
  echo "t=$((SECONDS - T0)) s"
done
# Per-op GPU times (TEMPO9_CUDA_PROFILE=1: graphs and PDL off, so absolute step times differ):
# the matmuls of one decode row and of 32 rows, int8 against bf16 (both formats).
for b in 0 1; do
  for rows in ${PROFILE_ROWS:-1 32}; do
    p=$(python3 -c "print('x'*512)")
    TEMPO9_CUDA_PROFILE=1 TEMPO9_CUDA_BF16=$b "$T9" run -m "$M" --raw -p "$p" -n 32 --temp 0 \
      --ignore-eos --backend cuda --ctx 700 --parallel $rows >/dev/null 2>/tmp/e.txt
    echo "op profile, bf16=$b, $rows rows:"
    grep -E '\[cuda profile\].*(matmul|to_bf16)' /tmp/e.txt | head -14
  done
done
echo "t=$((SECONDS - T0)) s"
