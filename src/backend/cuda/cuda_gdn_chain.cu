// Backend::gdn_chain on CUDA: a Gated DeltaNet layer's conv and delta rule as one launch for
// decode-shaped calls, where the two kernels (ssm_conv_kernel, gdn_regs_kernel) each cost a
// launch's latency in the step's chain (run 255: 1.97 + 3.39 us a layer on the 35B, 30 layers).
// The same bits as the two: every value is computed by the same expressions in the same order.
//
// Blocks: gdn_regs_kernel's (value head h, 32 state columns cb, sequence), 128 threads, four per
// column, and like it the old states, A, dt and the conv weights are read before the
// dependent-launch wait (state_early()):
//   1. every block convolves its key head's q and k channels (the r x n_cb blocks of a key head
//      the same floats) and its own 32 v channels, one token at a time, from the sequence's old
//      conv state: ssm_conv_kernel's sums, kept in shared memory for the token's delta rule;
//   2. gdn_regs_kernel's norms and delta rule on its columns, writing core;
//   3. the new conv state: each block its own v channels'; the q / k channels' by the last of the
//      key head's blocks to have read the old state, since those channels are every such
//      block's input. A counter per (sequence, key head), left at zero by that block, counts
//      them by a relaxed atomic issued once the block's first token's sums are stored: every
//      old-state value it read has been used by then, so no store that follows the count can
//      reach one of its reads.
// Runs 266 and 270 (H100) found the chain slower than the separate launches, with the gated norm
// inside it too (a cluster of a key head's blocks, or the head row's last block by a fenced
// counter: 12-13 us a layer) and with the count fenced before the wait (7 us), while its code was
// 158 KB. At 33 KB and with the relaxed count it is 0.9% faster on the 35B's single decode (run
// 274) and slower at 8 sequences (CudaBackendConfig::gdn_chain_max_seqs; docs/CUDA.md stages
// 56-59).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"  // DerivedCache::wrote
#include "backend/cuda/cuda_gdn.cuh"
#include "backend/cuda/cuda_profile.cuh"

namespace t9 {
namespace cuda {
namespace {

constexpr int kConvK = 4;  // conv widths fused (Qwen3-Next / Qwen3.5); others: the three ops

struct ChainArgs {
  TensorDesc mixed, conv_w, conv_state;  // [T, C], [C, K], [slots, K - 1, C]
  TensorDesc a, b, core;                 // a, b as gdn_regs_kernel; core [T, nv, dv]
  const float* A;
  const float* dt;
  float* delta_state;  // [slots, nv, dk, dv]
  int64_t n_slots;     // of both states
  const RecurrentSeq* seqs;
  GdnDims p;
  unsigned* counters;  // [n_seqs, nk]: the conv state's readers, back at zero after the launch
  int64_t n_tok;
  unsigned* err;
};

template <int kRows>
__global__ void __launch_bounds__(kGdnWarps * 32) gdn_chain_kernel(ChainArgs g) {
  constexpr int kDk = 4 * kRows;
  constexpr int kPerLane = (kDk + 31) / 32;      // q/k values a lane loads for the norms
  constexpr int kChan = 2 * kDk + kGdnCols;      // channels a block convolves
  constexpr int kChanPer = (kChan + 127) / 128;  // ... a thread
  __shared__ __align__(16) float conv[kChan];    // this token's q, k, then the block's v channels
  __shared__ __align__(16) float qs[kGdnWarps][kGdnRowFloats<kRows>];
  __shared__ __align__(16) float ks[kGdnWarps][kGdnRowFloats<kRows>];
  __shared__ bool last_qk;
  const GdnDims& p = g.p;
  if (!p.early_state) pdl_enter();
  const int n_cb = p.dv / kGdnCols, r_v = p.nv / p.nk;
  const int h = blockIdx.x / n_cb, cb = blockIdx.x % n_cb;
  const int kh = p.tiled ? h % p.nk : h / r_v;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int qq = lane % 4, jl = 8 * warp + lane / 4, j = kGdnCols * cb + jl;
  const RecurrentSeq s = g.seqs[blockIdx.y];
  if (!seq_ok(s, g.n_tok, g.n_slots)) {  // uniform over the sequence's blocks: none counts
    if (tid == 0 && blockIdx.x == 0) atomicOr(g.err, kErrSeqRows);
    return;
  }
  // The thread's channels: entries e = tid + 128 u of [q (dk), k (dk), v (32 columns)]. Rows by
  // row(r, 0), with no division: conv_w and conv_state are contiguous and mixed is 2-D (fits), and
  // row(r)'s division path, inlined at each of these unrolled sites, made the kernel's code 158 KB
  // (gdn_regs_kernel's is 24 KB) for the instruction cache to fetch cold in every SM.
  int chan[kChanPer];
  float wc[kChanPer][kConvK], win[kChanPer][kConvK];
  const int64_t st0 = static_cast<int64_t>(s.slot) * (kConvK - 1);
#pragma unroll
  for (int u = 0; u < kChanPer; ++u) {
    const int e = tid + 128 * u;
    chan[u] = e < kDk       ? kh * kDk + e
              : e < 2 * kDk ? p.nk * kDk + kh * kDk + (e - kDk)
              : e < kChan   ? 2 * p.nk * kDk + h * p.dv + kGdnCols * cb + (e - 2 * kDk)
                            : -1;
#pragma unroll
    for (int i = 0; i < kConvK; ++i) {
      wc[u][i] = chan[u] >= 0 ? reinterpret_cast<const float*>(g.conv_w.row(chan[u], 0))[i] : 0.0f;
      win[u][i] = chan[u] >= 0 && i < kConvK - 1 && !s.reset
                      ? reinterpret_cast<const float*>(g.conv_state.row(st0 + i, 0))[chan[u]]
                      : 0.0f;
    }
  }
  // The delta state, as gdn_regs_kernel.
  float* Sg = g.delta_state + (static_cast<int64_t>(s.slot) * p.nv + h) * kDk * p.dv;
  float S[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) S[m] = s.reset ? 0.0f : Sg[(kRows * qq + m) * p.dv + j];
  const float Ah = g.A[h], dth = g.dt[h];
  unsigned* const qk_cnt = g.counters + static_cast<int64_t>(blockIdx.y) * p.nk + kh;
  const unsigned qk_n = static_cast<unsigned>(r_v * n_cb);
  unsigned qk_seen = 0;            // thread 0: the count before this block's
  if (p.early_state) pdl_enter();  // mixed, a and b belong to this step
  const int64_t a_off = (h / g.a.ne0) * g.a.nb1 + (h % g.a.ne0) * 4;
  const int64_t b_off = (h / g.b.ne0) * g.b.nb1 + (h % g.b.ne0) * 4;
  for (int t = 0; t < s.n_q; ++t) {
    const int64_t r = static_cast<int64_t>(s.q_begin) + t;
    // 1. ssm_conv_kernel's sum for each of the thread's channels (the window: K - 1 earlier
    // inputs, then this token's).
#pragma unroll
    for (int u = 0; u < kChanPer; ++u) {
      if (chan[u] < 0) continue;
      win[u][kConvK - 1] = reinterpret_cast<const float*>(g.mixed.row(r, 0))[chan[u]];
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kConvK; ++i) sum = fmaf(wc[u][i], win[u][i], sum);
      conv[tid + 128 * u] = silu(sum);
#pragma unroll
      for (int i = 0; i < kConvK - 1; ++i) win[u][i] = win[u][i + 1];
    }
    __syncthreads();  // the token's channels are in shared memory
    // Every old-state value has been used (the first token's sums are stored) before this count
    // is issued, so no later write can reach a read.
    if (t == 0 && tid == 0) qk_seen = atomicAdd(qk_cnt, 1u);
    // 2. gdn_regs_kernel's token: the norms' partial sums over the lane's values, its qs / ks.
    float ssq = 0.0f, ssk = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int i = lane + 32 * e;
      const float qn = i < kDk ? conv[i] : 0.0f, kn = i < kDk ? conv[kDk + i] : 0.0f;
      if (i < kDk) qs[warp][gdn_at<kRows>(i)] = qn, ks[warp][gdn_at<kRows>(i)] = kn;
      ssq = fmaf(qn, qn, ssq);
      ssk = fmaf(kn, kn, ssk);
    }
    ssq = warp_sum(ssq);
    ssk = warp_sum(ssk);
    __syncwarp();  // qs/ks of this warp written
    const float an = *reinterpret_cast<const float*>(g.a.base + r * g.a.nb2 + a_off);
    const float bn = *reinterpret_cast<const float*>(g.b.base + r * g.b.nb2 + b_off);
    const float decay = expf(Ah * softplus(an + dth));
    const float beta = sigmoid(bn);
    const float vj = conv[2 * kDk + jl];
    const float inv_q = p.q_scale / sqrtf(ssq + p.eps), inv_k = 1.0f / sqrtf(ssk + p.eps);
    const float o =
        gdn_token<kRows, true>(S, ks[warp], qs[warp], inv_k, inv_q, qq, decay, beta, vj);
    if (qq == 0) reinterpret_cast<float*>(g.core.row(h, r))[j] = o;
    __syncthreads();  // conv, qs and ks read by every thread before the next token's
  }
#pragma unroll
  for (int m = 0; m < kRows; ++m) Sg[(kRows * qq + m) * p.dv + j] = S[m];
  if (tid == 0) {
    if (s.n_q == 0) qk_seen = atomicAdd(qk_cnt, 1u);
    last_qk = qk_seen + 1u == qk_n;
    if (last_qk) *qk_cnt = 0u;
  }
  __syncthreads();  // last_qk (thread 0's) is read by every thread below
  // 3. The new conv state: the window's last K - 1 inputs (state rows when the sequence was
  // shorter), as ssm_conv_kernel stores it; q / k channels by the key head's last reader only.
#pragma unroll
  for (int u = 0; u < kChanPer; ++u) {
    const int e = tid + 128 * u;
    if (chan[u] < 0 || (e < 2 * kDk && !last_qk)) continue;
#pragma unroll
    for (int i = 0; i < kConvK - 1; ++i)
      reinterpret_cast<float*>(g.conv_state.row(st0 + i, 0))[chan[u]] = win[u][i];
  }
}

// Whether the views q, k, v are the conv output's q / k / v channels (the kernel reads mixed by
// those offsets and never writes conv).
bool views_of_conv(const Backend::GdnChain& c) {
  const int64_t nk = c.p.n_k_heads, dk = c.p.d_k, C = c.conv.ne[0];
  const auto at = [&](const Tensor& v, int64_t first, int64_t heads, int64_t d) {
    return v.buf == c.conv.buf && v.offset == c.conv.offset + static_cast<size_t>(first) * 4 &&
           v.ne[0] == d && v.ne[1] == heads && v.nb[0] == 4 &&
           v.nb[1] == static_cast<size_t>(d) * 4 && v.nb[2] == c.conv.nb[1];
  };
  return c.conv.is_contiguous() && c.conv.ne == c.mixed.ne && C == c.mixed.ne[0] &&
         at(c.q, 0, nk, dk) && at(c.k, nk * dk, nk, dk) &&
         at(c.v, 2 * nk * dk, c.p.n_v_heads, c.p.d_v) &&
         C == 2 * nk * dk + static_cast<int64_t>(c.p.n_v_heads) * c.p.d_v;
}

}  // namespace
}  // namespace cuda

void CudaBackend::gdn_chain(const GdnChain& c) {
  const GdnParams& p = c.p;
  const int64_t n_tok = c.q.ne[2];
  const int64_t n_seqs = c.seqs.ne[1];
  // Decode-shaped calls (gated_delta_net would pick gdn_regs_kernel) of the shapes compiled: d_k
  // 64 or 128, whole 32-column blocks, K = 4, the F32 layouts the separate ops take.
  const bool fits =
      n_seqs > 0 && n_seqs <= std::min<int64_t>(gdn_chain_max_seqs_, 65535) &&
      n_tok < n_seqs * (cuda::kGdnChunk / 2) && (p.d_k == 64 || p.d_k == 128) && p.n_k_heads > 0 &&
      p.n_v_heads % p.n_k_heads == 0 && p.d_v % cuda::kGdnCols == 0 &&
      c.conv_w.ne[0] == cuda::kConvK && c.conv_w.type == GgmlType::F32 &&
      c.conv_w.is_contiguous() && c.mixed.type == GgmlType::F32 && c.mixed.nb[0] == 4 &&
      c.mixed.ne[2] == 1 && c.mixed.ne[3] == 1 && c.conv_state.type == GgmlType::F32 &&
      c.conv_state.is_contiguous() && c.delta_state.type == GgmlType::F32 &&
      c.delta_state.is_contiguous() && c.core.type == GgmlType::F32 && c.core.is_contiguous() &&
      c.a.type == GgmlType::F32 && c.b.type == GgmlType::F32 && c.A.is_contiguous() &&
      c.dt_bias.is_contiguous() && cuda::views_of_conv(c) &&
      c.delta_state.ne[3] == c.conv_state.ne[2] * c.conv_state.ne[3];
  if (!fits) return Backend::gdn_chain(c);
  T9_CUDA_PROF(fmt::format("gdn_chain rows {}", cuda::rows_bucket(n_tok)));
  // The contracts the separate ops check.
  cuda::check_f32_rows(c.mixed, "gdn_chain mixed");
  T9_CHECK(c.conv_state.ne[0] == c.mixed.ne[0] && c.conv_state.ne[1] == cuda::kConvK - 1,
           "gdn_chain: conv state must be [slots, {}, {}]", cuda::kConvK - 1, c.mixed.ne[0]);
  T9_CHECK(c.delta_state.ne[0] == p.d_v && c.delta_state.ne[1] == p.d_k &&
               c.delta_state.ne[2] == p.n_v_heads,
           "gdn_chain: delta state must be [slots, {}, {}, {}]", p.n_v_heads, p.d_k, p.d_v);
  T9_CHECK(c.core.ne[0] == p.d_v && c.core.ne[1] == p.n_v_heads && c.core.ne[2] == n_tok,
           "gdn_chain: core shape");
  T9_CHECK(c.a.ne[0] * c.a.ne[1] == p.n_v_heads && c.a.ne[2] == n_tok && c.b.ne == c.a.ne,
           "gdn_chain: a, b shape");
  T9_CHECK(c.A.n_elements() == p.n_v_heads && c.dt_bias.n_elements() == p.n_v_heads,
           "gdn_chain: A, dt_bias");
  derived_->wrote(c.conv_state);
  derived_->wrote(c.conv);
  derived_->wrote(c.delta_state);
  cuda::ChainArgs g{};
  g.mixed = cuda::desc(c.mixed);
  g.conv_w = cuda::desc(c.conv_w);
  g.conv_state = cuda::desc(c.conv_state);
  g.a = cuda::desc(c.a);
  g.b = cuda::desc(c.b);
  g.core = cuda::desc(c.core);
  g.A = reinterpret_cast<const float*>(cuda::base_ptr(c.A));
  g.dt = reinterpret_cast<const float*>(cuda::base_ptr(c.dt_bias));
  g.delta_state = reinterpret_cast<float*>(cuda::base_ptr(c.delta_state));
  g.n_slots = c.delta_state.ne[3];
  g.seqs = reinterpret_cast<const RecurrentSeq*>(cuda::base_ptr(c.seqs));
  g.p = cuda::GdnDims{
      p.n_k_heads,     p.n_v_heads,         p.d_k,    p.d_v,
      p.v_heads_tiled, cuda::state_early(), p.l2_eps, 1.0f / std::sqrt(static_cast<float>(p.d_k))};
  g.counters = static_cast<unsigned*>(gdn_counters_.reserve_zeroed(
      static_cast<size_t>(n_seqs * p.n_k_heads) * sizeof(unsigned), *stream_));
  g.n_tok = n_tok;
  g.err = err_word_;
  const dim3 grid(static_cast<unsigned>(p.n_v_heads * (p.d_v / cuda::kGdnCols)),
                  static_cast<unsigned>(n_seqs));
  const auto kernel = p.d_k == 64 ? cuda::gdn_chain_kernel<16> : cuda::gdn_chain_kernel<32>;
  stream_->launch(kernel, grid, cuda::kGdnWarps * 32, 0, g);
  ++gdn_chain_launches_;
}

}  // namespace t9
