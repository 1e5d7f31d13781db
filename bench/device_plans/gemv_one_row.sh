#!/usr/bin/env bash
# Why the 8B Q4_K_M's single decode sits at ~48% of its byte roofline while the BF16 8B's
# GEMVs stream at ~87% of the copy rate (docs/CUDA.md stage 47, next steps): for each file, ncu's
# time of every kernel of a decode step (h200_bench.sh kernels: the step's map, graphs off), then
# ncu's detailed sections of NCU_COUNT (8) consecutive one-row bf16 GEMV launches after
# NCU_SKIP (60) (h200_bench.sh ncu1: occupancy, warp states, memory, issue). ~4-6 min.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/gemv_one_row.sh` (stdout; tables in $OUT).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/gemv1}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for q in Q4_K_M BF16; do
  M=/tmp/qwen3-8b-$q.gguf
  S="SIDES=ours PRESET=qwen3-8b QUANT=$q MODEL=$M"
  # shellcheck disable=SC2086  # S: word-split on purpose
  env $S OUT="$OUT/$q" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
  echo "== $q: one decode step's kernels (ncu, graphs off)"
  # shellcheck disable=SC2086
  env $S OUT="$OUT/$q" KERNELS_PROMPT=64 KERNELS_GEN=3 NCU_S=150 \
    bash bench/h200_bench.sh kernels 2>&1 | tail -40
  echo "== $q: one-row bf16 GEMV launches (ncu1)"
  # shellcheck disable=SC2086
  env $S OUT="$OUT/$q" KERNELS_PROMPT=64 NCU_KERNEL='bf16_gemv_kernel' NCU_SKIP="${NCU_SKIP:-60}" \
    NCU_COUNT="${NCU_COUNT:-8}" NCU_S=200 bash bench/h200_bench.sh ncu1 2>&1 | tail -45
  rm -f "$M"
  echo "t=$((SECONDS - T0)) s"
done
