#!/usr/bin/env bash
# Fuzzes the GGUF reader: builds tests/fuzz (libFuzzer + ASan + UBSan, clang++) in its own build
# dir from only the sources it needs (src/core, src/quant/types.cpp, src/gguf), generates a seed
# corpus of small valid files written by our GgufWriter plus the mutation corpus of
# tests/unit/gguf/gguf_mutations.h (every header truncation, bad counts/lengths/types/offsets,
# overlaps, random byte flips), replays every mutated file once under the sanitizers, then fuzzes
# for N seconds. Exits non-zero on any crash, sanitizer report or failed invariant.
#
# Usage: scripts/fuzz.sh [--seconds N] [--build-dir DIR]      (default: 60 s, build-fuzz/)
#
# Longer runs: the corpus the fuzzer grows lives in <build-dir>/corpus and is kept between runs,
# so repeated runs pick up where the last one stopped, e.g. overnight:
#   scripts/fuzz.sh --seconds 28800
# More cores: run the binary directly with libFuzzer's fork mode after one scripts/fuzz.sh run:
#   build-fuzz/gguf_fuzz -fork=8 -max_total_time=3600 -dict=tests/fuzz/gguf.dict \
#     -artifact_prefix=build-fuzz/artifacts/ build-fuzz/corpus build-fuzz/seeds
# A crash is saved as <build-dir>/artifacts/crash-<sha1>; replay it with
#   build-fuzz/gguf_fuzz build-fuzz/artifacts/crash-<sha1>
# and add the input to tests/unit/gguf/gguf_mutations.h once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
build=build-fuzz
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found" >&2; exit 1; }
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S tests/fuzz -B "$build" "${gen[@]}" -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j 2 --target gguf_fuzz gguf_corpus

rm -rf "$build/seeds" "$build/mutations"
mkdir -p "$build/corpus" "$build/artifacts"
"$build/gguf_corpus" "$build/seeds" "$build/mutations"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
common=(-artifact_prefix="$build/artifacts/" -rss_limit_mb=2048 -timeout=10)

echo "== fuzz.sh: replaying $(ls "$build/mutations" | wc -l) mutated files and the seeds once"
# -runs=0: execute every input of the given dirs once, no mutation.
"$build/gguf_fuzz" "${common[@]}" -runs=0 "$build/mutations" "$build/seeds" 2>&1 | tail -n 3

echo "== fuzz.sh: fuzzing for ${seconds}s"
"$build/gguf_fuzz" "${common[@]}" -max_total_time="$seconds" -dict=tests/fuzz/gguf.dict \
  -print_final_stats=1 "$build/corpus" "$build/seeds" "$build/mutations" 2>&1 | tail -n 15
echo "== fuzz.sh: no crashes"
