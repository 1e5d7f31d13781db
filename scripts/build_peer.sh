#!/usr/bin/env bash
# Builds the "peer": llama.cpp, the reference implementation we compare against.
#
#   scripts/build_peer.sh              llama-cpp-python (CPU only) into .venv-peer, built from the
#                                      PyPI sdist (source, so it is built for this machine's CPU).
#   scripts/build_peer.sh --binaries   additionally llama-server + llama-bench from the llama.cpp
#                                      vendored in that same sdist, into .peer/bin (for benchmarks).
#
# Idempotent: each part is skipped when its result is already there. Builds run with one job by
# default because the development machines share few cores; override with JOBS=N.
# Environment: PEER_VERSION pins llama-cpp-python (default: newest), JOBS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BINARIES=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --binaries) BINARIES=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "build_peer.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

JOBS=${JOBS:-1}
VENV=$ROOT/.venv-peer
SDIST_DIR=$ROOT/.peer/sdist
SPEC="llama-cpp-python${PEER_VERSION:+==$PEER_VERSION}"
export MAX_JOBS=$JOBS CMAKE_BUILD_PARALLEL_LEVEL=$JOBS

# The sdist is needed by both parts: download it once and keep it.
fetch_sdist() {
  mkdir -p "$SDIST_DIR"
  if ! ls "$SDIST_DIR"/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
    echo "build_peer: downloading $SPEC sdist"
    python3 -m pip download -q --no-deps --no-binary :all: -d "$SDIST_DIR" "$SPEC"
  fi
  SDIST=$(ls -t "$SDIST_DIR"/llama_cpp_python-*.tar.gz | head -1)
}

build_python() {
  if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
    echo "build_peer: llama_cpp already importable in $VENV"
    return
  fi
  fetch_sdist
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  echo "build_peer: building $(basename "$SDIST") (CPU only, $JOBS job(s)); this takes a while"
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF" \
    "$VENV/bin/python" -m pip install -v "$SDIST"
  "$VENV/bin/python" -c "import llama_cpp; print('build_peer: llama_cpp', llama_cpp.__version__)"
}

build_binaries() {
  local bin=$ROOT/.peer/bin
  if [[ -x $bin/llama-server && -x $bin/llama-bench ]]; then
    echo "build_peer: $bin/llama-server and llama-bench already built"
    return
  fi
  fetch_sdist
  local src=$ROOT/.peer/src
  rm -rf "$src" && mkdir -p "$src"
  tar -xzf "$SDIST" -C "$src" --strip-components=1
  # CUDA only where a GPU can run it (nvcc alone is not enough: this dev box has nvcc, no GPU);
  # PEER_CUDA=ON|OFF overrides, e.g. to build the CUDA peer here for the device.
  local cuda=${PEER_CUDA:-OFF}
  if [[ -z ${PEER_CUDA:-} ]] && command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi -L >/dev/null 2>&1; then
    cuda=ON
  fi
  cmake -S "$src/vendor/llama.cpp" -B "$ROOT/.peer/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_CUDA=$cuda -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF
  cmake --build "$ROOT/.peer/build" -j"$JOBS" --target llama-server llama-bench
  mkdir -p "$bin"
  cp "$ROOT/.peer/build/bin/llama-server" "$ROOT/.peer/build/bin/llama-bench" "$bin/"
  echo "build_peer: binaries in $bin (CUDA=$cuda)"
}

build_python
[[ $BINARIES -eq 1 ]] && build_binaries
echo "build_peer: done"
