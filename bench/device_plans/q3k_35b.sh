#!/usr/bin/env bash
# Q3_K and Q5_K on the int8 path (session 45, docs/CUDA.md stage 43): the CUDA op tests that list
# the sliced types (both among them now), then the seed's shape, Qwen3.5-35B-A3B Q3_K_M
# (synthetic, the real tokenizer; Q3_K, Q4_K and Q5_K), beside the Q8_0 file of issue 9's
# figures: single greedy decode and the 8-agent bench (the server log's graph line: windows that
# ran without a graph would mean a host grouping left).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/q3k_35b.sh` (~7 min with both synths; stdout).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
.devrun/bin/test_cuda_ops \
  --gtest_filter='Cuda.Matmul*:CudaHybrid.MatmulId*:CudaHybrid.MatmulSharedX*:CudaMoeDown.*' \
  >"$OUT/tests.txt" 2>&1
echo "tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|\[cuda matmul\] Q[35]_K' "$OUT/tests.txt" | head -20
echo "t=$((SECONDS - T0)) s"
for q in Q3_K_M Q8_0; do
  S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=$q SIDES=ours TOKENIZER=$TOK"
  M=/tmp/qwen3.5-35b-a3b-$q-tok.gguf
  # shellcheck disable=SC2086  # S35: word-split on purpose
  env $S35 OUT=/tmp/synth_$q bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
  NAME="35B $q"
  decode_one "$q"
  agents "$q"
  rm -f "$M"  # disk: the two files are ~52 GB together
  echo "t=$((SECONDS - T0)) s"
done
