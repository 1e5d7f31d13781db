#!/usr/bin/env bash
# The GLU stored from the gate/up GEMV's epilogue (docs/CUDA.md stage 49: run 240 kept it on,
# 314 against 309 tok/s): the op tests (CudaBf16.* with MatmulGluEqualsTheOps bitwise against
# matmul_shared_x + glu, the whole-model tests over the forward pass's matmul_glu), then the 8B
# Q4_K_M's single decode with TEMPO9_CUDA_FUSE_GLU on and off (alternated, twice each; greedy text
# compared), an 8-row decode's text both ways, and the fused step's trace. ~6 min. Keep it on if
# the texts match and decode is faster (stage 48's trace: the GLU launch 4.4 us x 36 a step).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/glu_epilogue.sh` (stdout; the trace in $OUT/q4).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/glu}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*:*CudaModel*:CudaHybridModel*}"
M=/tmp/q8b.gguf NAME=8B
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M MODEL=$M OUT="$OUT/q4" bash bench/h200_bench.sh synth 2>&1 |
  grep -E "^synth"
for rep in 1 2; do
  decode_one "fused$rep"
  decode_one "plain$rep" TEMPO9_CUDA_FUSE_GLU=0
done
cmp /tmp/one_fused1.txt /tmp/one_plain1.txt && echo "8B greedy text: fused = plain ($(wc -c </tmp/one_fused1.txt) bytes)"
p=$(python3 -c "print('x'*512)")
for mode in fused plain; do
  env $([ $mode = plain ] && echo TEMPO9_CUDA_FUSE_GLU=0) "$T9" run -m "$M" --raw -p "$p" -n 64 \
    --temp 0 --ignore-eos --backend cuda --ctx 1000 --parallel 8 >"/tmp/p8_$mode.txt" 2>/tmp/e.txt
  echo "8B 8 rows $mode: $(grep -E '^\[(engine)' /tmp/e.txt | tr '\n' ' ' | cut -c1-120)"
done
cmp /tmp/p8_fused.txt /tmp/p8_plain.txt && echo "8B 8-row text: fused = plain ($(wc -c </tmp/p8_fused.txt) bytes)"
echo "t=$((SECONDS - T0)) s"
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 OUT="$OUT/q4" MODEL=$M \
  bash bench/h200_bench.sh trace 2>&1 | grep -vE "^h200_bench done" | head -24
echo "t=$((SECONDS - T0)) s"
