#!/usr/bin/env bash
# The 8B Q4_K_M's decode in several forms of one binary, each a set of environment switches
# (FORMS: "tag:VAR=value,VAR=value ..."; the first is the reference): the CUDA op tests, the synth
# file, each form's single decode (512-character prompt, 128 tokens greedy, warm-up first)
# alternated twice with its greedy text against the first form's, 8 rows (--parallel 8) in the
# forms named by ROWS8 (default all), and one traced run with TRACE_ENV (TRACE=0: none). ~6 min
# for two forms. AB_MODEL: the 8B Q4_K_M file (default /tmp/q8b.gguf, synthesized when missing).
# AB_SHAPE=35b8: the 35B's shape cut to 8 layers at Q8_0 instead (qwen35moe_8layer.json, 6 of
# them Gated DeltaNet; ~20 s synth; default AB_MODEL /tmp/q35_8l_Q8_0.gguf).
# Default: the pair launch off and on (docs/CUDA.md stage 51; runs 249-251 ran this plan's first
# form, bench/device_plans/l2_prefetch.sh at 24d5a13, with the L2 prefetch knobs of that commit).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/ab_decode.sh` (stdout; the trace in $OUT/q4).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/ab}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*:Cuda.Matmul*:CudaAttention*}"
if [ "${AB_SHAPE:-8b}" = 35b8 ]; then
  M=${AB_MODEL:-/tmp/q35_8l_Q8_0.gguf} NAME="35B shape, 8 layers"
  synth_35b_8l "$M"
else
  M=${AB_MODEL:-/tmp/q8b.gguf} NAME=8B  # AB_MODEL: a synth file already there
  SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M MODEL=$M OUT="$OUT/synth" bash bench/h200_bench.sh \
    synth 2>&1 | grep -E "^synth"
fi
FORMS=${FORMS:-"off:TEMPO9_CUDA_BF16_PAIRS=0 on:TEMPO9_CUDA_BF16_PAIRS=1"}
REF=${FORMS%%:*}
env_of() { echo "${1#*:}" | tr ',' ' '; }
for rep in 1 2; do
  for f in $FORMS; do
    # shellcheck disable=SC2046  # the form's VAR=value list, split on purpose
    decode_one "${f%%:*}-$rep" $(env_of "$f")
  done
done
for f in $FORMS; do
  cmp -s "/tmp/one_$REF-1.txt" "/tmp/one_${f%%:*}-1.txt" && echo "greedy text ${f%%:*}: = $REF" ||
    echo "greedy text ${f%%:*}: DIFFERS from $REF"
done
p=$(python3 -c "print('x'*512)")
for f in $FORMS; do
  case " ${ROWS8:-${f%%:*}} " in *" ${f%%:*} "*) ;; *) continue ;; esac  # ROWS8 unset: every form
  # shellcheck disable=SC2046
  env $(env_of "$f") "$T9" run -m "$M" --raw -p "$p" -n 64 --temp 0 --ignore-eos \
    --backend cuda --ctx 1000 --parallel 8 --warmup >"/tmp/rows8_${f%%:*}.txt" 2>/tmp/e.txt
  echo "$NAME, 8 rows ${f%%:*}: $(grep -E '^\[engine' /tmp/e.txt | tr '\n' ' ')"
  cmp -s "/tmp/rows8_$REF.txt" "/tmp/rows8_${f%%:*}.txt" && echo "8-row text ${f%%:*}: = $REF" ||
    echo "8-row text ${f%%:*}: DIFFERS from $REF"
done
echo "t=$((SECONDS - T0)) s"
[ "${TRACE:-1}" = 1 ] || exit 0
# shellcheck disable=SC2046,SC2086  # TRACE_ENV: VAR=value pairs, split on purpose
env ${TRACE_ENV:-} SIDES=ours PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 OUT="$OUT/q4" MODEL=$M \
  bash bench/h200_bench.sh trace 2>&1 | grep -vE "^h200_bench done"
echo "t=$((SECONDS - T0)) s"
