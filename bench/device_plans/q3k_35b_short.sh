#!/usr/bin/env bash
# Q3_K and Q5_K on the int8 path (docs/CUDA.md stage 43), in one device call: the op tests that
# list the sliced types, then the Qwen3.5-35B-A3B shape cut to 8 layers (two full-attention, six
# DeltaNet; the real tokenizer) at Q3_K_M (Q3_K, Q4_K, Q5_K; its synth of the 40 layers takes
# ~7 min) beside the same shape at Q8_0: single greedy decode of each and the 8-agent bench of the
# Q3_K_M file (the server log's graph line: windows without a graph would mean a host grouping).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/q3k_35b_short.sh` (~6 min; stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/q3k}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests 'Cuda.Matmul*:CudaHybrid.MatmulId*:CudaHybrid.MatmulSharedX*:CudaMoeDown.*'
CFG=bench/device_plans/qwen35moe_8layer.json  # the 35B shape cut to 8 layers
for q in Q3_K_M Q8_0; do
  M=/tmp/q35-8l-$q.gguf NAME="35B/8 layers $q"
  t=$SECONDS
  "$T9" synth --arch qwen35moe --config "$CFG" --quant "$q" --seed 1 --tokenizer "$TOK" -o "$M" \
    >/dev/null 2>&1 || echo "synth $q failed"
  echo "synth $q: $((SECONDS - t)) s, $(stat -c %s "$M") bytes"
  decode_one "$q"
  decode_one "$q-again"
done
M=/tmp/q35-8l-Q3_K_M.gguf S35="SINGLE_X=4096 SIDES=ours TOKENIZER=$TOK"
agents Q3_K_M
echo "t=$((SECONDS - T0)) s"
