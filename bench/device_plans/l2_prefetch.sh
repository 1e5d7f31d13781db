#!/usr/bin/env bash
# The next matrices' weights into L2 while DRAM would sit idle (docs/CUDA.md stage 51), two
# forms, each behind a knob read once per process (off by default; the same bits every way):
#   TEMPO9_CUDA_BF16_L2_PREFETCH=N     each bf16 GEMV block sends its first N units into L2
#                                      before its dependent-launch wait (N = 1 is nearly all of
#                                      a matrix: the 8B's GEMV blocks take one unit each, but
#                                      108 of gate/up's 660);
#   TEMPO9_CUDA_ATTN_L2_PREFETCH_MB=M  the decode attention's blocks send up to M MB of the
#                                      layer's next weights (o, then gate and up) after theirs.
# Also the pair launch (q/k of one type beside a Q6_K v in one GEMV grid; TEMPO9_CUDA_BF16_PAIRS=1,
# off by default). The op tests with the prefetch on; the 8B Q4_K_M's single decode in each form
# (FORMS), alternated twice (the greedy texts compared), 8 rows in three (ROWS8), and one traced
# run (TRACE_ENV). ~8 min.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/l2_prefetch.sh` (stdout; the trace in $OUT/q4).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/l2p}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
TEMPO9_CUDA_BF16_L2_PREFETCH=1 TEMPO9_CUDA_ATTN_L2_PREFETCH_MB=32 \
  op_tests "${TESTS:-CudaBf16*:Cuda.Matmul*:CudaAttention*}"
M=/tmp/q8b.gguf NAME=8B
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M MODEL=$M OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 |
  grep -E "^synth"
# Each form: a tag, then its environment. "base" is main's defaults but the pair launch
# (TEMPO9_CUDA_BF16_PAIRS=0); "pair" the pair launch alone; the others the pair launch plus the
# L2 prefetch at (N, M).
FORMS=${FORMS:-"base:TEMPO9_CUDA_BF16_PAIRS=0 pair:TEMPO9_CUDA_BF16_PAIRS=1
  n1:TEMPO9_CUDA_BF16_PAIRS=1,TEMPO9_CUDA_BF16_L2_PREFETCH=1
  m24:TEMPO9_CUDA_BF16_PAIRS=1,TEMPO9_CUDA_ATTN_L2_PREFETCH_MB=24
  n1m24:TEMPO9_CUDA_BF16_PAIRS=1,TEMPO9_CUDA_BF16_L2_PREFETCH=1,TEMPO9_CUDA_ATTN_L2_PREFETCH_MB=24"}
for rep in 1 2; do
  for f in $FORMS; do
    # shellcheck disable=SC2046  # the form's VAR=value list, split on commas on purpose
    decode_one "${f%%:*}-$rep" $(echo "${f#*:}" | tr ',' ' ')
  done
done
for f in $FORMS; do
  cmp -s /tmp/one_base-1.txt "/tmp/one_${f%%:*}-1.txt" && echo "greedy text ${f%%:*}: = base" ||
    echo "greedy text ${f%%:*}: DIFFERS from base"
done
p=$(python3 -c "print('x'*512)")
for f in $FORMS; do
  case " ${ROWS8:-base pair n1m24} " in *" ${f%%:*} "*) ;; *) continue ;; esac
  # shellcheck disable=SC2046
  env $(echo "${f#*:}" | tr ',' ' ') "$T9" run -m "$M" --raw -p "$p" -n 64 --temp 0 --ignore-eos \
    --backend cuda --ctx 1000 --parallel 8 --warmup >"/tmp/rows8_${f%%:*}.txt" 2>/tmp/e.txt
  echo "8B 8 rows ${f%%:*}: $(grep -E '^\[engine' /tmp/e.txt | tr '\n' ' ')"
  cmp -s /tmp/rows8_base.txt "/tmp/rows8_${f%%:*}.txt" && echo "8-row text ${f%%:*}: = base" ||
    echo "8-row text ${f%%:*}: DIFFERS from base"
done
echo "t=$((SECONDS - T0)) s"
[ "${TRACE:-1}" = 1 ] || exit 0
# shellcheck disable=SC2046  # TRACE_ENV: VAR=value pairs, split on purpose
env ${TRACE_ENV:-TEMPO9_CUDA_BF16_PAIRS=1 TEMPO9_CUDA_BF16_L2_PREFETCH=1 TEMPO9_CUDA_ATTN_L2_PREFETCH_MB=24} \
  SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 OUT="$OUT/q4" MODEL=$M \
  bash bench/h200_bench.sh trace 2>&1 | grep -vE "^h200_bench done"
echo "t=$((SECONDS - T0)) s"
