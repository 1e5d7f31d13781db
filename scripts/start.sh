#!/usr/bin/env bash
# The README's main command: set up, then run the main job on the default model.
# Today that job is `tempo9 inspect`; once the server lands it serves the model on :11435.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --models default --no-python
MODEL=$(python3 scripts/fetch_models.py --path qwen2.5-coder-1.5b-instruct-q4_k_m)
exec build/tempo9 inspect "$MODEL" "$@"
