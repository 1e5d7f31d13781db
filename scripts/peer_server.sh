#!/usr/bin/env bash
# Starts the peer, llama-server (.peer/bin, built by scripts/build_peer.sh --binaries), on a GGUF
# with settings comparable to `tempo9 serve`, in the background, and waits for /health.
#
#   scripts/peer_server.sh -m MODEL.gguf [--port 8090] [--parallel 4] [--ctx-per-agent 4096]
#                          [--threads 2] [--log FILE] [-- extra llama-server args]
#   scripts/peer_server.sh --stop [--port 8090]
#
# Settings: --parallel K slots (one per agent: the bench's concurrency), --ctx-size K * ctx-per-agent
# (llama.cpp splits it evenly across the slots), --cache-reuse 256 (reuse cached prefix chunks via
# KV shifting), the same thread count for generation and prompt processing (-t/-tb), --jinja (the
# GGUF's chat template, as tempo9 uses), loopback only. Weight repacking / AMX ("extra buffer types")
# is off (--no-repack) because the AMX path segfaults on our Sapphire Rapids VMs (see
# scripts/golden_logits.py); PEER_EXTRA_BUFTS=1 turns it back on.
# Prints the PID and URL; the PID is also in .peer/llama-server-PORT.pid for --stop.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

MODEL="" PORT=8090 PARALLEL=4 CTX_PER_AGENT=4096 THREADS=2 LOG="" STOP=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -m|--model) MODEL=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --ctx-per-agent) CTX_PER_AGENT=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --stop) STOP=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "peer_server.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

PIDFILE=$ROOT/.peer/llama-server-$PORT.pid
if [[ $STOP -eq 1 ]]; then
  [[ -f $PIDFILE ]] || { echo "peer_server.sh: no $PIDFILE" >&2; exit 1; }
  kill "$(cat "$PIDFILE")" 2>/dev/null || true
  rm -f "$PIDFILE"
  echo "peer: stopped llama-server on port $PORT"
  exit 0
fi

BIN=$ROOT/.peer/bin/llama-server
[[ -x $BIN ]] || { echo "peer_server.sh: $BIN missing (run scripts/build_peer.sh --binaries)" >&2; exit 1; }
[[ -f $MODEL ]] || { echo "peer_server.sh: model '$MODEL' not found (-m MODEL.gguf)" >&2; exit 1; }
for v in PORT PARALLEL CTX_PER_AGENT THREADS; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || { echo "peer_server.sh: --${v,,} must be a positive integer" >&2; exit 2; }
done
LOG=${LOG:-$ROOT/.peer/llama-server-$PORT.log}
REPACK=(--no-repack)
[[ ${PEER_EXTRA_BUFTS:-0} == 1 ]] && REPACK=()

mkdir -p "$ROOT/.peer"
"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" \
  --parallel "$PARALLEL" --ctx-size $((PARALLEL * CTX_PER_AGENT)) --cache-reuse 256 \
  -t "$THREADS" -tb "$THREADS" --jinja --no-webui "${REPACK[@]}" "${EXTRA[@]}" >"$LOG" 2>&1 &
PID=$!
echo "$PID" >"$PIDFILE"

for _ in $(seq 1 240); do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "peer_server.sh: llama-server exited; last lines of $LOG:" >&2
    tail -20 "$LOG" >&2
    rm -f "$PIDFILE"
    exit 1
  fi
  if curl -fs "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
    echo "peer: llama-server PID $PID ready on http://127.0.0.1:$PORT (parallel $PARALLEL, ctx $((PARALLEL * CTX_PER_AGENT)), threads $THREADS, log $LOG)"
    exit 0
  fi
  sleep 0.5
done
echo "peer_server.sh: llama-server did not become healthy in 120 s; see $LOG" >&2
kill "$PID" 2>/dev/null || true
rm -f "$PIDFILE"
exit 1
