#!/usr/bin/env bash
# Ours on both issues' shapes in one call, with llama.cpp building in the background for a
# following call (peer_side_by_side.sh with SIDES=peer) on the same warm machine:
#   - the whole test_cuda_ops suite (bf16 on: the defaults);
#   - issue 9's 35B Q8_0: int8 against Q8_0 on the bf16 path (TEMPO9_CUDA_BF16_Q8_0, with the
#     loader's shared-expert rule): single decode, 8 agents, then each side's one-row matmul
#     profile (bf16_both.sh PARTS=35b);
#   - issue 7's 8B Q4_K_M and BF16: single stream and the 32-way serve round (h200_bench.sh
#     single,serve).
# The peer's build (nice 19, DEVICE_JOBS, default 10 of 16 cores) shares the CPUs with these
# runs: their host side (HTTP, the bench client, synth) is slower than alone, so the ratios to the
# peer come out low, not high. BUILD_PEER=0: no build; WITH_8B=0: no 8B part; PROFILE=0: no
# one-row profiles. WAIT_S (545): how long into the call to wait for the build at the end. TESTS:
# the op tests' filter (default *, the whole suite; "-*" none, when the fixtures stay behind).
# Here: `bash scripts/device_stage.sh` and `bash scripts/build_peer_cuda.sh pack`; there (device
# tool, carry [".devrun", ".devrun-peer"]): `bash bench/device_plans/measure_ours.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/ours}
mkdir -p "$OUT"
if [ "${BUILD_PEER:-1}" = 1 ] && [ -f .devrun-peer/llama-src.tar.xz ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi
TESTS=${TESTS:-*} PARTS=35b bash bench/device_plans/bf16_both.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
export LD_LIBRARY_PATH=$PWD/.devrun/lib
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
p=$(python3 -c "print('x'*512)")
for b in 0 1; do  # per-op GPU times (graphs and PDL off), one row; PROFILE=0: none
  [ "${PROFILE:-1}" = 1 ] || break
  TEMPO9_CUDA_PROFILE=1 TEMPO9_CUDA_BF16_Q8_0=$b .devrun/bin/tempo9 run -m $M --raw -p "$p" -n 32 \
    --temp 0 --ignore-eos --backend cuda --ctx 700 >/dev/null 2>/tmp/e.txt
  echo "op profile, one row, TEMPO9_CUDA_BF16_Q8_0=$b:"
  grep -E '\[cuda profile\].*(matmul|to_bf16)' /tmp/e.txt | head -12
done
if [ "${WITH_8B:-1}" = 1 ]; then
  # Other plans' files on the same warm machine: run 273 filled the 64 GiB disk with them beside
  # the 35B, the 8B and llama.cpp's build, and lost every result of the call.
  rm -f /tmp/q35_8l_Q8_0.gguf /tmp/qwen3_8b_8l_Q4_K_M.gguf
  df -h /tmp | tail -1
  for q in Q4_K_M BF16; do
    SIDES=ours PRESET=qwen3-8b QUANT=$q GEN=128 WAYS=32 ROUNDS=2 OUT="$OUT/8b_$q" \
      bash bench/h200_bench.sh single,serve >/dev/null 2>&1
    grep -E "^(synth|tempo9 run)|bench: round|wall s|tok/s|TTFT p50|ITL p50" \
      "$OUT/8b_$q/bench.log" | head -20
  done
  rm -f /tmp/qwen3-8b-BF16.gguf  # 16 GB beside the 35B's 37 on a 64 GiB disk (12 s to synth)
fi
echo "t=$SECONDS s"
# The 35B and 8B Q4_K_M files stay in /tmp for the peer's call.
[ "${BUILD_PEER:-1}" = 1 ] || { bash bench/device_plans/bundle_out.sh; exit 0; }
while [ ! -f /tmp/peer/done ] && [ "$SECONDS" -lt "${WAIT_S:-545}" ]; do sleep 5; done
if [ -f /tmp/peer/done ]; then
  echo "peer: $(cat /tmp/peer/done)"
else
  echo "peer: not done at t=$SECONDS s: $(tail -1 /tmp/peer/ninja.log 2>/dev/null)"
fi
bash bench/device_plans/bundle_out.sh  # the 8B folders: one file
