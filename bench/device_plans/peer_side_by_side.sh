#!/usr/bin/env bash
# Issues 7 and 9 beside llama.cpp in one call (~6-8 min), on one card, defaults of this build:
#   8B   synthetic Qwen3-8B Q4_K_M (synthetic vocabulary, as runs 68 and 144): single stream
#        (tempo9 run twice against llama-bench -p 512 -n 128 -r 3) and the 32-way serve round
#        (WAYS=32 ROUNDS=2: tempo9 serve against llama-server -np 32, one server at a time).
#   8b-bf16  the same 8B shape in BF16 (issue 7's second type), the same two loads.
#   35B  synthetic Qwen3.5-35B-A3B Q8_0 with the real Qwen3 vocabulary (as run 69): single stream
#        (SINGLE_X=4096: a 512-token prompt) and 8 agents over a 10k-token system prompt.
# PARTS ("8b 8b-bf16 35b") picks the models, P8 / P35 their h200_bench.sh parts (defaults above);
# OURS_ENV (VAR=value ...) goes to tempo9 only (e.g. TEMPO9_CUDA_BF16_Q8_0=1); SIDES=peer runs
# llama.cpp alone (ours measured by an earlier call: measure_ours.sh). A synth file already in
# /tmp is reused (h200_bench.sh).
# The peer: llama.cpp built on the device (`bash scripts/build_peer_cuda.sh pack` here, then
# `bash scripts/build_peer_cuda.sh device-build` there in the background of an earlier call on
# the same warm machine, as measure_ours.sh does: /tmp/peer/bin), or PEER_BIN (staged binaries).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun"], or nothing on a
# machine still warm from the call that carried it): `bash bench/device_plans/peer_side_by_side.sh`.
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/side}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$SECONDS
TOK=$PWD/.devrun/shared/fixtures/tokenizers/qwen3/tokenizer.json
export PEER_BIN=${PEER_BIN:-/tmp/peer/bin}
[ -x "$PEER_BIN/llama-server" ] || { echo "no llama-server in $PEER_BIN"; exit 1; }
read -r -a ours_env <<<"${OURS_ENV:-}"
echo "tempo9's extra environment: ${ours_env[*]:-none}"

# h200_bench.sh runs both sides; ours_env reaches tempo9 only (llama.cpp reads none of it).
side_by_side() {  # out dir, parts, then VAR=value ... for h200_bench.sh
  local out=$1 parts=$2
  shift 2
  # A server of the previous part may still hold its port (run 228: the agents then reached the
  # 8B's 2048-context llama-server). -x: by name, not this script's own command line.
  pkill -x llama-server
  pkill -x tempo9
  sleep 1
  env "${ours_env[@]}" "$@" OUT="$out" SIDES="${SIDES:-ours,peer}" \
    bash bench/h200_bench.sh "$parts" >/dev/null 2>&1
  # The summary keeps each round's time: the device tool returns only so many files, and run 253
  # lost llama.cpp's bench.log (its rounds) to that limit.
  grep -E "^(synth|tempo9 run|\| .*(pp|tg)[0-9]|wall|tempo9 |llama |== |bench: round)|tok/s|TTFT p50|ITL p50" \
    "$out/bench.log" | grep -v "^|  *model" | head -60
  echo "t=$((SECONDS - T0)) s"
}

case " ${PARTS:-8b 8b-bf16 35b} " in *" 8b "*)
  side_by_side "$OUT/8b" "${P8:-single,serve}" PRESET=qwen3-8b QUANT=Q4_K_M GEN=128 WAYS=32 ROUNDS=2
  rm -f /tmp/qwen3-8b-Q4_K_M.gguf ;;
esac
case " ${PARTS:-8b 8b-bf16 35b} " in *" 8b-bf16 "*)
  side_by_side "$OUT/8b_bf16" "${P8:-single,serve}" PRESET=qwen3-8b QUANT=BF16 GEN=128 WAYS=32 \
    ROUNDS=2
  rm -f /tmp/qwen3-8b-BF16.gguf ;;
esac
case " ${PARTS:-8b 8b-bf16 35b} " in *" 35b "*)
  side_by_side "$OUT/35b" "${P35:-single,agents}" PRESET=qwen3.5-35b-a3b QUANT=Q8_0 GEN=128 \
    SINGLE_X=4096 AGENTS=8 TOKENIZER="$TOK"
  for s in tempo9 llama; do
    [ -f "$OUT/35b/agents_$s.txt" ] || continue
    echo "agents $s: $(grep -E 'turn [123] TTFT p50|ITL p50|wall s|effective tok/s' \
      "$OUT/35b/agents_$s.txt" | tr '\n' ' ')"
  done ;;
esac
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
