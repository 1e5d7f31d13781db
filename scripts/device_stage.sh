#!/usr/bin/env bash
# Stages what a device plan (bench/device_plans/*.sh, bench/h200_bench.sh) needs under .devrun/
# (git-ignored): tempo9 and test_cuda_ops from TEMPO9_CUDA_BUILD (default build-cuda2), the
# micro-benchmarks named as arguments (built against that build's libraries, as
# scripts/device_test_ops.sh does), their non-system shared libraries, every architecture's
# reference fixture and the real Qwen3 tokenizer (xz). Binaries are stripped and xz-compressed
# (each carries ~20 MB of sm_90/sm_90a code), to fit a device call's 64 MiB carry with the tree.
#
#   [FIXTURES="llama qwen3"] bash scripts/device_stage.sh [cuda_gemv_bench ...]
#
# TEMPO9_CUDA_BUILD: a build folder with sm_90a code only and no -lineinfo (the same kernels;
# ncu's source view is what goes) stages much smaller binaries, room for a second tempo9 or the
# fixtures beside the peer:
#   cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DTEMPO9_CUDA=ON \
#     -DTEMPO9_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a -DTEMPO9_CUDA_LINEINFO=OFF
#   TEMPO9_CUDA_BUILD=$PWD/build-dev bash scripts/device_stage.sh
# FIXTURES: the reference fixtures to stage, for the whole-model op tests (default: all eight,
# ~9.6 MB; "" for none, to make room for a bench or the peer). The script prints the carry
# (.devrun plus the tracked tree) and fails above the limit (at xz -6 the binaries grew to ~45 MB
# with the sliced Q3_K/Q5_K kernels, and sessions 50-51 dropped the fixtures by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=${TEMPO9_CUDA_BUILD:-$ROOT/build-cuda2}
ST=$ROOT/.devrun
ninja -C "$B" -j2 tempo9 test_cuda_ops
rm -rf "${ST:?}/bin" "${ST:?}/lib" "${ST:?}/lib.tar.xz" "${ST:?}/shared"
mkdir -p "$ST/bin" "$ST/lib" "$ST/shared/fixtures/reference" "$ST/shared/fixtures/tokenizers/qwen3"
cp "$B/tests/test_cuda_ops" "$B/tempo9" "$ST/bin/"
for b in "$@"; do
  g++ -O2 -std=c++20 -Wall -Wextra -DFMT_SHARED -I"$ROOT/src" "$ROOT/bench/$b.cpp" -o "$ST/bin/$b" \
    "$B/libtempo9_cuda.a" "$B/libtempo9_backend.a" "$B/libtempo9_quant.a" "$B/libtempo9_core.a" \
    -lfmt "$(dirname "$(command -v nvcc)")/../lib64/libcudart_static.a" -ldl -lrt -lpthread
done
for bin in "$ST"/bin/*; do
  ldd "$bin" | awk '/=> \//{print $3}' |
    grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$ST/lib/"
done
for arch in ${FIXTURES-llama qwen2 qwen3 gemma3 qwen3moe qwen3next qwen35 qwen35moe}; do
  cp -r "$ROOT/../shared/fixtures/reference/$arch" "$ST/shared/fixtures/reference/"
done
xz -T2 -6 -c "$ROOT/../shared/fixtures/tokenizers/qwen3/tokenizer.json" \
  >"$ST/shared/fixtures/tokenizers/qwen3/tokenizer.json.xz"
chmod -R u+w "$ST"
# -9e: 22% smaller than -6 on these binaries (tempo9 18.7 against 24.0 MB), ~30 s more each.
for bin in "$ST"/bin/*; do strip "$bin" && xz -T2 -9e "$bin"; done
# The libraries as one lib.tar.xz (7.5 MB -> 2.5 MB: room for every fixture beside the peer's
# 6.4 MB source); the plans unpack it there with scripts/devrun_unpack.py.
tar -C "$ST" -cf - lib | xz -T2 -9e >"$ST/lib.tar.xz" && rm -r "${ST:?}/lib"
grep -qx '/.devrun/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.devrun/' >>"$ROOT/.git/info/exclude"
staged=$(du -sb "$ST" | cut -f1)
tree=$(git -C "$ROOT" ls-files -z | (cd "$ROOT" && du -cb --files0-from=-) | tail -1 | cut -f1)
limit=$((64 << 20))
echo "staged $((staged >> 20)) MiB + tree $((tree >> 20)) MiB = $(((staged + tree) >> 20)) MiB of the call's 64 MiB carry"
if [ $((staged + tree)) -gt $limit ]; then
  echo "over the carry: stage fewer fixtures (FIXTURES=\"llama qwen3\", or \"\" for none)" >&2
  exit 1
fi
