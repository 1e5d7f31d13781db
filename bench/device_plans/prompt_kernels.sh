#!/usr/bin/env bash
# Session 39's work on the 35B (Qwen3.5-35B-A3B Q8_0, real vocabulary), written when no device
# was lent: the prompt-step kernels (the Gated DeltaNet's chains on sixteen threads a column,
# TEMPO9_CUDA_GDN=chains; the F32 router's tile kernel, TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=64; both
# off by default, docs/CUDA.md stage 38) on a 4k prompt and in the op profiler, then 8 agents with
# both on, and with serve's start-up warm-up off (on by default for CUDA since this session);
# and structured output beside free rows with checked rows pipelined (--pipeline on / off).
# Their bitwise tests run in few_row_mma.sh's all-CUDA-tests pass; run that plan first (this one
# reuses its synthesized file when the machine is still warm, else makes it again: ~1-2 min).
# Here: `bash scripts/device_stage.sh cuda_gemv_bench`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/prompt_kernels.sh` (~7-8 min; $OUT/log.txt).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
env $S35 OUT=/tmp/synth bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
P4=$(python3 -c "print('x'*4096)")
# A/B on a 4k prompt (bitwise tests: CudaGdn.GatedDeltaNetStepsCarryState,
# Cuda.FloatMatmulLongCallRowsEqualOneRow), then the two ops' per-call times from the op profiler
# (graphs off there) with both off and both on.
pstep() {  # tag, env...
  local tag=$1; shift
  env "$@" "$T9" run -m "$M" --raw -p "$P4" -n 16 --temp 0 --ignore-eos --backend cuda \
    --ctx 4400 --warmup >"/tmp/ps_$tag.txt" 2>/tmp/e.txt
  echo "35B 4k prompt, $tag: $(grep -E '^\[(prompt|engine)' /tmp/e.txt | tr '\n' ' ')"
}
pstep base TEMPO9_CUDA_GDN=rounds
pstep chains TEMPO9_CUDA_GDN=chains
pstep tile TEMPO9_CUDA_GDN=rounds TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=64
pstep both TEMPO9_CUDA_GDN=chains TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=64
for t in chains tile both; do
  echo "greedy text after a 4k prompt, $t vs base: $(cmp /tmp/ps_base.txt "/tmp/ps_$t.txt" >/dev/null && echo identical || echo DIFFERENT)"
done
for v in "rounds 0" "chains 64"; do
  set -- $v
  TEMPO9_CUDA_PROFILE=1 TEMPO9_CUDA_GDN=$1 TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=$2 "$T9" run -m "$M" \
    --raw -p "$P4" -n 4 --temp 0 --ignore-eos --backend cuda --ctx 4400 >/dev/null 2>/tmp/e.txt
  echo "op profile, GDN=$1 FLOAT_TILE=$2: $(grep -E 'gated_delta_net|matmul F32' /tmp/e.txt | tr -s ' ' | tr '\n' '|')"
done
echo "t=$((SECONDS - T0)) s"
# Structured output beside free rows with the check at the runner's wait (session 39: checked
# rows now pipeline), against --pipeline off; run 192 had 0.85x with the check inside forward().
for pl in on off; do
  env $S35 GEN=128 PARALLEL=8 MODEL=$M SERVE_ARGS="--pipeline $pl" OUT=/tmp/st_$pl \
    bash bench/h200_bench.sh structured 2>&1 | grep -v '^==' | sed "s/^/structured, --pipeline $pl: /"
done
echo "t=$((SECONDS - T0)) s"
agents base
agents both TEMPO9_CUDA_GDN=chains TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=64
agents nowarm "SERVE_ARGS=--warmup off"
echo "t=$((SECONDS - T0)) s"
