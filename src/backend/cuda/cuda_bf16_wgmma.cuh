// Internal to the CUDA backend: the prompt GEMM on wgmma (cuda_bf16_wgmma.cu), taken by
// launch_bf16_matmul for the fragment-ordered BF16 (B16Direct) and K-quant (Q4_K, Q5_K, Q6_K,
// Q3_K) weights when CudaBackendConfig::bf16_wgmma_rows and bf16_wgmma_quant allow. The same
// bits as the served mma.sync GEMM and GEMV (each 1024-input slice one chain of 64 k16 steps from
// zero, the slices added in order; docs/CUDA.md stage 53: wgmma keeps mma.sync's bits), measured
// as dev/kernels/cuda_bf16_wgmma_gemm.cu at 480-576 TFLOP/s on an H100 (run 256).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_bf16_matmul.cuh"  // bf16_wgmma_launches
#include "backend/cuda/cuda_common.cuh"
#include "quant/types.h"

namespace t9::cuda {

class Stream;

constexpr int kWgmmaRows = 128;     // weight rows a block (n_out must be a multiple)
constexpr int kWgmmaTokRows = 128;  // activation rows a block

// Whether the wgmma GEMM has a kernel for this type's fragment layout (BF16, Q4_K, Q5_K, Q6_K,
// Q3_K).
bool bf16_wgmma_type(GgmlType type);
// Whether it takes such a matrix of n_out x n_in over n_tok rows: n_in whole slices up to
// B16Direct's 12288, n_out whole blocks, and n_tok at least min_rows (0: never).
bool bf16_wgmma_fits(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_tok, int min_rows);

// Bytes of the activations' copy for launch_bf16_wgmma (n_tok rows of n_in bf16, each 64-input
// group in the fragment layout's input order: frag_input).
size_t bf16_wgmma_x_bytes(int64_t n_in, int64_t n_tok);

// x (F32 rows) rounded to bf16 (nearest even) into xb (bf16_wgmma_x_bytes), its inputs permuted
// within each 64-input group as the B16Direct fragments hold the weights, so that the tensor map's
// natural order puts each product where the mma.sync GEMV puts it.
void launch_bf16_wgmma_x(const TensorDesc& x, int64_t n_in, int64_t n_tok, void* xb,
                         Stream& stream);

// One matrix: y[t][o] = chain sums of w (n_out x n_in, fragment-ordered: B16Direct or a K-quant's
// blocks) times xb's rows, + bias[o] when bias is set. xb: launch_bf16_wgmma_x's copy (16-byte
// aligned).
struct WgmmaGemm {
  GgmlType type = GgmlType::BF16;
  const uint8_t* w = nullptr;
  const float* bias = nullptr;
  TensorDesc y = {};
  const void* xb = nullptr;
  int64_t n_in = 0, n_out = 0, n_tok = 0;
};
void launch_bf16_wgmma(const WgmmaGemm& g, Stream& stream);

}  // namespace t9::cuda
