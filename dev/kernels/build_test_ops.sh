#!/bin/sh
# Builds test_ops (and the matmul bench) against only core/quant/backend, for working while other
# layers are mid-edit: the CMake target links tempo9_all. Usage: dev/kernels/build_test_ops.sh BUILD_DIR
set -e
B=${1:-build-backend}
ninja -C "$B" tempo9_core tempo9_quant tempo9_backend
FLAGS="-std=c++20 -O2 -Wall -Wextra -Isrc -Itests -DTEMPO9_SOURCE_DIR=\"$PWD\" -DTEMPO9_SHARED_DIR=\"$PWD/../shared\" -DTEMPO9_BINARY_DIR=\"$B\""
LIBS="$B/libtempo9_backend.a $B/libtempo9_quant.a $B/libtempo9_core.a -lfmt -lpthread"
mkdir -p "$B/manual"
for f in tests/ops/*.cpp; do
  o="$B/manual/$(basename "$f" .cpp).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ tests/ops/ops_test_util.h -nt "$o" ]; then
    g++ $FLAGS -c "$f" -o "$o"
  fi
done
g++ -o "$B/manual/test_ops" "$B"/manual/*_test.o $LIBS -lgtest -lgtest_main
if [ -f dev/kernels/matmul_bench.cpp ]; then
  g++ $FLAGS -O3 dev/kernels/matmul_bench.cpp -o "$B/manual/matmul_bench" $LIBS
fi
if [ -f dev/kernels/attn_bench.cpp ]; then
  g++ $FLAGS -O3 dev/kernels/attn_bench.cpp -o "$B/manual/attn_bench" $LIBS
fi
