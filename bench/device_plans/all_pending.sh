#!/usr/bin/env bash
# Sessions 38-40's unmeasured work in one call, most decisive first (session 40 had minutes of
# device time and machines that rarely started; the three plans beside this one take a call
# each): every CUDA test with the few-row tensor-core GEMV on (its bitwise tests, the DeltaNet
# chains', the router tile's, logprobs', the adjust kernel's pending tokens); on the 35B, 8 agents
# with all three kernels off vs on (alternated), the 4k prompt step and its greedy text, the
# single decode; on the 8B, 32-way rounds on / off and the logprobs A/B; each part only while the
# call's 10 minutes allow. Settings: TEMPO9_CUDA_MMA_ROWS_MIN=2 (MAX=32 for the 8B's 32-row calls),
# TEMPO9_CUDA_GDN=chains, TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=64 (docs/CUDA.md stages 36-38).
# Here: `bash scripts/device_stage.sh cuda_gemv_bench`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/all_pending.sh` ($OUT/log.txt).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
left() { [ $((SECONDS - T0)) -lt "$1" ]; }
ON=(TEMPO9_CUDA_MMA_ROWS_MIN=2 TEMPO9_CUDA_GDN=chains TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=64)
OFF=(TEMPO9_CUDA_MMA_ROWS_MIN=0 TEMPO9_CUDA_GDN=rounds TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=0)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TEMPO9_CUDA_MMA_ROWS_MIN=2 .devrun/bin/test_cuda_ops >"$OUT/tests_on.txt" 2>&1
RC=$?
echo "all CUDA tests, few-row GEMV on, rc $RC: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests_on.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$OUT/tests_on.txt" | head -20
echo "t=$((SECONDS - T0)) s"
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
env $S35 OUT=/tmp/synth bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
agents off "${OFF[@]}"
agents on "${ON[@]}"
agents off2 "${OFF[@]}"
agents on2 "${ON[@]}"
echo "t=$((SECONDS - T0)) s"
P4=$(python3 -c "print('x'*4096)")
for side in off on; do
  if [ $side = on ]; then E=("${ON[@]}"); else E=("${OFF[@]}"); fi
  env "${E[@]}" "$T9" run -m "$M" --raw -p "$P4" -n 128 --temp 0 --ignore-eos --backend cuda \
    --ctx 4400 --warmup >"/tmp/one_$side.txt" 2>/tmp/e.txt
  echo "35B 4k prompt + 128 tokens, $side: $(grep -E '^\[(prompt|engine)' /tmp/e.txt | tr '\n' ' ')"
done
echo "greedy text after a 4k prompt, on vs off: $(cmp /tmp/one_on.txt /tmp/one_off.txt >/dev/null && echo identical || echo DIFFERENT)"
echo "t=$((SECONDS - T0)) s"
left 330 || exit 0
rm -f "$M"
S8="SINGLE_X=512 GEN=128 PRESET=qwen3-8b QUANT=Q4_K_M SIDES=ours"
M=/tmp/qwen3-8b-Q4_K_M.gguf
env $S8 OUT=/tmp/synth8 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
for v in 2 0 2 0; do
  left 520 || break
  serve32 $v
done
echo "t=$((SECONDS - T0)) s"
for h in 0 1; do
  left 560 || break
  logprobs_run $h
done
echo "sampled text with logprobs, device vs host: $(cmp /tmp/lp_0.txt /tmp/lp_1.txt >/dev/null 2>&1 && echo identical || echo DIFFERENT)"
echo "t=$((SECONDS - T0)) s"
