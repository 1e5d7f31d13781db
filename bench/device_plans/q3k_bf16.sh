#!/usr/bin/env bash
# Q3_K on the bf16 tensor-core path (on by default since run 254, docs/CUDA.md stage 53) against
# the int8 sliced kernels, in one device call (~5 min): the CudaBf16 op tests (every list has
# Q3_K, with bf16_q3_k on) and the int8 paths' matmul tests, then the Qwen3.5-35B-A3B shape cut
# to 8 layers at Q3_K_M (synth: Q3_K, Q4_K, Q5_K; the real tokenizer) decoded greedily with
# TEMPO9_CUDA_BF16_Q3K=0 and =1 alternated twice, and 8 rows each. The two paths round differently
# (x to int8 against weights and x to bf16), so their texts may differ; each path's two runs must
# not. Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/q3k_bf16.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/q3kb}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests 'CudaBf16*:Cuda.Matmul*'
M=/tmp/q35-8l-Q3_K_M.gguf NAME="35B/8 layers Q3_K_M"
if [ ! -f "$M" ]; then
  t=$SECONDS
  "$T9" synth --arch qwen35moe --config bench/device_plans/qwen35moe_8layer.json --quant Q3_K_M \
    --seed 1 --tokenizer "$TOK" -o "$M" >/dev/null 2>&1 || echo "synth failed"
  echo "synth: $((SECONDS - t)) s, $(stat -c %s "$M") bytes"
fi
for rep in 1 2; do
  for b in 0 1; do decode_one "q3k$b-$rep" TEMPO9_CUDA_BF16_Q3K=$b; done
done
for b in 0 1; do
  cmp -s "/tmp/one_q3k$b-1.txt" "/tmp/one_q3k$b-2.txt" && echo "Q3K=$b: both runs' texts equal" ||
    echo "Q3K=$b: the two runs' texts DIFFER"
done
cmp -s /tmp/one_q3k0-1.txt /tmp/one_q3k1-1.txt && echo "int8 and bf16 texts equal" ||
  echo "int8 and bf16 texts differ (two roundings: expected)"
p=$(python3 -c "print('x'*512)")
for b in 0 1; do
  TEMPO9_CUDA_BF16_Q3K=$b "$T9" run -m "$M" --raw -p "$p" -n 64 --temp 0 --ignore-eos \
    --backend cuda --ctx 1000 --parallel 8 --warmup >/dev/null 2>/tmp/e.txt
  echo "8 rows, TEMPO9_CUDA_BF16_Q3K=$b: $(grep -E '^\[engine' /tmp/e.txt | tr '\n' ' ')"
done
echo "t=$((SECONDS - T0)) s"
