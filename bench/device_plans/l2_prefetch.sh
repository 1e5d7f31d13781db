#!/usr/bin/env bash
# The next matrices' weights into L2 while DRAM would sit idle (docs/CUDA.md stage 51), two
# forms, each behind a knob read once per process (off by default; the same bits every way):
#   TEMPO9_CUDA_BF16_L2_PREFETCH=N     each bf16 GEMV block sends its first N units into L2
#                                      before its dependent-launch wait (N = 1 is nearly all of
#                                      a matrix: the 8B's GEMV blocks take one unit each, but
#                                      108 of gate/up's 660);
#   TEMPO9_CUDA_ATTN_L2_PREFETCH_MB=M  the decode attention's blocks send up to M MB of the
#                                      layer's next weights (o, then gate and up) after theirs.
# The op tests with both on; the 8B Q4_K_M's single decode at several (N, M), alternated twice
# (the greedy texts compared), 8 rows off and on, and one traced run (N, M) = TRACE_NM. ~7 min.
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
PAIRS=${PAIRS:-"0,0 1,0 0,24 0,48 1,24"}
for rep in 1 2; do
  for nm in $PAIRS; do
    decode_one "$nm-$rep" TEMPO9_CUDA_BF16_L2_PREFETCH="${nm%,*}" TEMPO9_CUDA_ATTN_L2_PREFETCH_MB="${nm#*,}"
  done
done
for nm in $PAIRS; do
  cmp -s /tmp/one_0,0-1.txt "/tmp/one_$nm-1.txt" && echo "greedy text $nm: = 0,0" ||
    echo "greedy text $nm: DIFFERS from 0,0"
done
p=$(python3 -c "print('x'*512)")
for nm in 0,0 ${TRACE_NM:-0,32}; do
  TEMPO9_CUDA_BF16_L2_PREFETCH="${nm%,*}" TEMPO9_CUDA_ATTN_L2_PREFETCH_MB="${nm#*,}" \
    "$T9" run -m "$M" --raw -p "$p" -n 64 --temp 0 --ignore-eos --backend cuda --ctx 1000 \
    --parallel 8 --warmup >"/tmp/rows8_$nm.txt" 2>/tmp/e.txt
  echo "8B 8 rows $nm: $(grep -E '^\[engine' /tmp/e.txt | tr '\n' ' ')"
done
cmp -s /tmp/rows8_0,0.txt "/tmp/rows8_${TRACE_NM:-0,32}.txt" && echo "8-row text: the same" ||
  echo "8-row text: DIFFERS"
echo "t=$((SECONDS - T0)) s"
TN=${TRACE_NM:-0,32}
TEMPO9_CUDA_BF16_L2_PREFETCH="${TN%,*}" TEMPO9_CUDA_ATTN_L2_PREFETCH_MB="${TN#*,}" \
  SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 OUT="$OUT/q4" MODEL=$M \
  bash bench/h200_bench.sh trace 2>&1 | grep -vE "^h200_bench done"
echo "t=$((SECONDS - T0)) s"
