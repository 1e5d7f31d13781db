#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for Tempo9, idempotently:
#   1. apt packages (compiler, CMake, libraries), 2. a Python venv with the pinned test packages,
#   3. the real GGUF models (verified by sha256), 4. the Release build in build/.
# Usage: scripts/setup.sh [--models all|default|none] [--no-python] [--build-type Release|Debug]
set -euo pipefail
cd "$(dirname "$0")/.."

MODELS=default
PYTHON=1
BUILD_TYPE=Release
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) MODELS="$2"; shift 2 ;;
    --no-python) PYTHON=0; shift ;;
    --build-type) BUILD_TYPE="$2"; shift 2 ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv python3-pip
  nlohmann-json3-dev libfmt-dev libcli11-dev libpcre2-dev libxxhash-dev libcpp-httplib-dev
  libboost-dev libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing apt packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ $PYTHON -eq 1 ]]; then
  if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
  fi
  stamp=.venv/.requirements.sha256
  want=$(sha256sum requirements-test.txt | cut -d' ' -f1)
  if [[ ! -f $stamp || $(cat $stamp) != "$want" ]]; then
    echo "setup: installing Python packages (requirements-test.txt)"
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -r requirements-test.txt
    echo "$want" > $stamp
  fi
fi

case "$MODELS" in
  all) python3 scripts/fetch_models.py ;;
  default) python3 scripts/fetch_models.py qwen2.5-coder-1.5b-instruct-q4_k_m ;;
  none) ;;
  *) python3 scripts/fetch_models.py $MODELS ;;
esac

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: done (binary: build/tempo9)"
