// Internal to the CUDA backend: the row norms' shared pieces (rms_norm_kernel and
// rms_norm_codes_kernel in cuda_row_ops.cu, norm_gemv_f_kernel in cuda_gemv_float.cu), so that
// every kernel that norms a row computes it with the same operations in the same order.
#pragma once

#include <cstdint>

namespace t9::cuda {

// One block per row. The sum of squares is kept in double like the CPU reference. A thread's
// first kNormCache elements (and weights) are loaded up front into registers, all in flight at
// once: a plain strided loop waits one memory latency per element (a 4096 row: 16 round trips,
// ~9.6 us per call measured on the H200). Same operations in the same order as the plain loop.
constexpr int kNormCache = 16;
constexpr int kNormThreads = 256;  // the norm kernels' block (a row: 256 elements per c)

// A thread's first kNormCache elements of a row (x, or x + b when kAdd: the residual add fused
// with the next pre-norm, the same float add) and weights (w[i] + weight_bias; 1 where w is
// null), loaded up front (elements threadIdx.x + c * blockDim.x), and its part of the double sum
// of squares over them in c order. The tail past kNormCache * blockDim.x is the caller's. Shared
// by the norm kernels (cuda_row_ops.cu) and norm_gemv_f_kernel (cuda_gemv_float.cu), so that
// their rows are the same bits.
template <bool kAdd>
__device__ __forceinline__ double norm_head(const float* xr, const float* br, const float* w,
                                            float weight_bias, int64_t n, float (&xv)[kNormCache],
                                            float (&wv)[kNormCache]) {
  const int64_t step = blockDim.x;
  float bv[kNormCache];
#pragma unroll
  for (int c = 0; c < kNormCache; ++c) {
    const int64_t i = threadIdx.x + c * step;
    xv[c] = i < n ? xr[i] : 0.0f;
    if constexpr (kAdd) bv[c] = i < n ? br[i] : 0.0f;
    wv[c] = i < n && w != nullptr ? w[i] + weight_bias : 1.0f;
  }
  if constexpr (kAdd) {
#pragma unroll
    for (int c = 0; c < kNormCache; ++c) xv[c] = xv[c] + bv[c];
  }
  double ss = 0.0;
#pragma unroll
  for (int c = 0; c < kNormCache; ++c)
    if (threadIdx.x + c * step < n) ss += static_cast<double>(xv[c]) * xv[c];
  return ss;
}

// Norm weight i (plus the weight bias: Gemma's 1 + w); 1 without weights.
__device__ __forceinline__ float norm_weight_at(const float* w, float weight_bias, int64_t i) {
  return w != nullptr ? w[i] + weight_bias : 1.0f;
}

// 1 / rms from the block's sum of squares (as the CPU reference: double, then one rounding).
__device__ __forceinline__ float norm_inv(double ss, int64_t n, float eps) {
  return static_cast<float>(1.0 / sqrt(ss / static_cast<double>(n) + eps));
}

}  // namespace t9::cuda
