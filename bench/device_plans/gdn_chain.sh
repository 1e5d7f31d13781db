#!/usr/bin/env bash
# The Gated DeltaNet chain as one launch (CudaBackendConfig::fuse_gdn, off by default;
# cuda_gdn_chain.cu, written in session 55 without a device) on its first device:
#   - the op tests of the chain and of the three ops it replaces (CudaHybrid.GdnChain* first run);
#   - the 35B Q8_0 (synth, the real Qwen3 vocabulary; ~60-80 s): single decode of a 512-character
#     prompt + 128 greedy tokens with TEMPO9_CUDA_FUSE_GDN=0 and 1, alternated twice; the texts
#     must be equal (the same bits);
#   - one traced run with it on (bench/kernel_trace.py's table and timelines, in $OUT/trace);
#   - 8 agents over a 10k-token system prompt with it off and on.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun/bin",
# ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers"]): `bash
# bench/device_plans/gdn_chain.sh` (stdout; ~5 min).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/gc}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaHybrid.GdnChain*:CudaHybrid.GatedDeltaNet*:CudaHybrid.SsmConv*}"
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
NAME="35B Q8_0"
for rep in 1 2; do
  for f in 0 1; do decode_one "f${f}_$rep" TEMPO9_CUDA_FUSE_GDN=$f; done
done
for rep in 1 2; do
  cmp -s "/tmp/one_f0_$rep.txt" "/tmp/one_f1_$rep.txt" && echo "text ($rep): fused = three ops" ||
    echo "text ($rep): the fused chain's DIFFERS"
done
echo "t=$((SECONDS - T0)) s"
# The chain traced (its share of a step; and two pipelined steps' timeline, device idle included).
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 MODEL=$M TEMPO9_CUDA_FUSE_GDN=1 OUT="$OUT/trace" bash bench/h200_bench.sh trace 2>&1 |
  grep -vE "^h200_bench done" | head -24
echo "t=$((SECONDS - T0)) s"
for f in 0 1; do agents "fuse_gdn_$f" TEMPO9_CUDA_FUSE_GDN=$f; done
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
