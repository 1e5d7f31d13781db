#!/usr/bin/env bash
# Where the 35B's decode attention spends its ~18 us of chain a layer (run 271's trace of the
# single-stream bench: flash_attention_kernel<256, split, row warps> 18.3 us + its combine 4.7 us,
# ten layers: ~9% of a step), by SASS line: ncu's sections and warp samples for two decode
# launches of the row-warp split kernel on the 35B shape cut to 8 layers (qwen35moe_8layer.json,
# Q8_0, ~20 s synth), a 4,096-'x' prompt (~512 tokens with the real tokenizer: the decode row
# over ~515 keys, five 128-key chunks, as in the bench), L2 kept between ncu's passes.
# Then the combine kernel the same way. ncu runs kernels one at a time (no dependent-launch
# overlap), so its durations only rank; the stalls by line are what this is for.
# Here: `bash scripts/device_stage.sh` (any staging); there (device tool, carry [".devrun"]):
# `bash bench/device_plans/attention_35b_ncu.sh` (stdout; the reports in $OUT's bundle).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/a35ncu}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
M=${AB_MODEL:-/tmp/q35_8l_Q8_0.gguf}
synth_35b_8l "$M"
export KERNELS_PROMPT=${KERNELS_PROMPT:-4096} NCU_CACHE=${NCU_CACHE:-none}
# Two attention layers a step; the row-warp split instantiation runs for decode rows only.
ncu_profile attention 'flash_attention_kernel<\(int\)256, \(bool\)1, \(bool\)0, \(bool\)1>' 4 2
ncu_profile combine 'flash_combine_kernel' 4 1
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
