#!/usr/bin/env bash
# Where the 8B Q4_K_M's single decode step goes now (docs/CUDA.md stage 48): the CudaBf16 and
# CudaAttention op tests (B16Direct now the default), cuda_attention_bench's decode and prefill
# cases eager and replayed as one graph (the kernels' own time a call), then the 8B's single
# stream (h200_bench.sh single) and its traced run (trace: each kernel's share of the step's
# chain, graphs and PDL on). ~5 min.
# Here: `bash scripts/device_stage.sh cuda_attention_bench`; there (device tool, carry
# [".devrun"]): `bash bench/device_plans/decode_chain.sh` (stdout; the trace in $OUT/q4).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/chain}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*:CudaAttention*}"
.devrun/bin/cuda_attention_bench 200 decode
.devrun/bin/cuda_attention_bench 20 prefill
echo "t=$((SECONDS - T0)) s"
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 OUT="$OUT/q4" MODEL=/tmp/q8b.gguf \
  bash bench/h200_bench.sh single,trace 2>&1 | grep -vE "^h200_bench done"
echo "t=$((SECONDS - T0)) s"
