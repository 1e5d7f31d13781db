#!/usr/bin/env bash
# One call for stage 65 when device machines are scarce (a warm machine goes back 30 s after a
# call, so a second call usually starts a fresh one): llama.cpp builds in the background (nice
# 19) while
#   1. row_chunk_ab.sh (FILES "35b 8b"): the bit tests of the decode row by whole chunks, then
#      the 8-layer files' A/B of the row-warp kernel (rows), the chunk kernel (chunk) and the
#      chunk kernel with its fold (chunkfold), GEN 1,024, texts compared;
#   2. the form with the best mean on the 35B's 8-layer file (BEST), beside rows on the whole
#      35B Q8_0 (decode_one, GEN 1,024, alternated twice; skipped when rows is best), then one
#      128-token run with the stream's graph log (TEMPO9_CUDA_GRAPH_DEBUG);
#   3. the 35B's single stream beside llama.cpp (peer_side_by_side.sh PARTS=35b P35=single,
#      tempo9 with BEST's environment): tg128 from an empty context and at depth 512, ours' own.
# Each part prints before the next starts, so a call cut short keeps what ran. WAIT_S (470): how
# long into the call to wait for the peer's build before part 3.
# Here: `bash scripts/device_stage.sh` (sm_90a-only, TEMPO9_CUDA_BUILD) and `bash
# scripts/build_peer_cuda.sh pack`; there (device tool, carry [".devrun", ".devrun-peer"]):
# `bash bench/device_plans/chunk_then_peer.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/ctp}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
if [ -f .devrun-peer/llama-src.tar.xz ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi

# 1. The bit tests and the 8-layer A/B (stops here when a test fails).
FILES="35b 8b" OUT=$OUT/ab bash bench/device_plans/row_chunk_ab.sh || exit 1

# 2. BEST: the highest mean decode rate on the 35B's 8-layer file ("... 35b_TAG_REP: [prompt: ...
# | generated: N tokens, R tok/s]").
FORMS="rows:TEMPO9_CUDA_ATTN_ROW_CHUNK=0 chunk:TEMPO9_CUDA_ATTN_ROW_CHUNK=1 chunkfold:TEMPO9_CUDA_ATTN_ROW_CHUNK=1,TEMPO9_CUDA_ATTN_FOLD_ROWS=1"
best=rows best_rate=0
for form in $FORMS; do
  tag=${form%%:*}
  rate=$(grep -E " 35b_${tag}_[0-9]+: " "$OUT/ab/log.txt" |
    sed -E 's/.*generated: [0-9]+ tokens, ([0-9.]+) tok\/s.*/\1/' |
    awk '{s += $1; n++} END {if (n) printf "%.1f", s / n; else print 0}')
  echo "35B 8 layers, mean of $tag: $rate tok/s"
  if awk -v a="$rate" -v b="$best_rate" 'BEGIN {exit !(a > b)}'; then best=$tag best_rate=$rate; fi
done
best_env=$(for form in $FORMS; do [ "${form%%:*}" = "$best" ] && echo "${form#*:}"; done | tr ',' ' ')
echo "best on the 35B's 8 layers: $best (${best_env:-default environment})"

M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
[ -f "$M" ] || env SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours \
  TOKENIZER="$TOK" MODEL="$M" OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
if [ "$best" != rows ]; then
  for rep in 1 2; do
    GEN=1024 decode_one "35bwhole_rows_$rep" TEMPO9_CUDA_ATTN_ROW_CHUNK=0
    # shellcheck disable=SC2086  # best_env: VAR=value words, split on purpose
    GEN=1024 decode_one "35bwhole_${best}_$rep" $best_env
    cmp -s "/tmp/one_35bwhole_rows_1.txt" "/tmp/one_35bwhole_${best}_$rep.txt" &&
      echo "text 35bwhole_${best}_$rep: equal" || echo "text 35bwhole_${best}_$rep: DIFFERS"
  done
fi
# Why a timed 128-token run still captures graphs after its warm-up (run 286: 5 captures and 7
# windows issued unreplayed of 137): the stream's log of each new tape's first departure.
GEN=128 decode_one 35bwhole_graphs TEMPO9_CUDA_GRAPH_DEBUG=1
grep -E "cuda graphs" /tmp/e.txt | head -24
echo "t=$((SECONDS - T0)) s"

# 3. Beside llama.cpp, once its build is there.
while [ ! -f /tmp/peer/done ] && [ $((SECONDS - T0)) -lt "${WAIT_S:-470}" ]; do sleep 5; done
if [ -x /tmp/peer/bin/llama-server ]; then
  PARTS=35b P35=single OURS_ENV="$best_env" OUT=$OUT/side bash bench/device_plans/peer_side_by_side.sh
else
  echo "no peer at t=$((SECONDS - T0)) s:"
  # Run 300 printed nothing here: no build log at all, though .devrun-peer was carried.
  find .devrun-peer /tmp/peer_dev.log /tmp/peer -maxdepth 1 -printf "%p %s\n" 2>&1 | head -12
  tail -3 /tmp/peer_dev.log /tmp/peer/done 2>/dev/null
fi
echo "t=$((SECONDS - T0)) s"
