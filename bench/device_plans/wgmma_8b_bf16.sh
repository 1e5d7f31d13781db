#!/usr/bin/env bash
# The served wgmma GEMM (CudaBackendConfig::bf16_wgmma_rows, off by default; written in session
# 54, docs/CUDA.md stage 53) on its first device: the bf16 op tests (CudaBf16Wgmma among them),
# then the 8B BF16 (synth) with TEMPO9_CUDA_BF16_WGMMA_ROWS at 0 (the mma.sync GEMM), 512 and
# 128, alternated twice: a 512- and a 2048-token prompt with 32 tokens greedy after each (the
# texts must be equal across forms: the same bits), then the 32-way round (h200_bench.sh serve,
# WAYS=32 ROUNDS=2) at 0 and at ROWS_ON (128). ~7 min.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun/bin",
# ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers"]): `bash
# bench/device_plans/wgmma_8b_bf16.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/wg8}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*:Cuda.Matmul*}"
M=/tmp/qwen3-8b-BF16.gguf
SIDES=ours PRESET=qwen3-8b QUANT=BF16 MODEL=$M OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 |
  grep -E "^synth"
NAME="8B BF16" prompt_ab TEMPO9_CUDA_BF16_WGMMA_ROWS "0 512 128"
for rows in 0 "${ROWS_ON:-128}"; do
  TEMPO9_CUDA_BF16_WGMMA_ROWS=$rows SIDES=ours PRESET=qwen3-8b QUANT=BF16 MODEL=$M WAYS=32 \
    ROUNDS=2 GEN=128 OUT="$OUT/serve_$rows" bash bench/h200_bench.sh serve 2>&1 |
    grep -E 'wall s|tok/s|TTFT p50|bench: round' | tr '\n' ' ' | sed "s/^/32-way rows>=$rows: /"
  echo
done
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
