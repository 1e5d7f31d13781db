#!/usr/bin/env bash
# The bf16 path's first run on both issues' shapes in one call (~7 min; for when device time is
# short: bf16_matmul.sh and bf16_q8_0_35b.sh are the long forms): the CudaBf16 op tests (Q4_K,
# Q6_K, Q8_0), then int8 against bf16 (TEMPO9_CUDA_BF16=0 / 1) on the 8B Q4_K_M shape (single
# decode, 8 and 32 rows decoding; LONG_PROMPT=1: a 6000-token prompt too) and on issue 9's 35B
# Q8_0 (single decode, 8 agents). TESTS: the op tests' filter (default CudaBf16*).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/bf16_both.sh` (stdout).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
op_tests "${TESTS:-CudaBf16*}"  # TESTS='*': the whole suite

# PARTS (default "8b 35b"): which models to run.
case " ${PARTS:-8b 35b} " in *" 8b "*) ;; *) SKIP8=1 ;; esac
case " ${PARTS:-8b 35b} " in *" 35b "*) ;; *) SKIP35=1 ;; esac
[ -n "${SKIP8:-}" ] || {
S8="SINGLE_X=512 GEN=128 PRESET=qwen3-8b QUANT=Q4_K_M SIDES=ours"
M=/tmp/qwen3-8b-Q4_K_M.gguf
NAME=8B
# shellcheck disable=SC2086  # S8: word-split on purpose
env $S8 OUT=/tmp/synth8 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
rows_run() {  # bf16 flag, rows, prompt x's, generated tokens
  local p
  p=$(python3 -c "print('x'*$3)")
  env TEMPO9_CUDA_BF16="$1" "$T9" run -m "$M" --raw -p "$p" -n "$4" --temp 0 --ignore-eos \
    --backend cuda --ctx $(($3 + $4 + 64)) --parallel "$2" --warmup >/dev/null 2>/tmp/e.txt
  echo "8B bf16=$1, $2 rows, $3-token prompt: $(grep -E '^\[(prompt|engine|parallel)' /tmp/e.txt | tr '\n' ' ')"
  grep -iE "error|check failed" /tmp/e.txt | head -3
}
for b in 0 1; do
  decode_one "8b_$b" TEMPO9_CUDA_BF16=$b
  [ -n "${LONG_PROMPT:-}" ] && rows_run $b 1 6000 8
  rows_run $b 8 512 64
  rows_run $b 32 512 64
done
cmp -n 96 /tmp/one_8b_0.txt /tmp/one_8b_1.txt && echo "8B: first 96 bytes of text the same"
echo "t=$((SECONDS - T0)) s"
rm -f "$M"
}
[ -n "${SKIP35:-}" ] && exit 0

S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
NAME="35B Q8_0"
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 OUT=/tmp/synth35 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
for b in 0 1; do decode_one "35b_$b" TEMPO9_CUDA_BF16=$b TEMPO9_CUDA_BF16_Q8_0=$b; done
# The 64-token prompt step with the GEMM by whole rows (stage 46's slices off), for the A/B.
decode_one 35b_1_whole TEMPO9_CUDA_BF16=1 TEMPO9_CUDA_BF16_Q8_0=1 TEMPO9_CUDA_BF16_SPLIT=0
cmp -n 96 /tmp/one_35b_0.txt /tmp/one_35b_1.txt && echo "35B: first 96 bytes of text the same"
echo "t=$((SECONDS - T0)) s"
agents bf16_0 TEMPO9_CUDA_BF16=0 TEMPO9_CUDA_BF16_Q8_0=0
agents bf16_1 TEMPO9_CUDA_BF16=1 TEMPO9_CUDA_BF16_Q8_0=1
echo "t=$((SECONDS - T0)) s"
