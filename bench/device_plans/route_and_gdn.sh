#!/usr/bin/env bash
# Three changes to a 35B decode step, each the same bits as the form it replaces (docs/CUDA.md
# stages 54-56):
#   - the MoE routing inside the experts' gate/up launch (CudaBackendConfig::fuse_route, on by
#     default since run 266; Backend::moe_route_matmul, cuda_route.cuh);
#   - the Gated DeltaNet chain as one launch (gdn_chain_max_seqs; 12% slower in run 266);
#   - the decode attention's row-warp form (attn_row_warps, on by default since runs 267-268: a
#     decode row's key tiles split over the block's four warps).
# Every form below names all three switches, so the defaults do not matter. It runs:
#   - the op tests of both and of the ops they replace or feed;
#   - the 35B Q8_0 (synth, the real Qwen3 vocabulary; ~60 s): single decode of a 512-character
#     prompt + 128 greedy tokens with none / route / route + chain / all three, alternated twice;
#     every text must equal the first (the same bits);
#   - one traced run with all three (bench/kernel_trace.py's table and timelines, in $OUT/trace);
#   - 8 agents over a 10k-token system prompt with none and with all three.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun/bin",
# ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers"]): `bash
# bench/device_plans/route_and_gdn.sh` (stdout; ~8 min; QUICK=1: the tests and the single
# decodes only, ~4.5 min; with REPS=1 and TESTS='CudaHybrid.MoeRoute*:CudaGdn.GdnChain*' ~2.5
# min). BUILD_PEER=1 (carry ".devrun-peer" too: `bash scripts/build_peer_cuda.sh pack` here)
# builds llama.cpp in the background meanwhile (nice 19, 10 of 16 cores; both sides of every A/B
# share that load), for a following `PARTS=35b bash bench/device_plans/peer_side_by_side.sh` on
# the same warm machine, which reuses the 35B file left in /tmp.
cd "$(dirname "$0")/../.." || exit 1
if [ "${BUILD_PEER:-0}" = 1 ] && [ -f .devrun-peer/llama-src.tar.xz ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi
export OUT=${OUT:-/tmp/rg}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaHybrid.*:CudaGdn.*:CudaAttention.*:CudaMoeDown*:CudaPipelinedModel*}"
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
NAME="35B Q8_0"
for rep in $(seq "${REPS:-2}"); do
  decode_one "none_$rep" TEMPO9_CUDA_FUSE_ROUTE=0 TEMPO9_CUDA_GDN_CHAIN_SEQS=0 TEMPO9_CUDA_ATTN_ROW_WARPS=0
  decode_one "route_$rep" TEMPO9_CUDA_FUSE_ROUTE=1 TEMPO9_CUDA_GDN_CHAIN_SEQS=0 TEMPO9_CUDA_ATTN_ROW_WARPS=0
  decode_one "both_$rep" TEMPO9_CUDA_FUSE_ROUTE=1 TEMPO9_CUDA_GDN_CHAIN_SEQS=65535 TEMPO9_CUDA_ATTN_ROW_WARPS=0
  decode_one "all_$rep" TEMPO9_CUDA_FUSE_ROUTE=1 TEMPO9_CUDA_GDN_CHAIN_SEQS=65535 TEMPO9_CUDA_ATTN_ROW_WARPS=1
done
for f in /tmp/one_route_* /tmp/one_both_* /tmp/one_all_* /tmp/one_none_[2-9].txt; do
  [ -e "$f" ] || continue
  cmp -s /tmp/one_none_1.txt "$f" && echo "text $f: equal" || echo "text $f: DIFFERS from none_1"
done
echo "t=$((SECONDS - T0)) s"
[ "${QUICK:-0}" = 1 ] && { bash bench/device_plans/bundle_out.sh; exit 0; }  # no trace, no agents
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 MODEL=$M TEMPO9_CUDA_FUSE_ROUTE=1 TEMPO9_CUDA_GDN_CHAIN_SEQS=65535 TEMPO9_CUDA_ATTN_ROW_WARPS=1 \
  OUT="$OUT/trace" bash bench/h200_bench.sh trace 2>&1 |
  grep -vE "^h200_bench done" | head -24
echo "t=$((SECONDS - T0)) s"
agents none TEMPO9_CUDA_FUSE_ROUTE=0 TEMPO9_CUDA_GDN_CHAIN_SEQS=0 TEMPO9_CUDA_ATTN_ROW_WARPS=0
agents all TEMPO9_CUDA_FUSE_ROUTE=1 TEMPO9_CUDA_GDN_CHAIN_SEQS=65535 TEMPO9_CUDA_ATTN_ROW_WARPS=1
echo "t=$((SECONDS - T0)) s"
[ -f /tmp/peer/done ] && echo "peer: $(cat /tmp/peer/done)"
bash bench/device_plans/bundle_out.sh
