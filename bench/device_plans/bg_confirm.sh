#!/usr/bin/env bash
# Stage 67's last call (~2 min): the graph and pipelined-model tests on the final stream code
# (080fa33: an adopted graph never evicts the tape an open window follows; 2a5fcfe: the
# graphs line says when graphs are built in the background), then the 35B's 8-layer
# file at 128 tokens after a 64-token prompt, graphs built on the engine's thread
# (TEMPO9_CUDA_GRAPH_BACKGROUND=0) against the background (default), alternated REPS (4) times:
# run 301's two alternations there were inside that file's noise.
# Here: `bash scripts/device_stage.sh` (TEMPO9_CUDA_BUILD); there (device tool, carry
# [".devrun"]): `bash bench/device_plans/bg_confirm.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/bgc}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
rm -f /tmp/one_*.txt
op_tests "${OPS:-CudaGraph*:CudaPipelinedModel*:CudaHybridModel*}"
grep -E "tests from .* ran" "$OUT/tests.txt"
M=/tmp/q35_8l_Q8_0.gguf NAME="35B Q8_0 (8 layers)"
synth_35b_8l "$M"
for rep in $(seq "${REPS:-4}"); do
  GEN=128 decode_one "bg0_$rep" TEMPO9_CUDA_GRAPH_BACKGROUND=0
  GEN=128 decode_one "bg_$rep"
  cmp -s /tmp/one_bg0_1.txt "/tmp/one_bg_$rep.txt" && echo "text bg_$rep: equal" ||
    echo "text bg_$rep: DIFFERS"
done
echo "t=$((SECONDS - T0)) s"
