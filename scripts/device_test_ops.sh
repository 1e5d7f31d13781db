#!/usr/bin/env bash
# CUDA op tests and GEMV timings on the device machine, built here (no GPU needed to build).
#
#   scripts/device_test_ops.sh build    # here: build test_ops + bench into build-cuda, stage the
#                                       # binaries, their non-system shared libraries and the
#                                       # model fixtures under .devrun/ (git-ignored via
#                                       # .git/info/exclude), print the device command
#   scripts/device_test_ops.sh device   # there (repo root, .devrun carried): run the CUDA tests,
#                                       # compute-sanitizer on a subset, the bench; logs in $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${TEMPO9_CUDA_BUILD:-$ROOT/build-cuda}
STAGE=$ROOT/.devrun

stage() {
  set -e
  if [ ! -f "$BUILD/build.ninja" ]; then
    # --as-needed keeps cuBLAS (linked by cmake/Tempo9Cuda.cmake, unused in stage 1) out of the
    # binaries' needs. CMake 3.25 has no C++20 flag for nvcc: give it.
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTEMPO9_CUDA=ON -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed \
      -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 \
      -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20
  fi
  ninja -C "$BUILD" -j2 test_cuda_ops
  rm -rf "$STAGE" && mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/shared/fixtures/reference"
  g++ -O2 -std=c++20 -Wall -Wextra -DFMT_SHARED -I"$ROOT/src" "$ROOT/bench/cuda_gemv_bench.cpp" \
    -o "$STAGE/bin/cuda_gemv_bench" "$BUILD/libtempo9_cuda.a" "$BUILD/libtempo9_backend.a" \
    "$BUILD/libtempo9_quant.a" "$BUILD/libtempo9_core.a" -lfmt \
    "$(dirname "$(command -v nvcc)")/../lib64/libcudart_static.a" -ldl -lrt -lpthread
  cp "$BUILD/tests/test_cuda_ops" "$STAGE/bin/"
  # Every shared library except the C/C++ runtime (the device image has newer ones).
  for bin in "$STAGE"/bin/*; do
    ldd "$bin" | awk '/=> \//{print $3}' |
      grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      xargs -r -I{} cp -L {} "$STAGE/lib/"
  done
  for arch in llama qwen2 gemma3; do
    cp -r "$ROOT/../shared/fixtures/reference/$arch" "$STAGE/shared/fixtures/reference/"
  done
  chmod -R u+w "$STAGE"
  grep -qx '/.devrun/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.devrun/' >>"$ROOT/.git/info/exclude"
  du -sh "$STAGE"
  echo "device command (run tool, carry [\".devrun\"]):"
  echo "  bash scripts/device_test_ops.sh device"
}

device() {
  export LD_LIBRARY_PATH=$STAGE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export TEMPO9_SHARED_DIR=$STAGE/shared
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$OUT/gpu.txt"
  "$STAGE/bin/test_cuda_ops" --gtest_filter='Cuda*:*/CudaModel.*' --gtest_color=no 2>&1 |
    tee "$OUT/test_ops.log"
  local rc=${PIPESTATUS[0]}
  # Memory checker on one quick pass of the kernels (Firecracker machines support it).
  timeout 240 compute-sanitizer --tool memcheck --print-limit 20 "$STAGE/bin/test_cuda_ops" \
    --gtest_filter='Cuda.GetRows*:Cuda.Elementwise*:Cuda.RmsNorm*:Cuda.ArgmaxTopK*:Cuda.Rope*:CudaAttention.SlidingWindow*:Cuda.MatmulBatch*' \
    --gtest_color=no >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc $? : $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tail -3 | tr '\n' ' ')"
  # Ceiling for the GEMV table: a large device-to-device copy through PyTorch when the image has
  # it (KINDS.md: ~4.3 TB/s read + write), else the bench's default.
  local ceiling
  ceiling=$(python3 - 2>/dev/null <<'PY'
import torch
a = torch.randint(0, 255, (4 << 30,), dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
ts = []
for _ in range(10):
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
print(round(2 * (4 << 30) / sorted(ts)[5] / 1e6))
PY
  )
  echo "copy ceiling (torch D2D, read + write): ${ceiling:-unmeasured} GB/s" | tee "$OUT/copy.log"
  "$STAGE/bin/cuda_gemv_bench" ${ceiling:+"$ceiling"} 2>&1 | tee "$OUT/bench.log"
  echo "test_ops rc $rc: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_ops.log" | tr '\n' ' ')"
  return "$rc"
}

case "${1:-}" in
  build) stage ;;
  device) device ;;
  *) echo "usage: $0 build|device" >&2; exit 2 ;;
esac
