#!/usr/bin/env bash
# Session 42's last call: every CUDA test on the committed binary; where the last-block fold
# (docs/CUDA.md stage 40: off, it lost 8-10% of the 8B's decode) loses: the attention op alone in
# a chain of its own calls (cuda_attention_bench, one decode row over 640 keys, 8B and 35B
# shapes), the combine kernel (TEMPO9_CUDA_ATTN_FOLD_ROWS=0) against the fold (=4), alternated
# (slower alone too: the fold's own work; even alone: its neighbours in the model's chain); then
# the Gated DeltaNet's state read before the wait on the 35B (single decode and 8 agents).
# Here: `bash scripts/device_stage.sh cuda_attention_bench`; there (device tool, carry
# [".devrun"]): `bash bench/device_plans/fold_and_gdn_state.sh` (~4 min; $OUT/log.txt).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
.devrun/bin/test_cuda_ops >"$OUT/tests.txt" 2>&1
echo "all CUDA tests, rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$OUT/tests.txt" | head -20
echo "t=$((SECONDS - T0)) s"
# (The bench binary with the rest exceeds one call's 64 MiB carry: stage it alone to run this.)
[ -x .devrun/bin/cuda_attention_bench ] && for rows in 0 4 0 4; do
  echo "== TEMPO9_CUDA_ATTN_FOLD_ROWS=$rows"
  TEMPO9_CUDA_ATTN_FOLD_ROWS=$rows .devrun/bin/cuda_attention_bench 400 "decode 1 row at 640" 2>&1 |
    grep -v '^device'
done
echo "t=$((SECONDS - T0)) s"

# The Gated DeltaNet's recurrent state read before the dependent-launch wait (gdn_regs_kernel,
# ssm_conv_kernel; TEMPO9_CUDA_GDN_EARLY_STATE=0: after it): 35B single decode, alternated, the
# greedy text against off; then 8 agents off / on.
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
env $S35 OUT=/tmp/synth bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
NAME="35B early state"
decode_one off TEMPO9_CUDA_GDN_EARLY_STATE=0
decode_one on
decode_one off2 TEMPO9_CUDA_GDN_EARLY_STATE=0
decode_one on2
echo "35B greedy text, early state on vs off: $(cmp /tmp/one_off.txt /tmp/one_on.txt >/dev/null && echo identical || echo DIFFERENT)"
echo "t=$((SECONDS - T0)) s"
agents off TEMPO9_CUDA_GDN_EARLY_STATE=0
agents on TEMPO9_CUDA_GDN_EARLY_STATE=1
echo "t=$((SECONDS - T0)) s"
