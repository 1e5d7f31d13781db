#!/usr/bin/env bash
# Q8_0 on the bf16 tensor-core path (session 46, docs/CUDA.md stage 44; TEMPO9_CUDA_BF16_Q8_0=1): its
# op tests, then issue 9's file, Qwen3.5-35B-A3B Q8_0 (synthetic, the real tokenizer), int8
# against bf16: single greedy decode and the 8-agent bench. The experts' matmul_id stay on the
# int8 path; the dense matrices with n_in a multiple of 1024 (DeltaNet in/out projections,
# attention q/k/v/o, the output head) take the bf16 path. Text is compared on its first 96 bytes.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/bf16_q8_0_35b.sh` (~7 min with the synth; stdout).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests 'CudaBf16*'
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 OUT=/tmp/synth35 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
NAME="35B Q8_0"
echo "t=$((SECONDS - T0)) s"
for b in 0 1; do
  decode_one "bf16_$b" TEMPO9_CUDA_BF16=$b TEMPO9_CUDA_BF16_Q8_0=$b
done
cmp -n 96 /tmp/one_bf16_0.txt /tmp/one_bf16_1.txt && echo "first 96 bytes of text: same"
echo "  int8: $(head -c 96 /tmp/one_bf16_0.txt | tr '\n' ' ')"
echo "  bf16: $(head -c 96 /tmp/one_bf16_1.txt | tr '\n' ' ')"
echo "t=$((SECONDS - T0)) s"
agents bf16_0 TEMPO9_CUDA_BF16=0 TEMPO9_CUDA_BF16_Q8_0=0
agents bf16_1 TEMPO9_CUDA_BF16=1 TEMPO9_CUDA_BF16_Q8_0=1
echo "t=$((SECONDS - T0)) s"
# Per-op GPU times of one 8-row decode (TEMPO9_CUDA_PROFILE=1: graphs and PDL off).
for b in 0 1; do
  p=$(python3 -c "print('x'*512)")
  TEMPO9_CUDA_PROFILE=1 TEMPO9_CUDA_BF16=$b TEMPO9_CUDA_BF16_Q8_0=$b "$T9" run -m "$M" --raw \
    -p "$p" -n 32 --temp 0 --ignore-eos --backend cuda --ctx 700 --parallel 8 >/dev/null 2>/tmp/e.txt
  echo "op profile, bf16=$b, 8 rows:"
  grep -E '\[cuda profile\].*(matmul|to_bf16)' /tmp/e.txt | head -14
done
echo "t=$((SECONDS - T0)) s"
