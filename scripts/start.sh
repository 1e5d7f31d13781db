#!/usr/bin/env bash
# The README's main command: set up (apt packages, build, the default model), then serve the
# default model on 127.0.0.1:11435 — OpenAI (/v1), Anthropic (/v1/messages) and Ollama (/api).
# Extra arguments go to `tempo9 serve` (e.g. --port 8080 --api-key KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --models default --no-python
MODEL=$(python3 scripts/fetch_models.py --path qwen2.5-coder-1.5b-instruct-q4_k_m)
exec build/tempo9 serve -m "$MODEL" --port 11435 "$@"
