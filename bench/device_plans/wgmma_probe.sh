#!/usr/bin/env bash
# The wgmma prompt GEMM beside cuBLAS in seconds (dev/kernels/cuda_bf16_wgmma_gemm.cu: its bits
# against the mma.sync chain, its rate; a hang ends at the timeout), and with BITS=1 first whether
# wgmma.m64nNk16 keeps mma.sync.m16n8k16's bits over a slice's chain and each instruction's peak
# rate (dev/kernels/cuda_wgmma_bits.cu; yes, run 254). Output in $OUT/wgmma.txt.
# Here: `nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o X dev/kernels/X.cu
# [-lcublas]` for both, `xz -9` each into .devrun/wg/bin/X.xz; there (carry [".devrun/wg"], and
# .devrun/lib.tar.xz for cuBLAS unless staged already): `bash bench/device_plans/wgmma_probe.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/wg}
mkdir -p "$OUT"
python3 scripts/devrun_unpack.py .devrun/wg .devrun
export LD_LIBRARY_PATH=$PWD/.devrun/lib
{
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  if [ "${BITS:-0}" = 1 ]; then  # answered in run 254: the same bits, descriptor form 0
    timeout 60 .devrun/wg/bin/cuda_wgmma_bits 1
    echo "bits rc $?"
  fi
  timeout 45 .devrun/wg/bin/cuda_bf16_wgmma_gemm
  echo "gemm rc $?"
} 2>&1 | tee "$OUT/wgmma.txt"
