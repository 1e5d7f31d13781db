#!/usr/bin/env bash
# TensorDesc::row's division path as a call instead of inlined at every site (docs/CUDA.md stage
# 58: ssm_conv_kernel<4> 60 -> 25 kB of sm_90a code, rms_norm_codes_kernel<true> 26 -> 19 kB),
# against the binary from before it, in one call. Every form gives the same bits, so every text is
# compared with the base's first. Alternated REPS (2) times:
#   - the 35B Q8_0 (reused from /tmp when an earlier call on this machine left it, else ~90 s):
#     base (the binary staged before the change, .devrun-base/bin/tempo9.xz, its default forms),
#     then the tree's binary with its default forms (new) and in each form of FORMS
#     ("tag:VAR=value,VAR=value ...", default "nochain:TEMPO9_CUDA_GDN_CHAIN_SEQS=0", on both
#     files; e.g. "bulk:TEMPO9_CUDA_ATTN_BULK_KV=1" for stage 59's bulk K/V staging, with
#     .devrun-base staged before it). Run 272 ran stage 57's forms here instead: the
#     chain with the relaxed count (on by default since, for one sequence) and the gated norm in
#     the out-projection's GEMV (-4.5%, removed since: docs/CUDA.md stage 59);
#   - the Qwen3-8B shape cut to 8 layers, Q4_K_M (qwen3_8b_8layer.json; ~40 s synth): base, new.
# SHORT=1: the 35B shape cut to 8 layers (qwen35moe_8layer.json) instead of the 35B. PARALLEL=N:
# N copies of the prompt decoded together (common.sh's decode_one), for the batched steps' tiles. TRACE=1: then
# one traced run of the new binary on that file (its table, and one step's first 80 kernels);
# TRACE=8b: the same on the 8B file.
# OPS (a gtest filter, '*' for the suite): then the op tests, when test_cuda_ops came too. Two
# tempo9 binaries of both gencodes leave no room for it; with sm_90a-only binaries
# (scripts/device_stage.sh, TEMPO9_CUDA_BUILD) test_cuda_ops and the fixtures fit beside them.
# Here: the earlier tempo9.xz copied to .devrun-base/bin, then `bash scripts/device_stage.sh`;
# there (device tool, carry [".devrun/bin/tempo9.xz", ".devrun/lib.tar.xz",
# ".devrun/shared/fixtures/tokenizers", ".devrun-base"], or [".devrun", ".devrun-base"] when
# sm_90a-only): `bash bench/device_plans/code_size_ab.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/csab}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
python3 scripts/devrun_unpack.py .devrun-base
rm -f /tmp/one_*.txt  # an earlier call's texts (another file, other forms) would be compared too
NEW=$T9 BASE=$ROOT/.devrun-base/bin/tempo9
M35=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf M8=/tmp/qwen3_8b_8l_Q4_K_M.gguf
if [ "${SHORT:-0}" = 1 ]; then  # the 35B shape cut to 8 layers (6 Gated DeltaNet): ~20 s synth
  M35=/tmp/q35_8l_Q8_0.gguf
  synth_35b_8l "$M35"
elif [ ! -f "$M35" ]; then
  env SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER="$TOK" \
    MODEL=$M35 OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
fi
# NO_8B=1: the 35B file only (a change that touches no dense layer).
[ "${NO_8B:-0}" = 1 ] || synth_8b_8l "$M8"
FORMS=${FORMS:-"nochain:TEMPO9_CUDA_GDN_CHAIN_SEQS=0"}
env_of() { echo "${1#*:}" | tr ',' ' '; }
# T9, M, NAME: read by common.sh's decode_one.
for rep in $(seq "${REPS:-2}"); do
  M=$M35 NAME="35B Q8_0$([ "${SHORT:-0}" = 1 ] && echo " (8 layers)")"
  T9=$BASE decode_one "35b_base_$rep"
  T9=$NEW
  decode_one "35b_new_$rep"
  # shellcheck disable=SC2046  # the form's VAR=value list, split on purpose
  for f in $FORMS; do decode_one "35b_${f%%:*}_$rep" $(env_of "$f"); done
  [ "${NO_8B:-0}" = 1 ] && continue
  M=$M8 NAME="8B shape, 8 layers, Q4_K_M"
  T9=$BASE decode_one "8b_base_$rep"
  T9=$NEW decode_one "8b_new_$rep"
  # shellcheck disable=SC2046
  for f in $FORMS; do decode_one "8b_${f%%:*}_$rep" $(env_of "$f"); done
done
for f in /tmp/one_35b_*_[0-9].txt /tmp/one_8b_*_[0-9].txt; do
  [ -f "$f" ] || continue  # (NO_8B: no 8B texts)
  case $f in */one_35b_*) first=/tmp/one_35b_base_1.txt ;; *) first=/tmp/one_8b_base_1.txt ;; esac
  cmp -s "$first" "$f" && echo "text $f: equal" || echo "text $f: DIFFERS from $first"
done
# OPS: a gtest filter ('*': the suite) for the staged test_cuda_ops, when it came too (an
# sm_90a-only staging leaves room for it, and for the fixtures: scripts/device_stage.sh).
[ -n "${OPS:-}" ] && [ -f .devrun/bin/test_cuda_ops ] && op_tests "$OPS"
# TRACE_ENV ("VAR=value ..."): the traced run's form (default: the new binary's defaults).
if [ "${TRACE:-0}" != 0 ]; then  # the new binary's step, kernel by kernel (TRACE=8b: the 8B file)
  TM=$M35
  [ "$TRACE" = 8b ] && TM=$M8
  # shellcheck disable=SC2086  # TRACE_ENV's VAR=value list, split on purpose
  env ${TRACE_ENV:-} SINGLE_X=512 GEN=64 SIDES=ours TOKENIZER="$TOK" MODEL="$TM" OUT="$OUT/trace" \
    bash bench/h200_bench.sh trace >/dev/null 2>&1
  f=$(ls "$OUT"/trace/trace_*.txt)
  head -24 "$f"
  sed -n '/chain order/,$p' "$f" | head -80
fi
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
