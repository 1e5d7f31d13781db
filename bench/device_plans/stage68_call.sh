#!/usr/bin/env bash
# The next session's first call (~9.5 min), stage 67's three plans in one: llama.cpp builds in
# the background (nice 19) while
#   1. bg_confirm.sh (REPS 2): the graph tests on the final stream code, then the 35B's 8-layer
#      file with graphs built on the engine's thread against the background;
#   2. moe_pair_ncu.sh: the by-pair gate/up against a dense int8 GEMV of its bytes under ncu;
#   3. the whole 35B beside llama.cpp (peer_side_by_side.sh PARTS=35b P35=single, SINGLE_X0=8:
#      ours after 512 tokens and from one token; llama-bench tg128 and tg128 @ d512).
# Each part prints before the next starts; the whole 35B's file is made between 2 and 3. WAIT_S
# (430): how long into the call to wait for the peer's build before part 3 (run 299's build took
# ~360 s).
# Here: `bash scripts/device_stage.sh cuda_moe_decode_bench` (TEMPO9_CUDA_BUILD) and `bash
# scripts/build_peer_cuda.sh pack`; there (device tool, carry [".devrun", ".devrun-peer"]):
# `bash bench/device_plans/stage68_call.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/s68}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
find .devrun-peer -maxdepth 1 -printf "%p %s\n" 2>&1 | head -4  # run 300's peer never built
if [ -f .devrun-peer/llama-src.tar.xz ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi

REPS=2 OUT=$OUT/bg bash bench/device_plans/bg_confirm.sh
OUT=$OUT/ncu bash bench/device_plans/moe_pair_ncu.sh
echo "t=$((SECONDS - T0)) s"
# The whole 35B's file while the peer builds (~75 s; part 3 reuses it).
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
[ -f "$M" ] || env SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours \
  TOKENIZER="$TOK" MODEL="$M" OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
echo "t=$((SECONDS - T0)) s"

while [ ! -f /tmp/peer/done ] && [ $((SECONDS - T0)) -lt "${WAIT_S:-430}" ]; do sleep 5; done
if [ -x /tmp/peer/bin/llama-server ]; then
  SINGLE_X0=8 PARTS=35b P35=single OUT=$OUT/side bash bench/device_plans/peer_side_by_side.sh
else
  echo "no peer at t=$((SECONDS - T0)) s:"
  find /tmp/peer_dev.log /tmp/peer -maxdepth 1 -printf "%p %s\n" 2>&1 | head -12
  tail -3 /tmp/peer_dev.log /tmp/peer/done 2>/dev/null
fi
echo "t=$((SECONDS - T0)) s"
