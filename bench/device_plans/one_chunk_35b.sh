#!/usr/bin/env bash
# Stage 67's second call (~6.5 min): the op suite (OPS, default all: the one-chunk form's test
# fixed for the chunk kernel's default, run 300's one failure; the graphs built in the
# background, new), then
#   1. on the 35B's 8-layer file: the one-chunk form (attn_row_chunk_one) inside one chunk (an
#      8-'x' prompt: one token, 112 generated; the default against
#      TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1), and 128 tokens after a 64-token prompt with the graphs
#      built on the engine's thread (TEMPO9_CUDA_GRAPH_BACKGROUND=0) against the default
#      (background builds), each alternated twice, texts compared;
#   2. cuda_moe_decode_bench with the dense Q8_0 GEMV on the int8 path (TEMPO9_CUDA_BF16_Q8_0=0):
#      whether run 300's 2 us between the experts' gate/up by ids (int8) and the dense GEMV of the
#      same bytes (bf16 path) is the path or the pairs;
#   3. the whole 35B Q8_0 after a 512-token prompt, background builds against none, then from one
#      token (llama-bench tg128's shape: ours' 128 tokens over 1-129 keys), the default against
#      the one-chunk form; alternated twice, texts compared.
# Here: `bash scripts/device_stage.sh cuda_moe_decode_bench` (TEMPO9_CUDA_BUILD); there (device
# tool, carry [".devrun"]): `bash bench/device_plans/one_chunk_35b.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/oc}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
rm -f /tmp/one_*.txt
op_tests "${OPS:-*}"
grep -E "tests from .* ran" "$OUT/tests.txt"
ONE=TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1

# 1. Inside one chunk, 8 layers.
M=/tmp/q35_8l_Q8_0.gguf NAME="35B Q8_0 (8 layers)"
synth_35b_8l "$M"
for rep in 1 2; do
  PROMPT_X=8 GEN=112 decode_one "short_rows_$rep"
  PROMPT_X=8 GEN=112 decode_one "short_one_$rep" $ONE
  cmp -s /tmp/one_short_rows_1.txt "/tmp/one_short_one_$rep.txt" &&
    echo "text short_one_$rep: equal" || echo "text short_one_$rep: DIFFERS"
done
grep -E "^\[cuda graphs" /tmp/e.txt
BG0=TEMPO9_CUDA_GRAPH_BACKGROUND=0
for rep in 1 2; do
  GEN=128 decode_one "bg0_$rep" $BG0
  grep -E "^\[cuda graphs" /tmp/e.txt
  GEN=128 decode_one "bg_$rep"
  grep -E "^\[cuda graphs" /tmp/e.txt
  cmp -s /tmp/one_bg0_1.txt "/tmp/one_bg_$rep.txt" && echo "text bg_$rep: equal" ||
    echo "text bg_$rep: DIFFERS"
done

# 2. The dense GEMV on the int8 path beside the experts' gate/up.
if [ -x .devrun/bin/cuda_moe_decode_bench ]; then
  echo "cuda_moe_decode_bench, TEMPO9_CUDA_BF16_Q8_0=0:"
  TEMPO9_CUDA_BF16_Q8_0=0 .devrun/bin/cuda_moe_decode_bench 40 2>&1 | tail -7
fi
echo "t=$((SECONDS - T0)) s"

# 3. The whole 35B: from one token (tg128's shape) and after 512 tokens.
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
[ -f "$M" ] || env SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours \
  TOKENIZER="$TOK" MODEL="$M" OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
for rep in 1 2; do
  PROMPT_X=4096 GEN=128 decode_one "whole_512_bg0_$rep" $BG0
  grep -E "^\[cuda graphs" /tmp/e.txt
  PROMPT_X=4096 GEN=128 decode_one "whole_512_bg_$rep"
  grep -E "^\[cuda graphs" /tmp/e.txt
  cmp -s /tmp/one_whole_512_bg0_1.txt "/tmp/one_whole_512_bg_$rep.txt" &&
    echo "text whole_512_bg_$rep: equal" || echo "text whole_512_bg_$rep: DIFFERS"
done
echo "t=$((SECONDS - T0)) s"
for rep in 1 2; do
  PROMPT_X=8 GEN=128 decode_one "whole_empty_rows_$rep"
  PROMPT_X=8 GEN=128 decode_one "whole_empty_one_$rep" $ONE
  cmp -s /tmp/one_whole_empty_rows_1.txt "/tmp/one_whole_empty_one_$rep.txt" &&
    echo "text whole_empty_one_$rep: equal" || echo "text whole_empty_one_$rep: DIFFERS"
done
grep -E "^\[cuda graphs" /tmp/e.txt
echo "t=$((SECONDS - T0)) s"
