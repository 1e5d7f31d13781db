#!/usr/bin/env bash
# The few-row tensor-core GEMV's first device run (written in session 38, when no device was lent;
# cuda_gemv_mma.cu: Q8_0 at 2-15 rows, off by default: TEMPO9_CUDA_MMA_ROWS_MIN=2 turns it on,
# 1 also takes one-row calls) + kernel_trace --min-us/--max-us (session 39's prompt-step kernels:
# bench/device_plans/prompt_kernels.sh, the next call). Here: `bash
# scripts/device_stage.sh cuda_gemv_bench`; there (device tool, carry
# [".devrun"]): `bash bench/device_plans/few_row_mma.sh` (~7 min; $OUT/log.txt). The matmul tests;
# the GEMV bench at 1-15 rows on and off; greedy text at 8 rows on and off; the 35B single decode
# with the kernel also at one row; 8 agents on / off twice (with serve's warm-up, on by default
# for CUDA since session 39); then, while the call's time allows,
# the load traced (its prompt steps, windows >= 60 ms, and its decode steps, 4-20 ms, as kernel
# tables) and an ncu of the kernel.
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
CUPTI=/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
.devrun/bin/test_cuda_ops --gtest_filter='Cuda.Matmul*:Cuda.FewRow*' >$OUT/tests.txt 2>&1
RC=$?
echo "matmul tests rc $RC: $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests.txt | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|row ' $OUT/tests.txt | head -20
SH=2048x12352x8,4096x2048x8,2048x4096x8,2048x1024x8,4096x2048x4,2048x12352x2,4096x2048x15,2048x12352x1,4096x2048x1
for v in 1 2 0; do
  echo "gemv bench, TEMPO9_CUDA_MMA_ROWS_MIN=$v:"
  TEMPO9_CUDA_MMA_ROWS_MIN=$v T9_BENCH_REPLAY=1 .devrun/bin/cuda_gemv_bench 4234 Q8_0 $SH 2>&1 | grep -E '^(type|Q8_0)'
done
# Every CUDA test with the kernel on in every backend of the process (the environment overrides
# CudaBackendConfig): the model tests' few-row steps take it too.
TEMPO9_CUDA_MMA_ROWS_MIN=2 .devrun/bin/test_cuda_ops --gtest_filter='Cuda*:*/Cuda*' >$OUT/tests_on.txt 2>&1
echo "all CUDA tests with the kernel on, rc $?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests_on.txt | tr '\n' ' ')"
grep -E '^\[  FAILED' $OUT/tests_on.txt | head -10
[ $RC = 0 ] || exit 1
env $S35 OUT=/tmp/synth bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
P=$(python3 -c "print('x'*800)")
for v in 2 0; do
  TEMPO9_CUDA_MMA_ROWS_MIN=$v "$T9" run -m "$M" --raw -p "$P" -n 96 --temp 0 --ignore-eos --backend cuda \
    --ctx 1000 --parallel 8 >/tmp/par8_$v.txt 2>/tmp/e.txt
  echo "8 rows, MMA_ROWS_MIN=$v: $(grep -E '^\[(prompt|engine)' /tmp/e.txt | tr '\n' ' ')"
done
echo "greedy text at 8 rows, few-row GEMV on vs off: $(cmp /tmp/par8_2.txt /tmp/par8_0.txt >/dev/null && echo identical || echo DIFFERENT) ($(wc -c </tmp/par8_2.txt) bytes)"
P4=$(python3 -c "print('x'*4096)")
for v in 1 2; do
  TEMPO9_CUDA_MMA_ROWS_MIN=$v "$T9" run -m "$M" --raw -p "$P4" -n 128 --temp 0 --ignore-eos --backend cuda \
    --ctx 4400 --warmup >/tmp/one_$v.txt 2>/tmp/e.txt
  echo "35B single, MMA_ROWS_MIN=$v: $(grep -E '^\[(prompt|engine)' /tmp/e.txt | tr '\n' ' ')"
done
echo "greedy text at 1 row, the mma GEMV at 1 row vs off: $(cmp /tmp/one_1.txt /tmp/one_2.txt >/dev/null && echo identical || echo DIFFERENT)"
agents on TEMPO9_CUDA_MMA_ROWS_MIN=2
agents off TEMPO9_CUDA_MMA_ROWS_MIN=0
agents on2 TEMPO9_CUDA_MMA_ROWS_MIN=2
agents off2 TEMPO9_CUDA_MMA_ROWS_MIN=0
echo "t=$((SECONDS - T0)) s"
# The rest only while the call's 10 minutes allow (the parts above take ~6).
[ $((SECONDS - T0)) -lt 420 ] || exit 0
agents traced TEMPO9_CUDA_TRACE=/tmp/agents.tsv TEMPO9_CUPTI_LIB=$CUPTI
echo "t=$((SECONDS - T0)) s"
echo "== prompt steps (traced)"
python3 bench/kernel_trace.py /tmp/agents.tsv --min-us 60000 --last 40 --top 40
echo "== decode steps at 8 rows (traced)"
python3 bench/kernel_trace.py /tmp/agents.tsv --min-us 4000 --max-us 20000 --last 300 --top 40
echo "t=$((SECONDS - T0)) s"
[ $((SECONDS - T0)) -lt 480 ] || exit 0
echo "== ncu: the few-row GEMV at 8 rows (35B, 8 sequences, the 11th such call)"
env TEMPO9_CUDA_MMA_ROWS_MIN=2 $S35 MODEL=$M OUT=$OUT KERNELS_PARALLEL=8 NCU_KERNEL=gemv_mma_rows \
  NCU_SKIP=10 NCU_S=100 bash bench/h200_bench.sh ncu1 2>&1 | tail -25
echo "t=$((SECONDS - T0)) s"
