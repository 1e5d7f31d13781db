// The bf16 tensor-core matmul of fragment-ordered Q4_K weights (cuda_bf16_q4k.cu; layout:
// quant/q4k_frag.h; prototype and measurements: dev/kernels/cuda_bf16_q4k.cu, docs/CUDA.md
// stage 42). CudaBackend::upload_matmul_weights repacks a Q4_K matrix it accepts (Buffer::layout
// kQ4KFrag) when CudaBackendConfig::bf16_q4k is on; every matmul of that matrix then runs here,
// whatever its row count, so its rows stay batch-invariant bit for bit:
//   x rounded to bf16 (round to nearest even; one launch), each weight dequantized to bf16
//   (q4k_bf16_weight's rule), and per output y = sum over 1024-input slices (ascending) of the
//   slice's chain of m16n8k16 mma in fp32 (64 k16 steps in the layout's slot order), + bias.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace t9::cuda {

class Stream;
struct Scratch;

// Shapes the kernels take: q4k_frag_shape_ok, and n_in a multiple of 1024 (whole slices) up to
// 16384 (a GEMV block holds one warp a slice).
bool bf16_q4k_shape_ok(int64_t n_in, int64_t n_out);

// y = x @ w^T (+ bias) for w of layout kQ4KFrag (the caller checked the shapes: check_matmul).
// x: F32 rows; the bf16 copy goes to `scratch`. n_tok <= 8: the GEMV; else the GEMM.
void launch_bf16_q4k_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                            Scratch& scratch, Stream& stream);

}  // namespace t9::cuda
