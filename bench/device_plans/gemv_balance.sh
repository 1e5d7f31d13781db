#!/usr/bin/env bash
# The bf16 GEMV's blocks balanced (docs/CUDA.md stage 50: every block the same number of units;
# the 8B's gate/up 384 blocks of two pairs instead of 660 with 108 doing two), against
# TEMPO9_CUDA_GEMV_BALANCE=0, on the 8B Q4_K_M's single decode (alternated, twice each; the greedy
# texts must be equal: the same bits) and 8 rows, beside two existing knobs re-checked on this
# step (TEMPO9_CUDA_NORM_CODES=0: the pre-norms as one block a row with no int8 codes, which the
# bf16 GEMVs never read; TEMPO9_CUDA_EARLY_WEIGHTS=0: no copies before the dependent-launch
# wait), then the balanced step's trace. ~6 min.
# Here: `bash scripts/device_stage.sh` and `rm -rf .devrun/shared/fixtures/reference`; there
# (device tool, carry [".devrun"]): `bash bench/device_plans/gemv_balance.sh` (stdout and
# $OUT/log.txt; the tests in $OUT/tests.txt, the trace in $OUT/q4).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/gemv_balance}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*:Cuda.Matmul*}"
M=/tmp/q8b.gguf NAME=8B
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M MODEL=$M OUT="$OUT/q4" bash bench/h200_bench.sh synth 2>&1 |
  grep -E "^synth"
for rep in 1 2; do
  decode_one "bal$rep"
  decode_one "plain$rep" TEMPO9_CUDA_GEMV_BALANCE=0
done
decode_one nocodes TEMPO9_CUDA_NORM_CODES=0
decode_one noearly TEMPO9_CUDA_EARLY_WEIGHTS=0
for t in plain1 nocodes noearly; do
  cmp /tmp/one_bal1.txt "/tmp/one_$t.txt" && echo "8B greedy text: bal1 = $t ($(wc -c </tmp/one_bal1.txt) bytes)"
done
p=$(python3 -c "print('x'*512)")
for mode in bal plain; do
  env $([ $mode = plain ] && echo TEMPO9_CUDA_GEMV_BALANCE=0) "$T9" run -m "$M" --raw -p "$p" -n 64 \
    --temp 0 --ignore-eos --backend cuda --ctx 1000 --parallel 8 >"/tmp/p8_$mode.txt" 2>/tmp/e.txt
  echo "8B 8 rows $mode: $(grep -E '^\[(engine)' /tmp/e.txt | tr '\n' ' ' | cut -c1-120)"
done
cmp /tmp/p8_bal.txt /tmp/p8_plain.txt && echo "8B 8-row text: bal = plain ($(wc -c </tmp/p8_bal.txt) bytes)"
echo "t=$((SECONDS - T0)) s"
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 OUT="$OUT/q4" MODEL=$M \
  bash bench/h200_bench.sh trace 2>&1 | grep -vE "^h200_bench done" | head -24
echo "t=$((SECONDS - T0)) s"
