// Internal to the CUDA backend: RoPE's constants and rotation, and one warp's QK-norm + RoPE of a
// head row, shared by qk_norm_rope_kernel (cuda_attention.cu) and the attention kernel's decode
// form that prepares q and k itself (cuda_flash_attention.cu): one definition, the same bits.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace t9::cuda {

constexpr int kQkRowMax = 256;  // head_dim at most (the norm's one-warp kernel's limit too)

// Host-computed RoPE constants: identical float values to the CPU backend's rope_cache.
struct RopeConsts {
  int n_rot;
  bool neox;
  float theta_scale, freq_scale, ext_factor, mscale, low, high;
};

RopeConsts rope_consts(const RopeParams& p);  // cuda_attention.cu

__device__ __forceinline__ float yarn_ramp(float low, float high, int i0) {
  const float y = __fdiv_rn(static_cast<float>(i0 / 2) - low, fmaxf(0.001f, high - low));
  return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

// Rotated pair k (0 <= k < n_rot / 2) of a row at `position`: its two element indices (a, b)
// and (cos, sin) scaled by mscale. Products are rounded one by one (no FMA contraction) as in
// the CPU reference; theta is built by repeated multiplication as there.
struct RopePair {
  int a, b;
  float c, s;
};
__device__ __forceinline__ RopePair rope_pair(const RopeConsts& rc, int k, int32_t position) {
  const int half = rc.n_rot / 2, i0 = 2 * k;
  float theta_extrap = static_cast<float>(position);
  for (int s = 0; s < k; ++s) theta_extrap = __fmul_rn(theta_extrap, rc.theta_scale);
  const float theta_interp = __fmul_rn(rc.freq_scale, theta_extrap);
  float theta = theta_interp;
  if (rc.ext_factor != 0.0f) {
    const float mix = __fmul_rn(yarn_ramp(rc.low, rc.high, i0), rc.ext_factor);
    theta = __fadd_rn(__fmul_rn(theta_interp, 1.0f - mix), __fmul_rn(theta_extrap, mix));
  }
  return {rc.neox ? k : i0, rc.neox ? k + half : i0 + 1, __fmul_rn(cosf(theta), rc.mscale),
          __fmul_rn(sinf(theta), rc.mscale)};
}
__device__ __forceinline__ void rope_rotate(const RopePair& p, float x0, float x1, float* y) {
  y[p.a] = __fsub_rn(__fmul_rn(x0, p.c), __fmul_rn(x1, p.s));
  y[p.b] = __fadd_rn(__fmul_rn(x0, p.s), __fmul_rn(x1, p.c));
}

// One warp: row = RoPE(RMSNorm(src) * w) at `position` for a head row of n <= kQkRowMax elements
// (norm false: RoPE(src)), into `row` (shared memory, n floats; may not alias src). The norm is
// rms_norm_warp_kernel's (warp_row_inv_rms over kQkRowMax / 32 values a lane), the rotation
// rope_kernel's, each element's pair rotated by one lane. With cs, pair k's (cos, sin) are
// cs[k] = rope_pair(rc, k, position)'s (computed ahead: the same bits). Ends with the warp's
// barrier: the row is complete for every lane.
__device__ __forceinline__ void norm_rope_row(const float* src, int64_t n, const float* w,
                                              bool norm, float eps, float weight_bias,
                                              const RopeConsts& rc, int32_t position, float* row,
                                              int lane, const float2* cs = nullptr) {
  constexpr int kPer = kQkRowMax / 32;
  float xv[kPer];
  const float inv = warp_row_inv_rms(src, n, lane, eps, xv);  // (unused without the norm)
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const int64_t i = lane + 32 * c;
    if (i < n) row[i] = norm ? rms_scaled(xv[c], inv, w, i, weight_bias) : xv[c];
  }
  __syncwarp();  // the row is in shared memory
  for (int kk = lane; kk < rc.n_rot / 2; kk += 32) {
    const RopePair p = cs != nullptr
                           ? RopePair{rc.neox ? kk : 2 * kk,
                                      rc.neox ? kk + rc.n_rot / 2 : 2 * kk + 1, cs[kk].x, cs[kk].y}
                           : rope_pair(rc, kk, position);
    rope_rotate(p, row[p.a], row[p.b], row);
  }
  __syncwarp();  // the rotated row is in shared memory
}

}  // namespace t9::cuda
