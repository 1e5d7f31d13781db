#!/usr/bin/env bash
# Where a batched decode step and a prompt step go (session 43): the Qwen3-8B shape (Q4_K_M) at
# 32 rows (issue 7's 32-way round: 32 sequences decoding, their prompts in 2048-token steps) and
# the 35B hybrid (Q8_0, real vocabulary) at 8 rows (issue 9's agents decode), traced
# (TEMPO9_CUDA_TRACE: ranks, not speeds), each beside an untraced run of the same shape. The
# traces come back xz-compressed for `bench/kernel_trace.py` (--max-us: decode windows,
# --min-us: prompt windows).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"]):
# `bash bench/device_plans/batched_traces.sh` (~6 min; $OUT/log.txt).
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

traced() {  # name, rows, prompt x's, generated tokens
  local p f=/tmp/trace_$1
  p=$(python3 -c "print('x'*$3)")
  for mode in plain traced; do
    local env=()
    [ $mode = traced ] && env=(TEMPO9_CUDA_TRACE=$f.tsv)
    env "${env[@]}" "$T9" run -m "$M" --raw -p "$p" -n "$4" --temp 0 --ignore-eos --backend cuda \
      --ctx $(($3 + $4 + 64)) --parallel "$2" --warmup >/dev/null 2>/tmp/e.txt
    echo "$1 $mode, $2 rows: $(grep -E '^\[(prompt|engine|parallel)' /tmp/e.txt | tr '\n' ' ')"
  done
  python3 bench/kernel_trace.py $f.tsv --last 40 --max-us "$5" --top 30 | head -40
  python3 bench/kernel_trace.py $f.tsv --last 40 --min-us "$6" --top 30 | head -40
  xz -T8 -3 -c $f.tsv >"$OUT/trace_$1.tsv.xz"
  echo "t=$((SECONDS - T0)) s"
}

S8="SINGLE_X=512 GEN=128 PRESET=qwen3-8b QUANT=Q4_K_M SIDES=ours"
M=/tmp/qwen3-8b-Q4_K_M.gguf
env $S8 OUT=/tmp/synth8 bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
traced 8b_32rows 32 512 64 40000 60000
rm -f "$M"

S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK"
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf
env $S35 OUT=/tmp/synth bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
traced 35b_8rows 8 4096 96 20000 30000
