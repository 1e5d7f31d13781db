#!/usr/bin/env bash
# Stage 67's one call (~9 min): llama.cpp builds in the background (nice 19) while
#   1. the whole CUDA op suite runs with the chunk kernel on by default (attn_row_chunk; its own
#      tests and the whole-35B texts passed in run 299, the rest of the suite not yet), the
#      one-chunk form's tests (attn_row_chunk_one) among them;
#   2. the 35B's 8-layer file: a 128-token run at a 512-token prompt with the stream's graph log
#      (TEMPO9_CUDA_GRAPH_DEBUG=1: where the timed run's tapes depart, now that the counters are
#      the timed run's own), then, when the one-chunk tests passed, contexts inside one chunk (an
#      8-'x' prompt: one token, 112 generated) by the chunk kernel's one-chunk calls against the
#      default (the row-warp kernel's one block), alternated twice, texts compared;
#   3. the whole 35B Q8_0 beside llama.cpp (peer_side_by_side.sh PARTS=35b P35=single): ours at a
#      512-token prompt and from one token (SINGLE_X0=8: llama-bench tg128's shape), llama-bench
#      tg128 and tg128 @ d512; tempo9 with the one-chunk form when it won in 2 (ONE_ENV).
# Between 1 and 2, bench/cuda_moe_decode_bench (when staged): a one-token MoE layer by pieces.
# Each part prints before the next starts, so a call cut short keeps what ran. WAIT_S (480): how
# long into the call to wait for the peer's build before part 3.
# Here: `bash scripts/device_stage.sh` (sm_90a-only, TEMPO9_CUDA_BUILD) and `bash
# scripts/build_peer_cuda.sh pack`; there (device tool, carry [".devrun", ".devrun-peer"]):
# `bash bench/device_plans/short_and_side.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/sas}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
if [ -f .devrun-peer/llama-src.tar.xz ]; then
  (DEVICE_JOBS=${DEVICE_JOBS:-10} setsid nohup bash scripts/build_peer_cuda.sh device-build \
    >/tmp/peer_dev.log 2>&1 </dev/null &)
fi

# 1. The op suite (OPS: a gtest filter, default all).
op_tests "${OPS:-*}"
grep -E "tests from .* ran" "$OUT/tests.txt"
one_ok=0
if grep -qE '^\[       OK \] CudaAttention\.OneChunkRow' "$OUT/tests.txt" &&
  ! grep -qE '^\[  FAILED  \] CudaAttention\.(OneChunkRow|RopeAttentionDecodeOneChunkRow)' \
    "$OUT/tests.txt"; then
  one_ok=1
fi
echo "one-chunk tests passed: $one_ok; t=$((SECONDS - T0)) s"

# 1b. A one-token MoE layer's pieces as graph replays (bench/cuda_moe_decode_bench.cpp, staged
# beside the binaries when present): the route, the gate/up by ids and routed, a dense GEMV of
# the same bytes; twice by default, then with one row per warp for the pairs.
if [ -x .devrun/bin/cuda_moe_decode_bench ]; then
  for form in default default TEMPO9_CUDA_PAIR_ROWS2=0; do
    echo "cuda_moe_decode_bench, $form:"
    env "$([ "$form" = default ] && echo T9_UNUSED=1 || echo "$form")" \
      .devrun/bin/cuda_moe_decode_bench 40 2>&1 | tail -7
  done
fi

# 2. The 35B's 8-layer file: the timed run's graph log, then the one-chunk A/B.
M=/tmp/q35_8l_Q8_0.gguf NAME="35B Q8_0 (8 layers)"
synth_35b_8l "$M"
GEN=128 decode_one graphs TEMPO9_CUDA_GRAPH_DEBUG=1
grep -E "cuda graphs|^\[pipelined" /tmp/e.txt | head -30
ONE_ENV=
if [ "$one_ok" = 1 ]; then
  for rep in 1 2; do
    PROMPT_X=8 GEN=112 decode_one "short_rows_$rep"
    PROMPT_X=8 GEN=112 decode_one "short_one_$rep" TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1
    cmp -s /tmp/one_short_rows_1.txt "/tmp/one_short_one_$rep.txt" &&
      echo "text short_one_$rep: equal" || echo "text short_one_$rep: DIFFERS"
  done
  # ONE_ENV when both one-chunk runs beat both default runs and every text is equal.
  rates() {
    grep -E "^$NAME short_$1_[0-9]: " "$OUT/log.txt" |
      sed -E 's/.*generated: [0-9]+ tokens, ([0-9.]+) tok\/s.*/\1/'
  }
  slowest_one=$(rates one | sort -g | head -1) fastest_rows=$(rates rows | sort -g | tail -1)
  if ! grep -q "text short_one_[0-9]: DIFFERS" "$OUT/log.txt" &&
    awk -v a="$slowest_one" -v b="$fastest_rows" 'BEGIN {exit !(a > b)}'; then
    ONE_ENV=TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1
  fi
fi
echo "tempo9's form beside the peer: ${ONE_ENV:-default}; t=$((SECONDS - T0)) s"
rm -f "$M"

# 3. Beside llama.cpp, once its build is there.
while [ ! -f /tmp/peer/done ] && [ $((SECONDS - T0)) -lt "${WAIT_S:-480}" ]; do sleep 5; done
if [ -x /tmp/peer/bin/llama-server ]; then
  SINGLE_X0=8 PARTS=35b P35=single OURS_ENV="$ONE_ENV" OUT=$OUT/side \
    bash bench/device_plans/peer_side_by_side.sh
else
  echo "no peer at t=$((SECONDS - T0)) s:"
  # Run 300 printed nothing here: no build log at all, though .devrun-peer was carried.
  find .devrun-peer /tmp/peer_dev.log /tmp/peer -maxdepth 1 -printf "%p %s\n" 2>&1 | head -12
  tail -3 /tmp/peer_dev.log /tmp/peer/done 2>/dev/null
fi
echo "t=$((SECONDS - T0)) s"
