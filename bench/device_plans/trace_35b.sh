#!/usr/bin/env bash
# Where the 35B's single-decode step goes now (issue 9's single-stream goal): the synthetic
# Qwen3.5-35B-A3B Q8_0 with the real Qwen3 vocabulary (as measure_ours.sh), one traced greedy run
# of a 512-token prompt and 128 tokens (h200_bench.sh trace: every kernel's share of the step's
# chain, bench/kernel_trace.py), then one untraced run for the step time. ~4 min with the synth.
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun/bin",
# ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers"]): `bash bench/device_plans/trace_35b.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/t35}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK MODEL=$M"
# shellcheck disable=SC2086  # S35: word-split on purpose
env $S35 OUT="$OUT/35b" bash bench/h200_bench.sh synth,trace 2>&1 | grep -vE "^h200_bench done"
decode_one 35b
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh  # the trace and its logs: one file
