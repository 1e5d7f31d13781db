#!/usr/bin/env bash
# The three largest pieces of a 35B decode layer's chain after stage 59 (docs/CUDA.md, next
# steps, 0000000000c) under ncu, on the 35B shape cut to 8 layers (qwen35moe_8layer.json, ~20 s
# synth; AB_MODEL: a file already there):
#   - the row-warp decode attention, split or not (run 283: 'x' * 600 and 12 tokens are at most
#     96 keys, three tiles: one unsplit block a KV head, flash_attention_kernel<256, false,
#     false, true>);
#   - the experts' gate/up by pair (gemv_slice_kernel<Q8_0, 1, true, 2, 2>);
#   - the add-norm with the next matmul's codes (rms_norm_codes_kernel<true>);
# each with h200_bench.sh ncu1's sections (occupancy, warp states, instructions executed, source
# counters) for NCU_COUNT (2) decode launches, then their warp samples per SASS
# instruction (h200_bench.sh NCU_SASS=1, bench/ncu_sass.py: where the stalls sit). ncu runs
# kernels one at a time (no dependent-launch overlap), so its durations only rank; this is for
# the instructions executed a
# warp and the stall reasons (stage 59 estimates ~911 instructions a 32-key tile and warp for the
# attention, and a latency-bound loop). The source counters name SASS addresses; with a
# -lineinfo build staged (build-cuda2) they name source lines too, and for a build-dev staging
# bench/ncu_sass_lines.py maps them to lines through `nvdisasm -g` of the same source compiled
# here with -lineinfo (the same code; its docstring has the recipe). ~3-4 min.
# Here: `bash scripts/device_stage.sh` (any staging); there (device tool, carry [".devrun"]):
# `bash bench/device_plans/issue9_kernels_ncu.sh` (stdout; the reports in $OUT's bundle).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/i9ncu}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
M=${AB_MODEL:-/tmp/q35_8l_Q8_0.gguf}
synth_35b_8l "$M"
# Launches to skip: the prompt's and the first decode steps' (2 attention and 8 MoE layers a
# step).
export KERNELS_PROMPT=600
n=${NCU_COUNT:-2}
ncu_profile attention 'flash_attention_kernel<\(int\)256, \(bool\)[01], \(bool\)0, \(bool\)1>' 8 "$n"
ncu_profile gate_up 'gemv_slice_kernel<\(t9::GgmlType\)8, \(int\)1, \(bool\)1, \(int\)2, \(int\)2>' 24 "$n"
ncu_profile add_norm 'rms_norm_codes_kernel<\(bool\)1>' 40 "$n"
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
