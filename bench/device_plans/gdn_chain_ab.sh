#!/usr/bin/env bash
# A Gated DeltaNet layer's launches on the 35B Q8_0 (docs/CUDA.md stages 57-59). Forms (FORMS,
# space-separated; default "off chain"), alternated REPS (2) times, every text compared with the
# first form's first (all give the same bits):
#   off       ssm_conv, gdn_regs (TEMPO9_CUDA_GDN_CHAIN_SEQS=0);
#   default   the defaults (the chain for one sequence: CudaBackendConfig::gdn_chain_max_seqs);
#   chain     the two as one launch at any number of sequences (TEMPO9_CUDA_GDN_CHAIN_SEQS=65535).
# Run 274 (as "chain_late", the relaxed count then opt-in): single decode +0.9%, 8 agents' steps
# 3% slower.
# AGENTS=1: then one 8-agent run of each form (common.sh's agents). OPS: then the op tests (a
# gtest filter, '*' for the suite, which wants .devrun/shared/fixtures/reference carried too).
# TRACE=1: one trace of the first form (bench/kernel_trace.py's table). SHORT=1: the 35B shape
# cut to 8 layers (qwen35moe_8layer.json, 6 of them Gated DeltaNet), a ~20 s synth instead of ~90 s.
# Here: `bash scripts/device_stage.sh` (TEMPO9_CUDA_BUILD=$PWD/build-dev: sm_90a only); there
# (device tool, carry [".devrun"]): `AGENTS=1 bash bench/device_plans/gdn_chain_ab.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/gca}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
if [ "${SHORT:-0}" = 1 ]; then
  # shellcheck disable=SC2034  # NAME: read by common.sh's decode_one
  M=/tmp/q35_8l_Q8_0.gguf NAME="35B shape, 8 layers, Q8_0"
  synth_35b_8l "$M"
else
  # shellcheck disable=SC2086  # S35: word-split on purpose
  [ -f "$M" ] || env $S35 MODEL=$M OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 |
    grep -E "^synth"
fi
form_env() {  # the environment of form $1
  case $1 in
    off) echo "TEMPO9_CUDA_GDN_CHAIN_SEQS=0" ;;
    default) ;;  # the defaults: no environment
    chain) echo "TEMPO9_CUDA_GDN_CHAIN_SEQS=65535" ;;
    *) echo "unknown form $1" >&2; return 1 ;;
  esac
}
read -r -a forms <<<"${FORMS:-off chain}"
for rep in $(seq "${REPS:-2}"); do
  # shellcheck disable=SC2046  # form_env: word-split on purpose
  for f in "${forms[@]}"; do decode_one "${f}_$rep" $(form_env "$f"); done
done
first=/tmp/one_${forms[0]}_1.txt
for f in /tmp/one_*_[0-9].txt; do
  cmp -s "$first" "$f" && echo "text $f: equal" || echo "text $f: DIFFERS from $first"
done
if [ "${AGENTS:-0}" = 1 ]; then
  # shellcheck disable=SC2046  # form_env: word-split on purpose
  for f in "${forms[@]}"; do agents "$f" $(form_env "$f"); done
fi
[ -n "${OPS:-}" ] && [ -f .devrun/bin/test_cuda_ops ] && op_tests "$OPS"
if [ "${TRACE:-0}" = 1 ]; then
  # shellcheck disable=SC2046,SC2086  # form_env, S35: word-split on purpose
  env $(form_env "${forms[0]}") $S35 MODEL=$M OUT="$OUT/trace" bash bench/h200_bench.sh trace \
    >/dev/null 2>&1
  grep -A16 "chain us/step" -m1 "$OUT/trace/bench.log"
fi
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
