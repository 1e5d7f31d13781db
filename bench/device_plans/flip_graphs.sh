#!/usr/bin/env bash
# Stage 66's second call (~4 min): the whole CUDA op suite with the chunk kernel on by default
# (attn_row_chunk), then why a timed 128-token decode at a 512-token prompt still builds graphs
# after its warm-up (run 286: 5 captures, 7 windows issued unreplayed; run 299's graph log was
# of a 64-token prompt without a warm-up): the 35B's 8-layer file, prompt 512, GEN 128, warm-up
# on, TEMPO9_CUDA_GRAPH_DEBUG=1 (each new tape's first departure from the one before, the warm-up's
# and the timed run's); then the 128-token A/B of the row-warp and chunk kernels there, alternated
# twice. Here: `bash scripts/device_stage.sh` (TEMPO9_CUDA_BUILD); there (device tool, carry
# [".devrun"]): `bash bench/device_plans/flip_graphs.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/fg}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${OPS:-*}"
grep -E "tests from .* ran" "$OUT/tests.txt"
echo "t=$((SECONDS - T0)) s"
M=/tmp/q35_8l_Q8_0.gguf NAME="35B Q8_0 (8 layers)"
synth_35b_8l "$M"
GEN=128 decode_one graphs TEMPO9_CUDA_GRAPH_DEBUG=1
grep -E "cuda graphs|^\[pipelined" /tmp/e.txt | head -30
for rep in 1 2; do
  GEN=128 decode_one "rows_$rep" TEMPO9_CUDA_ATTN_ROW_CHUNK=0
  GEN=128 decode_one "chunk_$rep"
  grep -E "^\[cuda graphs" /tmp/e.txt
  cmp -s "/tmp/one_rows_1.txt" "/tmp/one_chunk_$rep.txt" && echo "text chunk_$rep: equal" ||
    echo "text chunk_$rep: DIFFERS"
done
echo "t=$((SECONDS - T0)) s"
