#!/usr/bin/env bash
# Session 42's attention-layer launches (docs/CUDA.md stage 40) in one call: every CUDA test, then
# decode with the three changes off (TEMPO9_CUDA_ATTN_PREP=0 TEMPO9_CUDA_ATTN_FOLD_ROWS=0
# TEMPO9_CUDA_ATTN_EARLY_KEYS=0: stage 39's kernels) against the defaults (q/k prepared in the
# attention kernel for one or two sequences, early keys), alternated, on the Qwen3-8B shape
# (Q4_K_M; 36 attention layers) and the 35B hybrid (Q8_0, real vocabulary; 10 attention layers);
# on the 8B the last-block fold (off by default), the greedy text against off at 1, 2 and 8 rows,
# and a trace; the 35B's 8 agents off / on.
# Runs 197-199 (2026-12-05) ran this plan's forms (run 199 the last, with a late-trigger A/B).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/attention_fusions.sh` (~6-7 min; $OUT/log.txt).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
left() { [ $((SECONDS - T0)) -lt "$1" ]; }
OFF=(TEMPO9_CUDA_ATTN_PREP=0 TEMPO9_CUDA_ATTN_FOLD_ROWS=0 TEMPO9_CUDA_ATTN_EARLY_KEYS=0)
ON=(TEMPO9_CUDA_ATTN_PREP=1)  # the defaults: prepared q/k and early keys, the fold off
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
.devrun/bin/test_cuda_ops >"$OUT/tests.txt" 2>&1
echo "all CUDA tests, rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$OUT/tests.txt" | head -20
grep -E '^\[ +OK \] CudaAttention\.(LastBlock|RopeAttention)' "$OUT/tests.txt"
echo "t=$((SECONDS - T0)) s"

P512=$(python3 -c "print('x'*512)")  # the --parallel runs' prompt (decode_one's)

S8="SINGLE_X=512 GEN=128 PRESET=qwen3-8b QUANT=Q4_K_M SIDES=ours"
M=/tmp/qwen3-8b-Q4_K_M.gguf
NAME=8B
env $S8 OUT=/tmp/synth8 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
decode_one off "${OFF[@]}"
decode_one on "${ON[@]}"
decode_one fold TEMPO9_CUDA_ATTN_FOLD_ROWS=4
# (Run 199 also ran the fold and the defaults with TEMPO9_CUDA_ATTN_LATE_TRIGGER=1, a switch that
# gave nothing and was removed after it: docs/CUDA.md stage 40.)
decode_one off2 "${OFF[@]}"
decode_one on2 "${ON[@]}"
for t in on fold off2 on2; do
  echo "8B greedy text, $t vs off: $(cmp /tmp/one_off.txt "/tmp/one_$t.txt" >/dev/null && echo identical || echo DIFFERENT)"
done
for p in 1 2 8; do  # 1 and 2 rows prepared in the attention kernel, 8 rows the two ops
  env "${OFF[@]}" "$T9" run -m "$M" --raw -p "$P512" -n 64 --temp 0 --ignore-eos --backend cuda \
    --ctx 1000 --parallel $p >/tmp/par_off.txt 2>/dev/null
  "$T9" run -m "$M" --raw -p "$P512" -n 64 --temp 0 --ignore-eos --backend cuda \
    --ctx 1000 --parallel $p >/tmp/par_on.txt 2>/dev/null
  echo "8B greedy text at --parallel $p, on vs off: $(cmp /tmp/par_off.txt /tmp/par_on.txt >/dev/null && echo identical || echo DIFFERENT)"
done
echo "t=$((SECONDS - T0)) s"
# Where an 8B step goes now (traced: ranks, not speeds; docs/PERFORMANCE.md run 189 before).
env $S8 MODEL=$M OUT=/tmp/trace8 bash bench/h200_bench.sh trace 2>&1 | grep -v '^==' | head -40
cp /tmp/trace8/trace_*.txt "$OUT/" 2>/dev/null
echo "t=$((SECONDS - T0)) s"
rm -f "$M"
left 300 || exit 0

S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
NAME=35B
env $S35 OUT=/tmp/synth bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
decode_one off "${OFF[@]}"
decode_one on "${ON[@]}"
decode_one off2 "${OFF[@]}"
decode_one on2 "${ON[@]}"
echo "35B greedy text, on vs off: $(cmp /tmp/one_off.txt /tmp/one_on.txt >/dev/null && echo identical || echo DIFFERENT)"
echo "t=$((SECONDS - T0)) s"
left 480 || exit 0
agents off "${OFF[@]}"
agents on "${ON[@]}"
left 560 || exit 0
agents off2 "${OFF[@]}"
agents on2 "${ON[@]}"
echo "t=$((SECONDS - T0)) s"
