#!/usr/bin/env bash
# BF16 weights on the bf16 tensor-core path (docs/CUDA.md stage 47), in one short call: the
# CudaBf16 op tests (TESTS, default CudaBf16*: BF16 and Q5_K beside Q4_K / Q6_K / Q8_0), then
# the 8B BF16's single stream and 32-way round (h200_bench.sh single,serve, ours; BENCH_S caps
# it, default 200 s); then the same tests and the 512- and 8192-token prompts with
# TEMPO9_CUDA_BF16_DIRECT=1 (BF16's GEMM without its fragment buffer, two blocks an SM) against
# =0. Run 235 made B16Direct the default (docs/CUDA.md stage 48), so the first tests and the
# 32-way round now run it too. llama.cpp's figures for the same file and card kind: run 231
# (docs/PERFORMANCE.md).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/bf16_weights.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/bf16w}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*}"
# BF16's GEMM reading the copied fragments (B16Direct, opt-in until this runs): the same tests.
TEMPO9_CUDA_BF16_DIRECT=1 op_tests "${TESTS:-CudaBf16*}"
SIDES=ours PRESET=qwen3-8b QUANT=BF16 GEN=128 WAYS=32 ROUNDS=2 OUT="$OUT/bf16" \
  timeout "${BENCH_S:-200}" bash bench/h200_bench.sh single,serve >/dev/null 2>&1
grep -E "^(synth|tempo9 run)|bench: round|wall s|tok/s|TTFT p50|ITL p50" "$OUT/bf16/bench.log" |
  head -20
grep -iE "error|check failed" "$OUT/bf16/runs.err" 2>/dev/null | head -3
# The 512-token prompt (and the 8192-token one) with B16Direct against without.
for d in 0 1; do
  TEMPO9_CUDA_BF16_DIRECT=$d SIDES=ours PRESET=qwen3-8b QUANT=BF16 GEN=16 OUT="$OUT/direct_$d" \
    timeout "${BENCH_S:-200}" bash bench/h200_bench.sh single,long >/dev/null 2>&1
  grep -E "^tempo9 run" "$OUT/direct_$d/bench.log" | sed "s/^/DIRECT=$d: /" | cut -c1-140
done
echo "t=$((SECONDS - T0)) s"
