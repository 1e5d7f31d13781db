// The split tensor-core attention's combine: one block per (query row, head) folds the row's
// 128-key chunk partials in chunk order (cuda_flash_fold.cuh: the fold the attention kernel's
// blocks run too), then writes out = A / L, gated and rounded as FlashArgs asks.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_flash_fold.cuh"

namespace t9::cuda {
namespace {

constexpr int kCombineThreads = 128;
constexpr int kMaxCombineDims = 256 / kCombineThreads;  // head dims per combine thread

// One block per (row, head): folds the row's chunks in order with fold_chunk, then out = A / L,
// in batches of kCombineBatch chunks (one per thread). fold_chunk's running M before chunk c is
// the max of the earlier chunks' m (fmaxf is exact, commutative and associative, and a skipped
// chunk's -inf changes no max), so the block finds every chunk's M with a prefix max and each
// thread computes its chunk's factors fa, fb itself; only L's chain (two products and a sum per
// chunk) stays serial, on thread 0. Every thread then folds its dims, the partials' loads issued
// kCombineLoads chunks at a time ahead of their use (read unconditionally: a skipped chunk's
// partial is in the call's scratch either way and is not used). The same operations in the same
// order as fold_chunk / fold_acc: the same bits. (Before, thread 0 ran the whole chain and the
// loads waited on the skip test: 35 us for 8 rows over 10k keys, ncu run 103.)
constexpr int kCombineBatch = kCombineThreads;
constexpr int kCombineLoads = 8;
__global__ void __launch_bounds__(kCombineThreads)
    flash_combine_kernel(const float* __restrict__ part, FlashArgs a, int64_t n_rows,
                         int n_chunks) {
  // The row's sequence and chunk range come first, before the dependent-launch wait: the
  // sequence table was uploaded before the step's first kernel (as the attention kernel reads
  // it early), so after the wait the partials' loads go out at once instead of after its round
  // trip.
  constexpr int kWarps = kCombineThreads / 32;
  __shared__ float s_fa[kCombineBatch], s_fb[kCombineBatch], s_m[kCombineBatch], s_l[kCombineBatch];
  __shared__ float s_wmax[kWarps];
  __shared__ float s_L;
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  const int hd = a.head_dim;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  int si = -1;
  for (int i = 0; i < a.n_seqs && si < 0; ++i) {
    const AttnSeq s = a.seqs[i];
    if (s.q_begin >= 0 && s.n_q >= 0 && s.q_begin + static_cast<int64_t>(s.n_q) <= n_rows &&
        r >= s.q_begin && r < s.q_begin + s.n_q)
      si = i;
  }
  if (si < 0) return;  // a row no sequence owns is left as it is (the kernel flagged bad tables)
  const AttnSeq s = a.seqs[si];
  pdl_enter();
  // The gate's values of this thread's dims, loaded now: their round trip overlaps the fold.
  float g[kMaxCombineDims];
#pragma unroll
  for (int e = 0; e < kMaxCombineDims; ++e) {
    const int d = tid + e * kCombineThreads;
    g[e] = a.gate.base != nullptr && d < hd ? reinterpret_cast<const float*>(a.gate.row(h, r))[d]
                                            : 0.0f;
  }
  const int pos = s.n_past + static_cast<int>(r - s.q_begin);
  const int lo = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  const int c0 = lo / kChunkKeys, c1 = min(pos / kChunkKeys, n_chunks - 1);
  const float* pr = part + (r * a.n_head + h) * n_chunks * part_stride(hd);
  float M = -INFINITY, L = 0.0f;  // M: every thread's copy; L: thread 0's chain
  float A[kMaxCombineDims];
#pragma unroll
  for (int e = 0; e < kMaxCombineDims; ++e) A[e] = 0.0f;
  for (int b0 = c0; b0 <= c1; b0 += kCombineBatch) {
    const int nb = min(kCombineBatch, c1 + 1 - b0);
    // This thread's chunk: its (m, l), the prefix max before it, its factors.
    float mc = -INFINITY, lc = 0.0f;
    if (tid < nb) {
      mc = pr[(b0 + tid) * part_stride(hd) + hd];
      lc = pr[(b0 + tid) * part_stride(hd) + hd + 1];
    }
    float incl = mc;  // max over chunks b0 .. b0 + tid
#pragma unroll
    for (int k = 1; k < 32; k *= 2) {
      const float o = __shfl_up_sync(0xffffffffu, incl, k);
      if (lane >= k) incl = fmaxf(incl, o);
    }
    if (lane == 31) s_wmax[warp] = incl;
    __syncthreads();
    float before = M;  // max over the chunks before this thread's
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      if (w < warp) before = fmaxf(before, s_wmax[w]);
    const float up = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane > 0) before = fmaxf(before, up);
    if (tid < nb) {
      s_m[tid] = mc;
      s_l[tid] = lc;
      if (mc != -INFINITY) {  // fold_chunk's factors, from its running M = before
        const float mn = fmaxf(before, mc);
        s_fa[tid] = before == -INFINITY ? 0.0f : expf(__fsub_rn(before, mn));
        s_fb[tid] = expf(__fsub_rn(mc, mn));
      }
    }
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_wmax[w]);
    __syncthreads();
    if (tid == 0) {  // fold_chunk's L update, in chunk order
#pragma unroll 8
      for (int c = 0; c < nb; ++c)
        if (s_m[c] != -INFINITY) L = __fadd_rn(__fmul_rn(L, s_fa[c]), __fmul_rn(s_l[c], s_fb[c]));
      s_L = L;
    }
    for (int c = 0; c < nb; c += kCombineLoads) {
      float p[kCombineLoads][kMaxCombineDims];
#pragma unroll
      for (int k = 0; k < kCombineLoads; ++k)
#pragma unroll
        for (int e = 0; e < kMaxCombineDims; ++e) {
          const int d = tid + e * kCombineThreads;
          p[k][e] = c + k < nb && d < hd ? pr[(b0 + c + k) * part_stride(hd) + part_pos(d)] : 0.0f;
        }
#pragma unroll
      for (int k = 0; k < kCombineLoads; ++k) {
        if (c + k >= nb || s_m[c + k] == -INFINITY) continue;
        const float fa = s_fa[c + k], fb = s_fb[c + k];
#pragma unroll
        for (int e = 0; e < kMaxCombineDims; ++e) A[e] = fold_acc(A[e], p[k][e], fa, fb);
      }
    }
    __syncthreads();  // the batch's factors are read before the next batch overwrites them
  }
  float* o = reinterpret_cast<float*>(a.out.row(h, r));
#pragma unroll
  for (int e = 0; e < kMaxCombineDims; ++e) {
    const int d = tid + e * kCombineThreads;
    if (d >= hd) continue;  // uniform per warp: hd is a multiple of 32
    const float q = __fdiv_rn(A[e], s_L);
    const float v = a.gate.base != nullptr ? gated(q, g[e]) : q;
    o[d] = v;
    if (a.out_q != nullptr) {  // the warp's 32 dims are one block of out's codes
      const int64_t b0 = (r * a.n_head + h) * hd + (d - lane);
      quantize_value(v, lane, a.out_q + b0, a.out_b + b0 / 32);
    }
  }
}

}  // namespace

void flash_combine(const float* part, const FlashArgs& a, int64_t n_rows, int n_chunks,
                   Stream& stream) {
  stream.launch(flash_combine_kernel, dim3(static_cast<unsigned>(n_rows), a.n_head),
                kCombineThreads, 0, part, a, n_rows, n_chunks);
}

}  // namespace t9::cuda
