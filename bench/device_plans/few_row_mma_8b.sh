#!/usr/bin/env bash
# The few-row tensor-core GEMV's Q4_K / Q6_K forms on the synthetic Qwen3-8B Q4_K_M (issue 7:
# its 8-row steps and the 32-way step, whose 32-row matmuls run on the 64-row tile kernel at
# 0.3-0.55 TB/s). Written in session 38 without a device. Here: `bash scripts/device_stage.sh
# cuda_gemv_bench`; there (device tool, carry [".devrun"]): `bash
# bench/device_plans/few_row_mma_8b.sh` (~7 min; $OUT/log.txt). The few-row test; the GEMV bench
# on the 8B's Q4_K and Q6_K shapes at 8, 16 and 32 rows (kernel on up to 32 rows / off); greedy
# text at 8 and 32 rows on vs off; logprobs beside the device's draw vs on the host (8 rows);
# 32-way rounds (bench cold) on / off.
# Settings: TEMPO9_CUDA_MMA_ROWS_MIN=2 turns the kernel on, TEMPO9_CUDA_MMA_ROWS_MAX=32 lets it
# take the 16-32-row calls from the tile kernel.
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
S8="SINGLE_X=512 GEN=128 PRESET=qwen3-8b QUANT=Q4_K_M SIDES=ours"
M=/tmp/qwen3-8b-Q4_K_M.gguf
.devrun/bin/test_cuda_ops --gtest_filter='Cuda.MatmulFewRow*:Cuda.MatmulSliced*' >"$OUT/tests.txt" 2>&1
RC=$?
echo "few-row tests rc $RC: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|row ' "$OUT/tests.txt" | head -20
SH=4096x6144x8,4096x4096x8,4096x24576x8,12288x4096x8,4096x6144x32,4096x4096x32,4096x24576x32,12288x4096x32,4096x4096x16
for v in "2 32" "0 32"; do
  set -- $v
  echo "gemv bench Q4_K, TEMPO9_CUDA_MMA_ROWS_MIN=$1 MAX=$2:"
  TEMPO9_CUDA_MMA_ROWS_MIN=$1 TEMPO9_CUDA_MMA_ROWS_MAX=$2 T9_BENCH_REPLAY=1 \
    .devrun/bin/cuda_gemv_bench 4234 Q4_K $SH 2>&1 | grep -E '^(type|Q4_K)'
  echo "gemv bench Q6_K (attn_v, ffn_down), TEMPO9_CUDA_MMA_ROWS_MIN=$1 MAX=$2:"
  TEMPO9_CUDA_MMA_ROWS_MIN=$1 TEMPO9_CUDA_MMA_ROWS_MAX=$2 T9_BENCH_REPLAY=1 \
    .devrun/bin/cuda_gemv_bench 4234 Q6_K 4096x1024x8,12288x4096x8,4096x1024x32,12288x4096x32 2>&1 |
    grep -E '^(type|Q6_K)'
done
# Logprobs on the device (session 39, stage 37): its op test, timed below.
.devrun/bin/test_cuda_ops --gtest_filter='CudaSample.*' >"$OUT/tests_sample.txt" 2>&1
echo "sample tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tests_sample.txt" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is|row ' "$OUT/tests_sample.txt" | head -20
echo "t=$((SECONDS - T0)) s"
[ $RC = 0 ] || exit 1
env $S8 OUT=/tmp/synth8 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth|cores"
echo "t=$((SECONDS - T0)) s"
P=$(python3 -c "print('x'*800)")
for k in 8 32; do
  for v in 2 0; do
    TEMPO9_CUDA_MMA_ROWS_MIN=$v TEMPO9_CUDA_MMA_ROWS_MAX=32 "$T9" run -m "$M" --raw -p "$P" -n 64 \
      --temp 0 --ignore-eos --backend cuda --ctx 1000 --parallel $k >/tmp/par${k}_$v.txt 2>/tmp/e.txt
    echo "8B $k rows, MMA_ROWS_MIN=$v: $(grep -E '^\[(prompt|engine)' /tmp/e.txt | tr '\n' ' ')"
  done
  echo "greedy text at $k rows, few-row GEMV on vs off: $(cmp /tmp/par${k}_2.txt /tmp/par${k}_0.txt >/dev/null && echo identical || echo DIFFERENT) ($(wc -c </tmp/par${k}_2.txt) bytes)"
done
echo "t=$((SECONDS - T0)) s"
# 8 sampled rows with logprobs (top 5): beside the device's draw vs the vocabulary rows copied to
# the host (TEMPO9_SAMPLE_ON_HOST=1); the same text and the same logprobs line within ulps. Top-k
# 40 so the device settles every draw (a synthetic model's flat rows would send top-p-only draws
# past its 1024 candidates to the host).
for h in 0 1 0 1; do logprobs_run $h; done
echo "sampled text with logprobs, device vs host: $(cmp /tmp/lp_0.txt /tmp/lp_1.txt >/dev/null && echo identical || echo DIFFERENT)"
echo "t=$((SECONDS - T0)) s"
for v in 2 0 2 0; do serve32 $v; done
echo "t=$((SECONDS - T0)) s"
# The lazy tool-call grammar's cost on a GPU agent load (session 39: `tempo9 bench agents
# --tools-in-request` puts the tools in the request, so every request carries the constraint with
# `serve --tool-grammar on`); only while the call's 10 minutes allow.
[ $((SECONDS - T0)) -lt 450 ] || exit 0
for tg in on off; do
  env $S8 AGENTS=8 SYSTEM=3000 RATIO=4 AGENT_S=60 MODEL=$M BENCH_ARGS="--tools-in-request" \
    SERVE_ARGS="--tool-grammar $tg" OUT=/tmp/agents_tg_$tg bash bench/h200_bench.sh agents >/dev/null 2>&1
  echo "8B agents with tools, --tool-grammar $tg: $(grep -E 'TTFT p50 ms \(all|ITL p50|wall s|effective tok/s' /tmp/agents_tg_$tg/agents_tempo9.txt | tr '\n' ' ')"
  grep -E 'constraint|pipelined' /tmp/agents_tg_$tg/agents_metrics_tempo9.txt | head -4
done
echo "t=$((SECONDS - T0)) s"
