#!/usr/bin/env bash
# A real GGUF larger than one device call's carry (64 MiB): SmolLM2-135M-Instruct Q4_1 is 98 MB.
# It travels in two calls on one warm machine (the machine stays held ~30 s after a call, and
# /tmp survives between calls on it): the first carries the file's first part, the second the
# rest with tempo9 and its libraries; there the parts are joined, checked against the sha256
# taken here, and the file runs on CUDA beside the CPU (issue 7: logits parity on the real
# SmolLM2).
#
#   scripts/device_real_model.sh stage [MODEL]   # here, after `scripts/device_test_ops.sh build`
#                                                # (it takes .devrun/bin/tempo9.xz and .devrun/lib):
#                                                # .devrun-a (part 1), .devrun-b (part 2 + tempo9)
#   run tool, carry [".devrun-a"]:  bash scripts/device_real_model.sh receive
#   run tool, carry [".devrun-b"]:  bash scripts/device_real_model.sh parity   # within ~30 s
#                                   # $OUT/parity.txt, $OUT/run_cpu.txt, $OUT/run_cuda.txt
#   scripts/device_real_model.sh join DIR        # joins .devrun-a + .devrun-b into DIR and checks
#                                                # the sha256 (what `parity` does first)
# PART1_BYTES (57000000: with the ~8 MB of tracked files that travel too, 60 MB broke the 64 MiB
# limit in session 15) sets the first part's size; PARITY_TOKENS (256) the teacher-forced ids.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
A=$ROOT/.devrun-a
B=$ROOT/.devrun-b
WORK=/tmp/t9real

stage() {
  local model=${1:-${TEMPO9_MODELS:-$HOME/.cache/tempo9/models}/SmolLM2-135M-Instruct.Q4_1.gguf}
  [ -f "$model" ] || { echo "no model file: $model (scripts/fetch_models.py)" >&2; exit 2; }
  [ -f "$ROOT/.devrun/bin/tempo9.xz" ] ||
    { echo "no .devrun/bin/tempo9.xz: run scripts/device_test_ops.sh build first" >&2; exit 2; }
  local part1=${PART1_BYTES:-57000000}
  rm -rf "$A" "$B" && mkdir -p "$A" "$B/bin" "$B/lib"
  head -c "$part1" "$model" >"$A/part1"
  tail -c +"$((part1 + 1))" "$model" >"$B/part2"
  basename "$model" >"$B/name"
  sha256sum "$model" | cut -d' ' -f1 >"$B/sha256"
  cp "$ROOT/.devrun/bin/tempo9.xz" "$B/bin/"
  # The libraries: .devrun/lib (device_test_ops.sh build) or one lib.tar.xz (device_stage.sh).
  if [ -f "$ROOT/.devrun/lib.tar.xz" ]; then
    cp "$ROOT/.devrun/lib.tar.xz" "$B/"
  else
    cp "$ROOT"/.devrun/lib/* "$B/lib/"
  fi
  du -sh "$A" "$B"
  echo "call 1: carry [\".devrun-a\"]: bash scripts/device_real_model.sh receive"
  echo "call 2: carry [\".devrun-b\"]: bash scripts/device_real_model.sh parity"
}

receive() {
  mkdir -p "$WORK"
  cp "$A/part1" "$WORK/part1"
  ls -l "$WORK/part1"
}

# Joins the first part (from DIR/part1, or .devrun-a) and .devrun-b's second into DIR/NAME and
# checks the sha256; prints the joined file's path.
join() {
  local dir=$1 name
  name=$(cat "$B/name")
  mkdir -p "$dir"
  [ -f "$dir/part1" ] || cp "$A/part1" "$dir/part1"
  cat "$dir/part1" "$B/part2" >"$dir/$name"
  local want got
  want=$(cat "$B/sha256")
  got=$(sha256sum "$dir/$name" | cut -d' ' -f1)
  [ "$want" = "$got" ] || { echo "sha256 mismatch: $got, want $want" >&2; exit 1; }
  echo "$dir/$name"
}

parity() {
  local out=${OUT:-/tmp/t9out} model t9
  mkdir -p "$out"
  model=$(join "$WORK")
  python3 "$ROOT/scripts/devrun_unpack.py" "$B"  # bin/tempo9.xz, lib.tar.xz
  t9=$B/bin/tempo9
  export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
  echo "model $model sha256 $(cat "$B/sha256")" | tee -a "$out/device.txt"
  local rc=0
  "$t9" parity -m "$model" --backend cuda --tokens "${PARITY_TOKENS:-256}" >"$out/parity.txt" 2>&1 ||
    rc=$?
  cat "$out/parity.txt"
  echo "parity exit $rc"
  local q="What is the capital of France? Answer in English."
  for be in cpu cuda; do
    "$t9" run -m "$model" -p "$q" -n 32 --temp 0 --backend "$be" >"$out/run_$be.txt" \
      2>"$out/run_$be.err" || echo "run --backend $be failed: $(tail -2 "$out/run_$be.err")"
  done
  if cmp -s "$out/run_cpu.txt" "$out/run_cuda.txt"; then
    echo "run: cpu == cuda: $(head -c 200 "$out/run_cuda.txt")"
  else
    echo "run: cpu != cuda"
    head -c 300 "$out/run_cpu.txt" "$out/run_cuda.txt"
  fi
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  receive) receive ;;
  join) join "${2:?DIR}" ;;
  parity) parity ;;
  *) echo "usage: $0 stage [MODEL] | receive | parity | join DIR" >&2; exit 2 ;;
esac
