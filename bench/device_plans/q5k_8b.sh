#!/usr/bin/env bash
# Q5_K on the bf16 path against TEMPO9_CUDA_BF16_Q5K=0 (docs/CUDA.md stage 49: run 241 put the bf16
# path on, 279 against 77.9 tok/s on the stage-1 kernel; since the sliced int8 Q5_K merged after
# it, =0 is the int8 path, not yet timed): the 8B at synth's Q5_K_M (Q5_K but for Q4_K_M's Q6_K
# rows), its single stream with the 512- and 8192-token prompts (h200_bench.sh single,long) and
# a 32-way round (serve, ROUNDS=1) with TEMPO9_CUDA_BF16_Q5K=1 and =0, alternated twice, and the
# greedy text of both. ~6 min (BENCH_S bounds each bench part).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/q5k_8b.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/q5k}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*}"
M=/tmp/q8b-q5km.gguf NAME=8B-Q5_K_M
SIDES=ours PRESET=qwen3-8b QUANT=Q5_K_M MODEL=$M OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 |
  grep -E "^synth"
for rep in 1 2; do
  for q in 1 0; do
    decode_one "q5k$q-$rep" TEMPO9_CUDA_BF16_Q5K=$q
  done
done
# The two paths round x differently (bf16 against int8 blocks), so their texts may part.
cmp -s /tmp/one_q5k1-1.txt /tmp/one_q5k0-1.txt && echo "greedy text: the same both ways" ||
  echo "greedy text: differs at byte $(cmp /tmp/one_q5k1-1.txt /tmp/one_q5k0-1.txt | awk '{print $5}')"
for q in 1 0; do
  TEMPO9_CUDA_BF16_Q5K=$q SIDES=ours PRESET=qwen3-8b QUANT=Q5_K_M MODEL=$M GEN=16 OUT="$OUT/long_$q" \
    timeout "${BENCH_S:-150}" bash bench/h200_bench.sh single,long >/dev/null 2>&1
  grep -E "^tempo9 run" "$OUT/long_$q/bench.log" | sed "s/^/Q5K=$q: /" | cut -c1-120
  TEMPO9_CUDA_BF16_Q5K=$q SIDES=ours PRESET=qwen3-8b QUANT=Q5_K_M MODEL=$M WAYS=32 ROUNDS=1 \
    OUT="$OUT/serve_$q" timeout "${BENCH_S:-150}" bash bench/h200_bench.sh serve >/dev/null 2>&1
  grep -E "bench: round" "$OUT/serve_$q/bench.log" | sed "s/^/Q5K=$q: /"
done
echo "t=$((SECONDS - T0)) s"
