#!/usr/bin/env bash
# Issue 9's single stream at the seed's quant (Qwen3.5-35B-A3B Q3_K_M, synthetic, the real Qwen3
# vocabulary) beside llama.cpp, now that Q3_K runs on the bf16 path by default (run 254), in two
# calls on one warm machine:
#   PHASE=1 (~8 min): llama.cpp's device build in the background (as measure_ours.sh), the wgmma
#     probe (wgmma_probe.sh), the synth (~3-4 min for the 40 layers at Q3_K_M), ours twice
#     (h200_bench.sh single: a 512-token prompt and 128 tokens, warmed up); waits for the build
#     until WAIT_S (545).
#   PHASE=2 (~6 min): the whole op suite (the model tests' fixtures carried by this call; OPS=0:
#     none, nothing carried), A/Bs of
#     one binary on the same file (decode_one: a 64-token prompt; each form keeps the bits, so
#     each text must be the default's): the attention's in-kernel fold
#     (TEMPO9_CUDA_ATTN_FOLD_ROWS=1; lost on the 8B in stage 40, never timed on the 35B, whose 10
#     attention layers each launch a combine: run 255's trace) and no early GEMV weights
#     (TEMPO9_CUDA_BF16_EARLY=0: run 255 has the add-norm before a 576- or 772-block GEMV at
#     5.4-7 us of the chain, before the router's 129 blocks at 3.1-3.5; run 257 also had the
#     norm's late trigger, 11ccdce, since taken out); then llama-bench on the same file
#     (SIDES=peer h200_bench.sh single).
# Here: `bash scripts/device_stage.sh`, `bash scripts/build_peer_cuda.sh pack`; there (device
# tool) PHASE=1 carrying [".devrun/bin", ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers",
# ".devrun/wg", ".devrun-peer"], then PHASE=2 carrying [".devrun/shared/fixtures/reference"]:
# `PHASE=N bash bench/device_plans/issue9_q3k.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/i9q}
mkdir -p "$OUT"
if [ "${PHASE:-1}" = 1 ] && [ -f .devrun-peer/llama-src.tar.xz ] && [ ! -f /tmp/peer/done ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
M=/tmp/qwen3.5-35b-a3b-Q3_K_M-tok.gguf NAME="35B Q3_K_M"
S35="PRESET=qwen3.5-35b-a3b QUANT=Q3_K_M GEN=128 SINGLE_X=4096 TOKENIZER=$TOK MODEL=$M"
if [ "${PHASE:-1}" = 1 ]; then
  [ -d .devrun/wg ] && bash bench/device_plans/wgmma_probe.sh >/dev/null 2>&1 &&
    grep -vE "^NVIDIA" "$OUT/wgmma.txt"
  # shellcheck disable=SC2086  # S35: word-split on purpose
  env $S35 SIDES=ours OUT="$OUT/35b_q3_ours" bash bench/h200_bench.sh single 2>&1 |
    grep -E "^(synth|tempo9 run)"
  echo "t=$((SECONDS - T0)) s"
  while [ ! -f /tmp/peer/done ] && [ "$SECONDS" -lt "${WAIT_S:-545}" ]; do sleep 5; done
  if [ -f /tmp/peer/done ]; then
    echo "peer: $(cat /tmp/peer/done)"
  else
    echo "peer: not done at t=$SECONDS s: $(tail -1 /tmp/peer/ninja.log 2>/dev/null)"
  fi
else
  [ "${OPS:-1}" = 1 ] && op_tests '*' && echo "t=$((SECONDS - T0)) s"
  for tag in base fold early0 base2; do
    case $tag in
      base*) decode_one $tag ;;
      fold) decode_one fold TEMPO9_CUDA_ATTN_FOLD_ROWS=1 ;;
      early0) decode_one early0 TEMPO9_CUDA_BF16_EARLY=0 ;;
    esac
  done
  for tag in base2 fold early0; do  # the same bits: each form's text is the default's
    cmp -s /tmp/one_base.txt "/tmp/one_$tag.txt" && echo "$tag: text equal to the default's" ||
      echo "$tag: text DIFFERS from the default's"
  done
  echo "t=$((SECONDS - T0)) s"
  # A build phase 1 left running goes on in this call (a warm machine keeps its processes).
  while [ ! -f /tmp/peer/done ] && [ "$SECONDS" -lt 450 ]; do sleep 5; done
  # shellcheck disable=SC2086  # S35: word-split on purpose
  env $S35 SIDES=peer PEER_BIN=/tmp/peer/bin OUT="$OUT/35b_q3_peer" bash bench/h200_bench.sh \
    single 2>&1 | grep -E "^\| .*(pp|tg)[0-9]|peer"
fi
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
