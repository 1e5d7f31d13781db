// Device pieces of the Gated DeltaNet kernels shared by cuda_gdn.cu (ssm_conv, gated_delta_net)
// and cuda_gdn_chain.cu (the three ops of a decode step as one launch): the sequence check, the
// gate arithmetic, and the fast kernels' per-token delta rule with its fixed summation orders,
// so that every kernel computes the same bits.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace t9::cuda {

// torch.nn.functional.softplus (beta 1, threshold 20), as the CPU.
__device__ __forceinline__ float softplus(float v) {
  return v > 20.0f ? v : log1pf(expf(v));
}

// Sequence metadata in range for a batch of n_tok rows and n_slots state slots.
__device__ __forceinline__ bool seq_ok(const RecurrentSeq& s, int64_t n_tok, int64_t n_slots) {
  return s.slot >= 0 && s.slot < n_slots && s.q_begin >= 0 && s.n_q >= 0 &&
         static_cast<int64_t>(s.q_begin) + s.n_q <= n_tok;
}

// Recurrent state may be read before the dependent-launch wait. A slot's state is written only
// by this layer's kernel of an earlier step, or of this step's head when a call is split at a
// snapshot (then the snapshot's copy and the tail's conv run between), and by restores and
// snapshots copied before the forward; when a kernel's pre-wait part runs, every kernel before
// its predecessor has completed (pdl_enter: each triggers after its own wait). The step's
// sequences are uploaded before its first kernel; weights never change.
bool state_early();

constexpr int kGdnWarps = 4;             // warps of gdn_regs_kernel, 8 state columns each
constexpr int kGdnCols = 8 * kGdnWarps;  // state columns per gdn_regs_kernel block
constexpr int kGdnChunk = 32;            // tokens gdn_rounds_kernel prepares per round

struct GdnDims {
  int nk, nv, dk, dv;
  bool tiled;
  bool early_state;  // gdn_regs_kernel: the state (and A, dt) loaded before the wait (state_early)
  float eps, q_scale;
};

// Element h of the value heads of token tok in a [n_tokens, r, n_v / r] tensor (cpu_gdn.cpp).
__device__ __forceinline__ float head_value(const TensorDesc& t, int64_t tok, int64_t h) {
  return reinterpret_cast<const float*>(t.row(tok * t.ne1 + h / t.ne0))[h % t.ne0];
}

// A normalised q / k row of d_k = 4 kRows in shared memory, as the threads of a column read it:
// quarter qq (rows kRows qq .. kRows qq + kRows - 1, one thread's) at float kGdnQuarter qq, 4
// floats of padding after each quarter, so that the four quarters' 16-byte loads of one token
// fall in distinct banks (at any kRows in 4 .. 32) and a thread reads its rows as float4.
template <int kRows>
constexpr int kGdnQuarter = kRows + 4;
template <int kRows>
constexpr int kGdnRowFloats = 4 * kGdnQuarter<kRows>;  // floats per padded row
template <int kRows>
__device__ __forceinline__ int gdn_at(int i) {  // where element i of the row sits
  return i + 4 * (i / kRows);
}

// This thread's kRows values of a padded row (kScale: times s, rounded once, the same float as a
// row stored already scaled).
template <int kRows, bool kScale>
__device__ __forceinline__ void gdn_quarter(const float* row, int qq, float s, float (&x)[kRows]) {
  const float4* r4 = reinterpret_cast<const float4*>(row + qq * kGdnQuarter<kRows>);
#pragma unroll
  for (int m4 = 0; m4 < kRows / 4; ++m4) {
    const float4 v = r4[m4];
    x[4 * m4] = kScale ? v.x * s : v.x;
    x[4 * m4 + 1] = kScale ? v.y * s : v.y;
    x[4 * m4 + 2] = kScale ? v.z * s : v.z;
    x[4 * m4 + 3] = kScale ? v.w * s : v.w;
  }
}

// sum_m a[m] b[m] over a thread's kRows terms as four partial sums (partial r: the terms m = r,
// r + 4, ... in order, from 0), joined (p0 + p1) + (p2 + p3), then added over the column's four
// threads by an xor tree: chains of kRows / 4 dependent FMAs instead of kRows.
template <int kRows>
__device__ __forceinline__ float gdn_column_dot(const float (&a)[kRows], const float (&b)[kRows]) {
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int m = 0; m < kRows; ++m) part[m % 4] = fmaf(a[m], b[m], part[m % 4]);
  float d = (part[0] + part[1]) + (part[2] + part[3]);
  d += __shfl_xor_sync(0xffffffffu, d, 1);
  d += __shfl_xor_sync(0xffffffffu, d, 2);
  return d;
}

// One token of the delta rule on a thread's kRows state rows i = kRows qq + m of column j (four
// threads per column, quarter qq): S *= decay; mem = S^T k; delta = (v_j - mem) beta; S += k
// delta; returns out_j = S^T q, both sums in gdn_column_dot's order. k and q are the normalised
// key and query rows (padded, gdn_at), stored as k * inv_k and q * inv_q (gdn_rounds_kernel) or
// multiplied here (kScale, gdn_regs_kernel): the same floats, so both kernels share this
// arithmetic and give the same bits.
template <int kRows, bool kScale>
__device__ __forceinline__ float gdn_token(float (&S)[kRows], const float* k_row,
                                           const float* q_row, float inv_k, float inv_q, int qq,
                                           float decay, float beta, float vj) {
  float kv[kRows];
  gdn_quarter<kRows, kScale>(k_row, qq, inv_k, kv);
#pragma unroll
  for (int m = 0; m < kRows; ++m) S[m] *= decay;
  const float mem = gdn_column_dot<kRows>(S, kv);
  const float delta = (vj - mem) * beta;
#pragma unroll
  for (int m = 0; m < kRows; ++m) S[m] = fmaf(kv[m], delta, S[m]);
  float qv[kRows];
  gdn_quarter<kRows, kScale>(q_row, qq, inv_q, qv);
  return gdn_column_dot<kRows>(S, qv);
}

}  // namespace t9::cuda
