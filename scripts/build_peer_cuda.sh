#!/usr/bin/env bash
# Builds the CUDA peer (llama.cpp's llama-bench + llama-server for Hopper, sm_90a) HERE, on the
# CPU-only dev machine (nvcc is here, no GPU needed), and stages it for the device machine.
#
#   scripts/build_peer_cuda.sh           configure + build into .peer-cuda/build (idempotent)
#   scripts/build_peer_cuda.sh stage     strip + xz the two binaries into .devrun-peer/ with the
#                                        non-system shared libraries they need, except cuBLAS /
#                                        cuBLASLt (hundreds of MB): the device machine's CUDA 13
#                                        toolkit has them; the bench script points
#                                        LD_LIBRARY_PATH at its lib64 there. NOTE: llama-bench
#                                        alone is 41 MB after xz (the fatbin is already
#                                        compressed): both binaries do not fit a call's 64 MiB.
#   scripts/build_peer_cuda.sh pack      (when the 2-core build here is too slow) a trimmed
#                                        source tarball, .devrun-peer/llama-src.tar.xz (~6.5 MB:
#                                        no models/docs/tests/examples/other GPU backends)
#   bash scripts/build_peer_cuda.sh device-build
#                                        ON THE DEVICE (carry .devrun-peer): the same build with
#                                        all cores into /tmp/peer, binaries in /tmp/peer/bin
#                                        (~5-10 min on 16 cores: start it with setsid in the
#                                        background and keep the machine busy meanwhile).
#
# Source: the llama.cpp vendored in the llama-cpp-python sdist that scripts/build_peer.sh keeps
# (.peer/sdist), so CPU and CUDA peers are the same llama.cpp. Static ggml/llama (only the CUDA
# runtime libraries are shared). Runs under nice -n 19 with JOBS (default 2) jobs: the dev box
# has 2 cores shared by everyone.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PEER=$ROOT/.peer-cuda
JOBS=${JOBS:-2}
if [ -d .git/info ]; then
  grep -qx '/.peer-cuda/' .git/info/exclude 2>/dev/null || echo '/.peer-cuda/' >>.git/info/exclude
  grep -qx '/.devrun-peer/' .git/info/exclude 2>/dev/null || echo '/.devrun-peer/' >>.git/info/exclude
fi

build() {
  local sdist
  sdist=$(ls -t "$ROOT"/.peer/sdist/llama_cpp_python-*.tar.gz | head -1)
  if [ ! -f "$PEER/src/vendor/llama.cpp/CMakeLists.txt" ]; then
    mkdir -p "$PEER/src"
    tar -xzf "$sdist" -C "$PEER/src" --strip-components=1
  fi
  if [ ! -f "$PEER/build/build.ninja" ]; then
    # 90a: the H200 (wgmma etc.); FA for f16 K/V only (the default cache type) keeps the build
    # to the template instances we use; no CPU -march=native (the device CPU differs from ours).
    cmake -S "$PEER/src/vendor/llama.cpp" -B "$PEER/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
      -DGGML_CUDA_FA_ALL_QUANTS=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
  fi
  nice -n 19 ninja -C "$PEER/build" -j"$JOBS" llama-bench llama-server
}

stage() {
  local out=$ROOT/.devrun-peer
  rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
  # PEER_BINS: which binaries (default both; each is ~40 MB after xz, so a call that also
  # carries tempo9 takes one: PEER_BINS=llama-server for serve/agents).
  local b
  for b in ${PEER_BINS:-llama-bench llama-server}; do cp "$PEER/build/bin/$b" "$out/bin/"; done
  for bin in "$out"/bin/*; do
    ldd "$bin" | awk '/=> \//{print $3}' |
      grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libgomp|ld-linux[^/]*|libcuda|libcublas|libcublasLt)\.so' |
      xargs -r -I{} cp -L {} "$out/lib/"
    echo "$(basename "$bin") needs: $(ldd "$bin" | awk '/=>/{print $1}' | tr '\n' ' ')"
  done
  chmod -R u+w "$out"
  for bin in "$out"/bin/*; do strip "$bin" && xz -T2 -6 "$bin"; done
  du -sh "$out"
}

pack() {
  local out=$ROOT/.devrun-peer
  mkdir -p "$out"
  local x=()
  for d in models docs gguf-py media examples tests benches pocs ggml/src/ggml-hexagon \
    ggml/src/ggml-sycl ggml/src/ggml-vulkan ggml/src/ggml-opencl ggml/src/ggml-cann \
    ggml/src/ggml-musa ggml/src/ggml-metal ggml/src/ggml-webgpu ggml/src/ggml-zdnn \
    ggml/src/ggml-openvino; do x+=(--exclude="llama.cpp/$d"); done
  tar -cJf "$out/llama-src.tar.xz" "${x[@]}" -C "$PEER/src/vendor" llama.cpp
  du -sh "$out/llama-src.tar.xz"
}

device_build() {
  local w=/tmp/peer t0=$SECONDS
  rm -rf "$w" && mkdir -p "$w/bin"
  tar -xJf "$ROOT/.devrun-peer/llama-src.tar.xz" -C "$w"
  # A failed configure leaves no build.ninja: ninja below fails and "done" says so.
  cmake -S "$w/llama.cpp" -B "$w/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
    -DGGML_CUDA_FA_ALL_QUANTS=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >"$w/cmake.log" 2>&1 || true
  local rc=0
  nice -n 19 ninja -C "$w/build" -j"${DEVICE_JOBS:-$(nproc)}" llama-bench llama-server >"$w/ninja.log" 2>&1 || rc=$?
  cp "$w/build/bin/llama-bench" "$w/build/bin/llama-server" "$w/bin/" 2>/dev/null || rc=99
  echo "device-build rc $rc in $((SECONDS - t0)) s" | tee "$w/done"
}

case "${1:-build}" in
  build) build ;;
  stage) stage ;;
  pack) pack ;;
  device-build) device_build ;;
  *) echo "usage: $0 [build|stage|pack|device-build]" >&2; exit 2 ;;
esac
