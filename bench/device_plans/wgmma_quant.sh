#!/usr/bin/env bash
# The K-quants on the wgmma GEMM (CudaBackendConfig::bf16_wgmma_quant, docs/CUDA.md stage 54) on
# their first device, and ours for issue 7's rerun beside llama.cpp, in one call (~9 min):
#   - llama.cpp's device build in the background (scripts/build_peer_cuda.sh device-build, nice 19,
#     DEVICE_JOBS of 16 cores) for the next call on the same warm machine;
#   - the bf16 op tests (CudaBf16Wgmma.Quantized* first run);
#   - the 8B Q4_K_M (synth): a 512- and a 2048-token prompt with 32 tokens greedy after each at
#     TEMPO9_CUDA_BF16_WGMMA_QUANT=0 (the mma.sync GEMM) and 1, alternated twice; the texts must be
#     equal (the same bits);
#   - the 8B Q4_K_M's 32-way round (h200_bench.sh serve, WAYS=32 ROUNDS=2) with the quantized
#     wgmma on, then off; ours on the 8B BF16 (single,serve: two single runs, the 32-way round).
# WAIT_S (560): how long into the call to wait for the peer's build (0: not at all; the next call
# waits). The next call: `AB=0 PARTS="8b-bf16" bash bench/device_plans/suite_peer_ab.sh` (the
# whole op suite, then llama.cpp on the BF16 file), once /tmp/peer/done exists.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun/bin",
# ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers", ".devrun-peer"]): `bash
# bench/device_plans/wgmma_quant.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/wq}
mkdir -p "$OUT"
if [ "${BUILD_PEER:-1}" = 1 ] && [ -f .devrun-peer/llama-src.tar.xz ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*:Cuda.Matmul*}"
M=/tmp/qwen3-8b-Q4_K_M.gguf
SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M MODEL=$M OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 |
  grep -E "^synth"
NAME="8B Q4_K_M" prompt_ab TEMPO9_CUDA_BF16_WGMMA_QUANT "0 1"
echo "t=$((SECONDS - T0)) s"
for q in 1 0; do  # the 8B Q4_K_M's 32-way round with the quantized wgmma on, then off
  TEMPO9_CUDA_BF16_WGMMA_QUANT=$q SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M MODEL=$M WAYS=32 \
    ROUNDS=2 GEN=128 OUT="$OUT/serve_q$q" bash bench/h200_bench.sh serve 2>&1 |
    grep -E 'wall s|tok/s|TTFT p50|ITL p50|bench: round' | tr '\n' ' ' |
    sed "s/^/32-way Q4_K_M, quant wgmma $q: /"
  echo
done
SIDES=ours PRESET=qwen3-8b QUANT=BF16 GEN=128 WAYS=32 ROUNDS=2 OUT="$OUT/8b_BF16" \
  bash bench/h200_bench.sh single,serve >/dev/null 2>&1
grep -E "^(synth|tempo9 run)|bench: round|wall s|tok/s|TTFT p50|ITL p50" "$OUT/8b_BF16/bench.log" |
  head -20
echo "t=$((SECONDS - T0)) s"
# Both 8B files stay in /tmp for the peer's call.
if [ "${BUILD_PEER:-1}" = 1 ]; then
  while [ ! -f /tmp/peer/done ] && [ "$SECONDS" -lt "${WAIT_S:-560}" ]; do sleep 5; done
  if [ -f /tmp/peer/done ]; then
    echo "peer: $(cat /tmp/peer/done)"
  else
    echo "peer: not done at t=$SECONDS s: $(tail -1 /tmp/peer/ninja.log 2>/dev/null)"
  fi
fi
bash bench/device_plans/bundle_out.sh
