#!/usr/bin/env bash
# The decode row's attention by whole chunks (CudaBackendConfig::attn_row_chunk, cuda_flash_row.cu)
# against the row-warp kernel, in one short call: the op tests that compare its bits with the
# plain form's (OPS, default the row-warp and rope-attention ones), then, when they pass, the
# single decode (common.sh's decode_one: 512 'x's, GEN 1,024 tokens) of the 35B shape cut to 8
# layers (Q8_0, ~20 s synth; a 64-token prompt with the real tokenizer, so the row walks ~64-1,088
# keys), then the 8B shape cut to 8 layers (Q4_K_M, ~40 s; 512 tokens; FILES: "35b 8b", and
# 35bwhole for the whole 35B Q8_0, ~75 s synth), each
# the default form then each of FORMS (below), alternated REPS (2) times; every text compared
# with the file's first. The one-chunk calls by the chunk kernel (attn_row_chunk_one) have their
# tests apart (OPS_ONE); when they pass, each 8-layer file first times them inside one chunk
# (SHORT, default 1: an 8-'x' prompt and 112 tokens, rows against TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1).
# Here: `bash scripts/device_stage.sh` (sm_90a-only, TEMPO9_CUDA_BUILD); there (device tool, carry
# [".devrun"]): `bash bench/device_plans/row_chunk_ab.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/rcab}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
rm -f /tmp/one_*.txt
op_tests "${OPS:-CudaAttention.RowWarps*:CudaAttention.RopeAttentionDecodeEqualsTheOpsRow*}"
grep -q '^\[  FAILED' "$OUT/tests.txt" && exit 1
grep -q '^\[  PASSED' "$OUT/tests.txt" || exit 1
# The one-chunk calls by the chunk kernel (attn_row_chunk_one): their own tests, apart, so that a
# failure there leaves the split form's A/B to run; when they pass, SHORT (below) times them.
cp "$OUT/tests.txt" "$OUT/tests_split.txt"
op_tests "${OPS_ONE:-CudaAttention.OneChunkRow*:CudaAttention.RopeAttentionDecodeOneChunkRow*}"
one_ok=0
grep -q '^\[  FAILED' "$OUT/tests.txt" || { grep -q '^\[  PASSED' "$OUT/tests.txt" && one_ok=1; }
M35=/tmp/q35_8l_Q8_0.gguf M8=/tmp/qwen3_8b_8l_Q4_K_M.gguf
export GEN=${GEN:-1024}
# FORMS ("tag:VAR=value,VAR=value ..."): beside the row-warp kernel ("rows": the default until
# stage 66, named off since), the chunk kernel with the combine launch and with its last block
# folding.
FORMS=${FORMS:-"chunk:TEMPO9_CUDA_ATTN_ROW_CHUNK=1 chunkfold:TEMPO9_CUDA_ATTN_ROW_CHUNK=1,TEMPO9_CUDA_ATTN_FOLD_ROWS=1"}
# The 35B's file first, whole (a call cut short by its device time still reports it).
for f in ${FILES:-35b 8b}; do
  if [ "$f" = 35b ]; then
    M=$M35 NAME="35B Q8_0 (8 layers)"
    synth_35b_8l "$M"
  elif [ "$f" = 35bwhole ]; then  # the whole 35B Q8_0 (~75 s synth; code_size_ab.sh's file)
    M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
    [ -f "$M" ] || env SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours \
      TOKENIZER="$TOK" MODEL="$M" OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
  else
    M=$M8 NAME="8B Q4_K_M (8 layers)"
    synth_8b_8l "$M"
  fi
  # SHORT (1 when the one-chunk tests passed): contexts inside one chunk (an 8-'x' prompt, 112
  # tokens), the row-warp kernel against the chunk kernel for one-chunk calls.
  if [ "$one_ok" = 1 ] && [ "${SHORT:-1}" = 1 ] && [ "$f" != 35bwhole ]; then
    for rep in 1 2; do
      PROMPT_X=8 GEN=112 decode_one "${f}_short_rows_$rep"
      PROMPT_X=8 GEN=112 decode_one "${f}_short_one_$rep" TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1
      cmp -s "/tmp/one_${f}_short_rows_1.txt" "/tmp/one_${f}_short_one_$rep.txt" &&
        echo "text ${f}_short_one_$rep: equal" || echo "text ${f}_short_one_$rep: DIFFERS"
    done
  fi
  for rep in $(seq "${REPS:-2}"); do
    decode_one "${f}_rows_$rep" TEMPO9_CUDA_ATTN_ROW_CHUNK=0
    # shellcheck disable=SC2046  # the form's VAR=value list, split on purpose
    for form in $FORMS; do decode_one "${f}_${form%%:*}_$rep" $(echo "${form#*:}" | tr ',' ' '); done
    for t in rows $(for form in $FORMS; do echo "${form%%:*}"; done); do  # against the first
      cmp -s "/tmp/one_${f}_rows_1.txt" "/tmp/one_${f}_${t}_$rep.txt" &&
        echo "text ${f}_${t}_$rep: equal" || echo "text ${f}_${t}_$rep: DIFFERS"
    done
  done
done
echo "t=$((SECONDS - T0)) s"
