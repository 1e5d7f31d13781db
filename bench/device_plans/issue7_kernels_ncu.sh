#!/usr/bin/env bash
# Where the 8B's single decode step waits, kernel by kernel and SASS line by line (issue 7's
# single stream: ~54% of the H100's byte roofline, goal 75%), on the Qwen3-8B shape cut to 8
# layers, Q4_K_M (qwen3_8b_8layer.json, ~40 s synth; AB_MODEL: a file already there):
#   - the bf16-path GEMVs (bf16_gemv_kernel: run 248's trace put them at ~80% of the step's
#     chain), NCU_COUNT (4: one layer's q/k/v, o, gate/up with the GLU and down) launches of the
#     third decode step on, each with h200_bench.sh ncu1's sections and its warp samples per
#     SASS instruction (NCU_SASS=1, NCU_SASS_COUNT the same launches);
#   - the decode attention (flash_attention_kernel at head_dim 128), two launches.
# ncu runs kernels one at a time with its caches flushed between passes, so its durations only
# rank; the instructions a warp and the stalls by line are what this is for (a build-dev
# staging's SASS addresses map to lines by bench/ncu_sass_lines.py, from the bundle's
# ncu1_sass.csv). ~3 min.
# Here: `bash scripts/device_stage.sh` (any staging); there (device tool, carry [".devrun"]):
# `bash bench/device_plans/issue7_kernels_ncu.sh` (stdout; the reports in $OUT's bundle).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/i7ncu}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
M=${AB_MODEL:-/tmp/qwen3_8b_8l_Q4_K_M.gguf}
synth_8b_8l "$M"
# Launches to skip: a step is ~4 bf16 GEMVs a layer and the head's (33 on this file), and 8
# attention launches. KERNELS_PROMPT (64 'x's, 64 tokens here): 512 puts the decode attention
# over ~515 keys, split into chunks as in the single-stream bench. NCU_CACHE=none: L2 kept
# between ncu's passes (h200_bench.sh ncu1), closer to the chain than its default flush.
export KERNELS_PROMPT=${KERNELS_PROMPT:-64}
ncu_profile gemv 'bf16_gemv_kernel<' 99 "${NCU_COUNT:-4}"
ncu_profile attention 'flash_attention_kernel<\(int\)128' 24 2
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
