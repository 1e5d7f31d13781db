#!/usr/bin/env bash
# TensorDesc::row's division path as a call instead of inlined at every site (docs/CUDA.md stage
# 58: ssm_conv_kernel<4> 60 -> 23 kB of sm_90a code, rms_norm_codes_kernel<true> 26 -> 21 kB).
# The same bits, so every text is compared with the base's first. The tree's binary
# (.devrun/bin/tempo9) against the one staged before the change (.devrun-base/bin/tempo9.xz), with
# the default forms, alternated REPS (3) times on:
#   - the 35B Q8_0 (reused from /tmp when an earlier call on this machine left it, else ~90 s);
#   - the Qwen3-8B shape cut to 8 layers, Q4_K_M (qwen3_8b_8layer.json; ~40 s synth).
# Here: `bash scripts/device_stage.sh`, and the earlier tempo9.xz copied to .devrun-base/bin;
# there (device tool, carry [".devrun/bin/tempo9.xz", ".devrun/lib.tar.xz",
# ".devrun/shared/fixtures/tokenizers", ".devrun-base"]): `bash bench/device_plans/code_size_ab.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/csab}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
python3 scripts/devrun_unpack.py .devrun-base
NEW=$T9 BASE=$ROOT/.devrun-base/bin/tempo9
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
if [ ! -f "$M" ]; then
  env SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER="$TOK" MODEL=$M \
    OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
fi
M8=/tmp/qwen3_8b_8l_Q4_K_M.gguf
[ -f "$M8" ] || "$NEW" synth --arch qwen3 --config bench/device_plans/qwen3_8b_8layer.json \
  --quant Q4_K_M --seed 1 -o "$M8" >/dev/null 2>&1 || echo "synth failed"
for rep in $(seq "${REPS:-3}"); do
  for side in base new; do  # T9, M, NAME: read by common.sh's decode_one
    [ $side = base ] && T9=$BASE || T9=$NEW
    M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0" decode_one "35b_${side}_$rep"
    M=$M8 NAME="8B shape, 8 layers, Q4_K_M" decode_one "8b_${side}_$rep"
  done
done
for f in /tmp/one_35b_*_[0-9].txt /tmp/one_8b_*_[0-9].txt; do
  case $f in */one_35b_*) first=/tmp/one_35b_base_1.txt ;; *) first=/tmp/one_8b_base_1.txt ;; esac
  cmp -s "$first" "$f" && echo "text $f: equal" || echo "text $f: DIFFERS from $first"
done
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
