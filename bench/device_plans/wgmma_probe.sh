#!/usr/bin/env bash
# The wgmma question (docs/CUDA.md next steps, "prefill against cuBLAS") in seconds: whether
# wgmma.m64nNk16 keeps mma.sync.m16n8k16's bits over a slice's chain and each instruction's peak
# rate (dev/kernels/cuda_wgmma_bits.cu), then the first wgmma prompt GEMM beside cuBLAS in both
# descriptor forms (dev/kernels/cuda_bf16_wgmma_gemm.cu). Output in $OUT/wgmma.txt.
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
  timeout 60 .devrun/wg/bin/cuda_wgmma_bits 1
  echo "bits rc $?"
  for form in 0 1; do
    timeout 60 .devrun/wg/bin/cuda_bf16_wgmma_gemm $form
    echo "gemm form $form rc $?"
  done
} 2>&1 | tee "$OUT/wgmma.txt"
