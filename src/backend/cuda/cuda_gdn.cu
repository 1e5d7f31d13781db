// CUDA ops of Gated DeltaNet layers: the short causal conv1d with its rolling state (ssm_conv)
// and the gated delta rule in its token-by-token form (gated_delta_net). Same contracts and
// per-element formulas as backend/cpu/cpu_gdn.cpp (gdn_recurrent; the fast kernels sum over d_k
// in another fixed order, see gdn_regs_kernel, and gdn_rounds_kernel computes the same bits for
// long sequences); the chunked-parallel (WY) form is not implemented here, so every step runs the
// recurrence (the model's default, see ModelConfig::gdn_min_chunked_tokens). Each sequence's work
// is independent of the others and of how its tokens were split into steps: results are
// deterministic and batch-invariant.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <cmath>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_gdn.cuh"
#include "backend/cuda/cuda_profile.cuh"

namespace t9 {
namespace cuda {
namespace {

constexpr int kMaxConvK = 8;       // ssm_conv kernel widths compiled (Qwen3-Next/3.5 use 4)
constexpr int kConvThreads = 128;  // channels per block

// One thread per (sequence, chunk of kConvChunk tokens, channel): the K weights in registers, the
// window seeded with the K - 1 inputs before the chunk (from x, or from the state before the
// sequence's first token); out = silu(sum_i w[i] * xx[t + i]) summed i = 0 .. K-1 from 0 (the
// CPU's order). There is no recurrence (the state is only the last K - 1 inputs), so chunks run
// side by side: a 2048-token prompt was one serial walk per channel, 1.05 ms (run 3 of session
// 10). Chunk 0 alone reads the old state, and it also writes the new one after its own reads (the
// last K - 1 inputs, all in x unless the sequence is shorter than K - 1), so no other block
// touches the state. grid.z = 1 when out overlaps x (chunks would read overwritten inputs).
constexpr int kConvChunk = 32;

template <int K>
__global__ void ssm_conv_kernel(TensorDesc x, TensorDesc w, TensorDesc state, int64_t n_slots,
                                const RecurrentSeq* __restrict__ seqs, TensorDesc out,
                                unsigned* err, bool early_state) {
  // early_state: the sequence, the old state and the weights before the wait (state_early()).
  if (!early_state) pdl_enter();
  const RecurrentSeq s = seqs[blockIdx.y];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= x.ne0) return;
  if (!seq_ok(s, x.n_rows(), n_slots)) {
    if (c == 0 && blockIdx.z == 0) atomicOr(err, kErrSeqRows);
    return;
  }
  const int chunk = gridDim.z == 1 ? s.n_q : kConvChunk;
  const int t0 = static_cast<int>(blockIdx.z) * chunk, t1 = min(s.n_q, t0 + chunk);
  if (t0 >= t1 && blockIdx.z != 0) return;
  const auto in = [&](int t) {  // input at sequence position t (t < 0: the state)
    return reinterpret_cast<const float*>(x.row(static_cast<int64_t>(s.q_begin) + t))[c];
  };
  const int64_t st0 = static_cast<int64_t>(s.slot) * (K - 1);
  float old[K - 1] = {};  // the state before the sequence (read by chunk 0 only)
  if (blockIdx.z == 0) {
#pragma unroll
    for (int i = 0; i < K - 1; ++i)
      old[i] = s.reset ? 0.0f : reinterpret_cast<const float*>(state.row(st0 + i))[c];
  }
  float win[K], wc[K];
  const float* wr = reinterpret_cast<const float*>(w.row(c));
#pragma unroll
  for (int i = 0; i < K; ++i) wc[i] = wr[i];
  if (early_state) pdl_enter();  // x belongs to this step
  // Chunk 0 starts at position 0 (its K - 1 earlier inputs are the state); every other chunk
  // starts at kConvChunk or later, past K - 1.
  for (int i = 0; i < K - 1; ++i) win[i] = blockIdx.z == 0 ? old[i] : in(t0 - (K - 1) + i);
  for (int t = t0; t < t1; ++t) {
    win[K - 1] = in(t);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < K; ++i) sum = fmaf(wc[i], win[i], sum);
    reinterpret_cast<float*>(out.row(static_cast<int64_t>(s.q_begin) + t))[c] = silu(sum);
#pragma unroll
    for (int i = 0; i < K - 1; ++i) win[i] = win[i + 1];
  }
  if (blockIdx.z != 0) return;
  // The new state: the K - 1 inputs before position n_q. When this chunk reached the end, the
  // window holds them (the only case with aliasing, or with fewer than K - 1 tokens); otherwise
  // the sequence is longer than a chunk and they are all in x.
  for (int i = 0; i < K - 1; ++i)
    reinterpret_cast<float*>(state.row(st0 + i))[c] =
        t1 >= s.n_q ? win[i] : in(s.n_q - (K - 1) + i);
}

// The general kernel (any d_k; used when d_k is not 16, 32, 64 or 128). One block per (value
// head h = blockIdx.x, sequence blockIdx.y); thread j owns column j of the
// state S [dk, dv] (kept in shared memory, so each thread touches only its own column and the
// state needs no synchronisation). Per token, as gdn_recurrent on the CPU:
//   q, k of the key head -> shared; every thread sums their squares in order i = 0 .. dk-1 and
//   normalises on the fly (x * (scale / sqrt(ss + eps)), the CPU's single rounding);
//   S *= exp(g); delta = (v - S^T k) * beta; S += k delta^T; out = S^T q.
// Shared memory: S, then q and k of the current token.
__global__ void gdn_recurrent_kernel(TensorDesc q, TensorDesc k, TensorDesc v, TensorDesc a,
                                     TensorDesc b, const float* __restrict__ A,
                                     const float* __restrict__ dt, float* __restrict__ state,
                                     int64_t n_slots, const RecurrentSeq* __restrict__ seqs,
                                     GdnDims p, TensorDesc out, int64_t n_tok, unsigned* err) {
  pdl_enter();
  extern __shared__ float sh[];
  const int dk = p.dk, dv = p.dv, h = blockIdx.x, j = threadIdx.x, nt = blockDim.x;
  float* S = sh;
  float* qs = S + dk * dv;
  float* ks = qs + dk;
  const RecurrentSeq s = seqs[blockIdx.y];
  if (!seq_ok(s, n_tok, n_slots)) {  // uniform over the block: no barrier is skipped by some
    if (j == 0 && h == 0) atomicOr(err, kErrSeqRows);
    return;
  }
  const int kh = p.tiled ? h % p.nk : h / (p.nv / p.nk);
  float* Sg = state + (static_cast<int64_t>(s.slot) * p.nv + h) * dk * dv;
  for (int i = j; i < dk * dv; i += nt) S[i] = s.reset ? 0.0f : Sg[i];
  const float Ah = A[h], dth = dt[h];
  __syncthreads();
  for (int t = 0; t < s.n_q; ++t) {
    const int64_t r = static_cast<int64_t>(s.q_begin) + t;
    const float* qr = reinterpret_cast<const float*>(q.row(r * p.nk + kh));
    const float* kr = reinterpret_cast<const float*>(k.row(r * p.nk + kh));
    for (int i = j; i < dk; i += nt) qs[i] = qr[i], ks[i] = kr[i];
    __syncthreads();
    if (j < dv) {
      float ssq = 0.0f, ssk = 0.0f;
      for (int i = 0; i < dk; ++i) {
        ssq = fmaf(qs[i], qs[i], ssq);
        ssk = fmaf(ks[i], ks[i], ssk);
      }
      const float inv_q = p.q_scale / sqrtf(ssq + p.eps), inv_k = 1.0f / sqrtf(ssk + p.eps);
      const float decay = expf(Ah * softplus(head_value(a, r, h) + dth));
      const float beta = sigmoid(head_value(b, r, h));
      float mem = 0.0f;
      for (int i = 0; i < dk; ++i) {
        const float sv = S[i * dv + j] * decay;
        S[i * dv + j] = sv;
        mem = fmaf(sv, ks[i] * inv_k, mem);
      }
      const float vj = reinterpret_cast<const float*>(v.row(r * p.nv + h))[j];
      const float delta = (vj - mem) * beta;
      float o = 0.0f;
      for (int i = 0; i < dk; ++i) {
        const float sv = fmaf(ks[i] * inv_k, delta, S[i * dv + j]);
        S[i * dv + j] = sv;
        o = fmaf(sv, qs[i] * inv_q, o);
      }
      reinterpret_cast<float*>(out.row(r * p.nv + h))[j] = o;
    }
    __syncthreads();  // q, k of this token are read by all before the next token's load
  }
  for (int i = j; i < dk * dv; i += nt) Sg[i] = S[i];
}

// The same token with sixteen threads per column: thread (quarter qq, chain c) holds the kRows / 4
// rows i = kRows qq + c + 4 n (n in order) of its column, i.e. exactly the terms of
// gdn_column_dot's partial chain c in quarter qq, summed in the same order. The chains join
// (p0 + p1) + (p2 + p3) over two shuffle levels (a + b and b + a are the same float) and the
// quarters over two more, as gdn_column_dot's xor tree: the same bits as gdn_token with four
// times the threads, so a prompt's chain of tokens runs on four warps per scheduler instead of
// one (lane = 16 (column in the warp) + 4 qq + c).
template <int kRows>
__device__ __forceinline__ float gdn_chain_dot(const float (&a)[kRows / 4],
                                               const float (&b)[kRows / 4]) {
  float d = 0.0f;
#pragma unroll
  for (int n = 0; n < kRows / 4; ++n) d = fmaf(a[n], b[n], d);
  d += __shfl_xor_sync(0xffffffffu, d, 1);  // p0 + p1 (or p2 + p3)
  d += __shfl_xor_sync(0xffffffffu, d, 2);  // (p0 + p1) + (p2 + p3)
  d += __shfl_xor_sync(0xffffffffu, d, 4);  // the quarters: gdn_column_dot's xor 1
  d += __shfl_xor_sync(0xffffffffu, d, 8);  // and xor 2
  return d;
}
template <int kRows>
__device__ __forceinline__ float gdn_token_chain(float (&S)[kRows / 4], const float* k_row,
                                                 const float* q_row, int qq, int c, float decay,
                                                 float beta, float vj) {
  constexpr int kN = kRows / 4;
  const int at = qq * kGdnQuarter<kRows> + c;  // gdn_at(kRows qq + c)
  float kv[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n) kv[n] = k_row[at + 4 * n];
#pragma unroll
  for (int n = 0; n < kN; ++n) S[n] *= decay;
  const float mem = gdn_chain_dot<kRows>(S, kv);
  const float delta = (vj - mem) * beta;
#pragma unroll
  for (int n = 0; n < kN; ++n) S[n] = fmaf(kv[n], delta, S[n]);
  float qv[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n) qv[n] = q_row[at + 4 * n];
  return gdn_chain_dot<kRows>(S, qv);
}

// The fast kernel: the state in registers, four threads per column. Block (head h, columns
// 32 c .. 32 c + 31) = blockIdx.x (h = blockIdx.x / n_col_blocks), sequence blockIdx.y; 128
// threads; lane = 4 * (column within the warp's 8) + quarter, so thread (column j, quarter qq)
// holds S[i][j] for the kRows = d_k / 4 rows i = kRows qq + m. Per token, the same formulas as
// the CPU's gdn_recurrent, with the sums over d_k in gdn_column_dot's order (another order than
// the CPU's sequential one: within gdn_bound) and the squares of q and k as 32 lane partials and
// an xor tree; every order is fixed, so results do not depend on the batch or on how tokens are
// split into steps. The next token's inputs are loaded while this one is computed.
template <int kRows>
__global__ void __launch_bounds__(kGdnWarps * 32)
    gdn_regs_kernel(TensorDesc q, TensorDesc k, TensorDesc v, TensorDesc a, TensorDesc b,
                    const float* __restrict__ A, const float* __restrict__ dt,
                    float* __restrict__ state, int64_t n_slots,
                    const RecurrentSeq* __restrict__ seqs, GdnDims p, TensorDesc out, int64_t n_tok,
                    unsigned* err) {
  // p.early_state: the sequence, the state and A, dt before the wait (state_early()).
  if (!p.early_state) pdl_enter();
  constexpr int kDk = 4 * kRows;
  constexpr int kPerLane = (kDk + 31) / 32;  // q/k values a lane loads for the norms
  __shared__ __align__(16) float qs[kGdnWarps][kGdnRowFloats<kRows>];
  __shared__ __align__(16) float ks[kGdnWarps][kGdnRowFloats<kRows>];
  const int n_cb = (p.dv + kGdnCols - 1) / kGdnCols;
  const int h = blockIdx.x / n_cb, cb = blockIdx.x % n_cb;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int qq = lane % 4, j = kGdnCols * cb + 8 * warp + lane / 4;
  const RecurrentSeq s = seqs[blockIdx.y];
  if (!seq_ok(s, n_tok, n_slots)) {
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicOr(err, kErrSeqRows);
    return;
  }
  const bool col = j < p.dv;
  const int kh = p.tiled ? h % p.nk : h / (p.nv / p.nk);
  float* Sg = state + (static_cast<int64_t>(s.slot) * p.nv + h) * kDk * p.dv;
  float S[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) S[m] = col && !s.reset ? Sg[(kRows * qq + m) * p.dv + j] : 0.0f;
  const float Ah = A[h], dth = dt[h];
  if (p.early_state) pdl_enter();  // q, k, v, a and b belong to this step
  // Element h of a and b ([n_tokens, r, n_v / r]) sits at this offset in each token's plane;
  // every per-token address below is a plane stride away (no division in the token loop).
  const int64_t a_off = (h / a.ne0) * a.nb1 + (h % a.ne0) * 4;
  const int64_t b_off = (h / b.ne0) * b.nb1 + (h % b.ne0) * 4;
  // The next token's inputs, loaded one token ahead: this lane's q and k values, v of column j,
  // the head's a and b.
  float qn[kPerLane], kn[kPerLane], vn = 0.0f, an = 0.0f, bn = 0.0f;
  auto load_next = [&](int64_t r) {
    const float* qr = reinterpret_cast<const float*>(q.row(kh, r));
    const float* kr = reinterpret_cast<const float*>(k.row(kh, r));
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int i = lane + 32 * e;
      qn[e] = i < kDk ? qr[i] : 0.0f;
      kn[e] = i < kDk ? kr[i] : 0.0f;
    }
    vn = col ? reinterpret_cast<const float*>(v.row(h, r))[j] : 0.0f;
    an = *reinterpret_cast<const float*>(a.base + r * a.nb2 + a_off);
    bn = *reinterpret_cast<const float*>(b.base + r * b.nb2 + b_off);
  };
  if (s.n_q > 0) load_next(s.q_begin);
  for (int t = 0; t < s.n_q; ++t) {
    const int64_t r = static_cast<int64_t>(s.q_begin) + t;
    float ssq = 0.0f, ssk = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int i = lane + 32 * e;
      if (i < kDk) qs[warp][gdn_at<kRows>(i)] = qn[e], ks[warp][gdn_at<kRows>(i)] = kn[e];
      ssq = fmaf(qn[e], qn[e], ssq);
      ssk = fmaf(kn[e], kn[e], ssk);
    }
    ssq = warp_sum(ssq);
    ssk = warp_sum(ssk);
    __syncwarp();  // qs/ks of this warp written
    const float decay = expf(Ah * softplus(an + dth));
    const float beta = sigmoid(bn);
    const float vj = vn;
    if (t + 1 < s.n_q) load_next(r + 1);
    const float inv_q = p.q_scale / sqrtf(ssq + p.eps), inv_k = 1.0f / sqrtf(ssk + p.eps);
    const float o =
        gdn_token<kRows, true>(S, ks[warp], qs[warp], inv_k, inv_q, qq, decay, beta, vj);
    if (col && qq == 0) reinterpret_cast<float*>(out.row(h, r))[j] = o;
    __syncwarp();  // qs/ks read by every lane before the next token overwrites them
  }
  if (col)
#pragma unroll
    for (int m = 0; m < kRows; ++m) Sg[(kRows * qq + m) * p.dv + j] = S[m];
}

// The same arithmetic for calls with long sequences (prompt chunks), where the per-token chain
// is what takes the time: the tokens go in rounds of kGdnChunk. First the block's warps prepare
// the round's tokens side by side (load q, k, v, a, b; the norms; q * inv_q and k * inv_k, decay,
// beta into shared memory), then every warp runs its columns' chain over the round reading only
// shared memory. kTpc = 4 threads per column: gdn_regs_kernel's layout and per-token arithmetic
// (gdn_token); kTpc = 16: gdn_token_chain's (the same sums, a chain per thread, 512 threads a
// block). The products k * inv_k and q * inv_q are the same floats whether kept or recomputed, so
// every kernel gives the same bits and the launcher may pick any per call
// (CudaHybrid.GatedDeltaNetStepsCarryState runs them on the same tokens and compares bits).
template <int kRows, int kTpc>
__global__ void __launch_bounds__(kGdnCols* kTpc)
    gdn_rounds_kernel(TensorDesc q, TensorDesc k, TensorDesc v, TensorDesc a, TensorDesc b,
                      const float* __restrict__ A, const float* __restrict__ dt,
                      float* __restrict__ state, int64_t n_slots,
                      const RecurrentSeq* __restrict__ seqs, GdnDims p, TensorDesc out,
                      int64_t n_tok, unsigned* err) {
  static_assert(kTpc == 4 || kTpc == 16, "four threads per column, or one per partial chain");
  pdl_enter();
  constexpr int kDk = 4 * kRows;
  constexpr int kPerLane = (kDk + 31) / 32;  // q/k values a lane loads for the norms
  constexpr int kWarps = kGdnCols * kTpc / 32;
  constexpr int kPerWarp = kGdnChunk / kWarps;          // tokens a warp prepares per round
  constexpr int kHeld = kTpc == 4 ? kRows : kRows / 4;  // state rows a thread holds
  __shared__ __align__(16) float qs[kGdnChunk][kGdnRowFloats<kRows>];  // q * inv_q (gdn_at)
  __shared__ __align__(16) float ks[kGdnChunk][kGdnRowFloats<kRows>];  // k * inv_k
  __shared__ float vs[kGdnChunk][kGdnCols], decs[kGdnChunk], betas[kGdnChunk];
  const int n_cb = (p.dv + kGdnCols - 1) / kGdnCols;
  const int h = blockIdx.x / n_cb, cb = blockIdx.x % n_cb;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Column jl of the block; quarter qq; the chain c (kTpc = 16; 0 for four threads a column).
  const int jl = (32 / kTpc) * warp + lane / kTpc, j0 = kGdnCols * cb, j = j0 + jl;
  const int qq = kTpc == 4 ? lane % 4 : (lane / 4) % 4, c = kTpc == 4 ? 0 : lane % 4;
  const RecurrentSeq s = seqs[blockIdx.y];
  if (!seq_ok(s, n_tok, n_slots)) {  // uniform over the block: no barrier is skipped by some
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicOr(err, kErrSeqRows);
    return;
  }
  const bool col = j < p.dv;
  const int kh = p.tiled ? h % p.nk : h / (p.nv / p.nk);
  float* Sg = state + (static_cast<int64_t>(s.slot) * p.nv + h) * kDk * p.dv;
  // State row of held value m: kRows qq + m (four threads a column), kRows qq + c + 4 m (sixteen).
  const auto row_of = [&](int m) { return kRows * qq + (kTpc == 4 ? m : c + 4 * m); };
  float S[kHeld];
#pragma unroll
  for (int m = 0; m < kHeld; ++m) S[m] = col && !s.reset ? Sg[row_of(m) * p.dv + j] : 0.0f;
  const float Ah = A[h], dth = dt[h];
  const int64_t a_off = (h / a.ne0) * a.nb1 + (h % a.ne0) * 4;  // as in gdn_regs_kernel
  const int64_t b_off = (h / b.ne0) * b.nb1 + (h % b.ne0) * 4;
  for (int c0 = 0; c0 < s.n_q; c0 += kGdnChunk) {
    const int n_c = min(kGdnChunk, s.n_q - c0);
    // Prepare: warp w takes the round's tokens w, w + kWarps, ...; all loads first.
    float qn[kPerWarp][kPerLane], kn[kPerWarp][kPerLane], vn[kPerWarp], an[kPerWarp], bn[kPerWarp];
#pragma unroll
    for (int u = 0; u < kPerWarp; ++u) {
      const int tt = warp + kWarps * u;
      const int64_t r = static_cast<int64_t>(s.q_begin) + c0 + min(tt, n_c - 1);
      const float* qr = reinterpret_cast<const float*>(q.row(kh, r));
      const float* kr = reinterpret_cast<const float*>(k.row(kh, r));
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int i = lane + 32 * e;
        qn[u][e] = i < kDk ? qr[i] : 0.0f;
        kn[u][e] = i < kDk ? kr[i] : 0.0f;
      }
      vn[u] = j0 + lane < p.dv ? reinterpret_cast<const float*>(v.row(h, r))[j0 + lane] : 0.0f;
      an[u] = *reinterpret_cast<const float*>(a.base + r * a.nb2 + a_off);
      bn[u] = *reinterpret_cast<const float*>(b.base + r * b.nb2 + b_off);
    }
#pragma unroll
    for (int u = 0; u < kPerWarp; ++u) {
      const int tt = warp + kWarps * u;
      if (tt >= n_c) break;  // uniform per warp
      float ssq = 0.0f, ssk = 0.0f;
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        ssq = fmaf(qn[u][e], qn[u][e], ssq);
        ssk = fmaf(kn[u][e], kn[u][e], ssk);
      }
      ssq = warp_sum(ssq);
      ssk = warp_sum(ssk);
      const float inv_q = p.q_scale / sqrtf(ssq + p.eps), inv_k = 1.0f / sqrtf(ssk + p.eps);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int i = lane + 32 * e;
        if (i < kDk)
          qs[tt][gdn_at<kRows>(i)] = qn[u][e] * inv_q, ks[tt][gdn_at<kRows>(i)] = kn[u][e] * inv_k;
      }
      vs[tt][lane] = vn[u];  // kGdnCols == 32: one column per lane
      if (lane == 0) {
        decs[tt] = expf(Ah * softplus(an[u] + dth));
        betas[tt] = sigmoid(bn[u]);
      }
    }
    __syncthreads();  // the round is prepared
    for (int tt = 0; tt < n_c; ++tt) {
      float o;
      if constexpr (kTpc == 4)
        o = gdn_token<kRows, false>(S, ks[tt], qs[tt], 1.0f, 1.0f, qq, decs[tt], betas[tt],
                                    vs[tt][jl]);
      else
        o = gdn_token_chain<kRows>(S, ks[tt], qs[tt], qq, c, decs[tt], betas[tt], vs[tt][jl]);
      if (col && qq == 0 && c == 0)
        reinterpret_cast<float*>(out.row(h, static_cast<int64_t>(s.q_begin) + c0 + tt))[j] = o;
    }
    __syncthreads();  // every warp is done with the round before the next one is prepared
  }
  if (col)
#pragma unroll
    for (int m = 0; m < kHeld; ++m) Sg[row_of(m) * p.dv + j] = S[m];
}

const RecurrentSeq* seqs_ptr(const Tensor& seqs) {
  T9_CHECK(seqs.type == GgmlType::I32 && seqs.ne[0] == 4 && seqs.is_contiguous(),
           "recurrent seqs must be I32 [n_seqs, 4]");
  return reinterpret_cast<const RecurrentSeq*>(base_ptr(seqs));
}

template <int K>
void launch_conv(const Tensor& x, const Tensor& w, const Tensor& state, int64_t n_slots,
                 const RecurrentSeq* seqs, unsigned n_seqs, const Tensor& out, unsigned* err,
                 Stream& stream) {
  // Chunks per sequence: enough for the longest possible one (the batch's rows); the blocks
  // past a sequence's end return at once.
  const bool alias = byte_span(x).overlaps(byte_span(out));
  const int64_t chunks = alias ? 1 : (x.n_rows() + kConvChunk - 1) / kConvChunk;
  T9_CHECK(chunks <= 65535, "ssm_conv: {} rows exceed the launch grid", x.n_rows());
  const dim3 grid(grid_1d(x.ne[0], kConvThreads), n_seqs, static_cast<unsigned>(chunks));
  stream.launch(ssm_conv_kernel<K>, grid, kConvThreads, 0, desc(x), desc(w), desc(state), n_slots,
                seqs, desc(out), err, state_early());
}

// The Gated DeltaNet's gated norm: a block per row of n <= 256 (a multiple of 32), a warp per
// 32-element block of it. Every warp takes the whole row's sum of squares as
// rms_norm_warp_kernel's warp does (warp_row_inv_rms over 8 per lane, rms_scaled: the same loads,
// sums and roundings), then its own 32 elements: silu(z) * y as the GLU computes it, stored in
// place of the normed row after the block's barrier (out may be x), and with xq their codes
// (cuda_derived.cuh: the output projection's rounded x). One warp per row doing its four blocks'
// roundings one after another took 6.65 us for Qwen3.5's 32 rows of 128 (ncu, run 139): as long
// as the two kernels it replaced (rms_norm_warp 3.4 + the GLU 2.9, whose threads each round once).
constexpr int kGatedNormPer = kWarpRowMax / 32;  // rms_norm_warp_kernel's, for its bits
__global__ void rms_norm_gated_kernel(TensorDesc x, const float* __restrict__ w, float eps,
                                      TensorDesc z, TensorDesc out, int8_t* __restrict__ xq,
                                      ActBlock* __restrict__ xb) {
  const int64_t r = blockIdx.x, n = x.ne0;
  const int lane = threadIdx.x % 32, c = static_cast<int>(threadIdx.x / 32);
  const int64_t i = 32 * c + lane;
  pdl_enter();
  const float zi = reinterpret_cast<const float*>(z.row(r))[i];  // in flight during the sum
  float xv[kGatedNormPer];
  const float inv = warp_row_inv_rms(reinterpret_cast<const float*>(x.row(r)), n, lane, eps, xv);
  float v = 0.0f;
#pragma unroll
  for (int k = 0; k < kGatedNormPer; ++k)  // constant indices: xv stays in registers
    if (k == c) v = xv[k];
  const float y = silu(zi) * rms_scaled(v, inv, w, i, 0.0f);
  __syncthreads();  // every warp has read the row before any writes it (out may be x)
  reinterpret_cast<float*>(out.row(r))[i] = y;
  if (xq != nullptr) quantize_value(y, lane, xq + r * n + 32 * c, xb + (r * n) / 32 + c);
}

}  // namespace

// cuda_gdn.cuh. TEMPO9_CUDA_GDN_EARLY_STATE=0 (read once): after the wait; same bits.
bool state_early() {
  static const bool off = env_off("TEMPO9_CUDA_GDN_EARLY_STATE");
  return !off;
}
}  // namespace cuda

void CudaBackend::ssm_conv(const Tensor& x, const Tensor& w, const Tensor& state,
                           const Tensor& seqs, const Tensor& out) {
  T9_CUDA_PROF(fmt::format("ssm_conv rows {}", cuda::rows_bucket(x.n_rows())));
  derived_->wrote(state);
  derived_->wrote(out);
  cuda::check_f32_rows(x, "ssm_conv x");
  cuda::check_f32_rows(w, "ssm_conv w");
  cuda::check_f32_rows(state, "ssm_conv state");
  cuda::check_f32_rows(out, "ssm_conv out");
  const int64_t K = w.ne[0], C = w.ne[1];
  T9_CHECK(K >= 2 && x.ne[0] == C && out.ne[0] == C && out.n_rows() == x.n_rows(),
           "ssm_conv: x, out must be [n, {}] for a kernel of {}", C, K);
  T9_CHECK(K <= cuda::kMaxConvK, "ssm_conv: kernel width {} (CUDA takes 2..{})", K,
           cuda::kMaxConvK);
  T9_CHECK(state.ne[0] == C && state.ne[1] == K - 1, "ssm_conv: state must be [slots, {}, {}]",
           K - 1, C);
  const RecurrentSeq* sp = cuda::seqs_ptr(seqs);
  const int64_t n_seqs = seqs.ne[1], n_slots = state.ne[2] * state.ne[3];
  T9_CHECK(n_seqs <= 65535, "ssm_conv: {} sequences exceed the launch grid", n_seqs);
  if (n_seqs == 0 || C == 0) return;
  const auto ns = static_cast<unsigned>(n_seqs);
  switch (K) {
    case 2:
      return cuda::launch_conv<2>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
    case 3:
      return cuda::launch_conv<3>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
    case 4:
      return cuda::launch_conv<4>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
    case 5:
      return cuda::launch_conv<5>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
    case 6:
      return cuda::launch_conv<6>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
    case 7:
      return cuda::launch_conv<7>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
    default:
      return cuda::launch_conv<8>(x, w, state, n_slots, sp, ns, out, err_word_, *stream_);
  }
}

void CudaBackend::gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& a, const Tensor& b, const Tensor& A,
                                  const Tensor& dt_bias, const Tensor& state, const Tensor& seqs,
                                  const GdnParams& p, const Tensor& out) {
  T9_CUDA_PROF(fmt::format("gated_delta_net rows {}", cuda::rows_bucket(q.ne[2])));
  derived_->wrote(state);
  derived_->wrote(out);
  for (const Tensor* t : {&q, &k, &v, &a, &b, &A, &dt_bias, &state, &out})
    cuda::check_f32_rows(*t, "gated_delta_net input");
  const int64_t nk = p.n_k_heads, nv = p.n_v_heads, dk = p.d_k, dv = p.d_v;
  T9_CHECK(nk > 0 && nv > 0 && nv % nk == 0, "gated_delta_net: {} v heads, {} k heads", nv, nk);
  T9_CHECK(dk > 0 && dv > 0 && dv <= 1024, "gated_delta_net: d_k {}, d_v {} (d_v <= 1024)", dk, dv);
  const int64_t n = q.ne[2];
  T9_CHECK(q.ne[0] == dk && q.ne[1] == nk && q.ne[3] == 1 && k.ne == q.ne,
           "gated_delta_net: q, k shape");
  T9_CHECK(v.ne[0] == dv && v.ne[1] == nv && v.ne[2] == n && v.ne[3] == 1,
           "gated_delta_net: v shape");
  T9_CHECK(out.ne[0] == dv && out.ne[1] == nv && out.ne[2] == n && out.ne[3] == 1,
           "gated_delta_net: out shape");
  T9_CHECK(a.ne[0] * a.ne[1] == nv && a.ne[2] == n && a.ne[3] == 1 && b.ne == a.ne,
           "gated_delta_net: a, b shape");
  T9_CHECK(A.n_elements() == nv && dt_bias.n_elements() == nv && A.is_contiguous() &&
               dt_bias.is_contiguous(),
           "gated_delta_net: A, dt_bias");
  T9_CHECK(state.ne[0] == dv && state.ne[1] == dk && state.ne[2] == nv && state.is_contiguous(),
           "gated_delta_net: state must be [slots, {}, {}, {}]", nv, dk, dv);
  const RecurrentSeq* sp = cuda::seqs_ptr(seqs);
  const int64_t n_seqs = seqs.ne[1];
  T9_CHECK(n_seqs <= 65535, "gated_delta_net: {} sequences exceed the launch grid", n_seqs);
  const cuda::GdnDims dims{static_cast<int>(nk),
                           static_cast<int>(nv),
                           static_cast<int>(dk),
                           static_cast<int>(dv),
                           p.v_heads_tiled,
                           cuda::state_early(),
                           p.l2_eps,
                           1.0f / std::sqrt(static_cast<float>(dk))};
  if (n_seqs > 0 && (dk == 16 || dk == 32 || dk == 64 || dk == 128)) {
    const auto go = [&](auto kernel, int threads) {
      const dim3 grid(static_cast<unsigned>(nv * ((dv + cuda::kGdnCols - 1) / cuda::kGdnCols)),
                      static_cast<unsigned>(n_seqs));
      stream_->launch(kernel, grid, threads, 0, cuda::desc(q), cuda::desc(k), cuda::desc(v),
                      cuda::desc(a), cuda::desc(b),
                      reinterpret_cast<const float*>(cuda::base_ptr(A)),
                      reinterpret_cast<const float*>(cuda::base_ptr(dt_bias)),
                      reinterpret_cast<float*>(cuda::base_ptr(state)), state.ne[3], sp, dims,
                      cuda::desc(out), n, err_word_);
    };
    const auto rounds_of = [&](auto tpc) {
      constexpr int kTpc = decltype(tpc)::value, kThreads = cuda::kGdnCols * kTpc;
      if (dk == 16) return go(cuda::gdn_rounds_kernel<4, kTpc>, kThreads);
      if (dk == 32) return go(cuda::gdn_rounds_kernel<8, kTpc>, kThreads);
      if (dk == 64) return go(cuda::gdn_rounds_kernel<16, kTpc>, kThreads);
      return go(cuda::gdn_rounds_kernel<32, kTpc>, kThreads);
    };
    // Same bits every way (gdn_rounds_kernel): rounds of prepared tokens pay off once the
    // sequences average half a round, on sixteen threads a column with gdn_chains.
    // TEMPO9_CUDA_GDN=regs|rounds|chains forces one (measurement).
    static const int forced = [] {
      const char* e = std::getenv("TEMPO9_CUDA_GDN");
      return e == nullptr                      ? 0
             : std::string_view(e) == "regs"   ? 1
             : std::string_view(e) == "rounds" ? 2
             : std::string_view(e) == "chains" ? 3
                                               : 0;
    }();
    const bool rounds = forced != 0 ? forced >= 2 : n >= n_seqs * (cuda::kGdnChunk / 2);
    if (rounds && (forced == 3 || (forced == 0 && gdn_chains_)))
      return rounds_of(std::integral_constant<int, 16>{});
    if (rounds) return rounds_of(std::integral_constant<int, 4>{});
    constexpr int kRegsThreads = cuda::kGdnWarps * 32;
    if (dk == 16) return go(cuda::gdn_regs_kernel<4>, kRegsThreads);
    if (dk == 32) return go(cuda::gdn_regs_kernel<8>, kRegsThreads);
    if (dk == 64) return go(cuda::gdn_regs_kernel<16>, kRegsThreads);
    return go(cuda::gdn_regs_kernel<32>, kRegsThreads);
  }
  const size_t smem = static_cast<size_t>(dk * dv + 2 * dk) * sizeof(float);
  // H200: 227 KiB of shared memory per block with the opt-in (d_k = d_v = 128 takes 65 KiB).
  T9_CHECK(smem <= 227 * 1024, "gated_delta_net: a {}x{} state does not fit shared memory", dk, dv);
  if (n_seqs == 0) return;
  if (smem > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(cuda::gdn_recurrent_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  const int threads = static_cast<int>((dv + 31) / 32 * 32);
  const dim3 grid(static_cast<unsigned>(nv), static_cast<unsigned>(n_seqs));
  stream_->launch(cuda::gdn_recurrent_kernel, grid, threads, smem, cuda::desc(q), cuda::desc(k),
                  cuda::desc(v), cuda::desc(a), cuda::desc(b),
                  reinterpret_cast<const float*>(cuda::base_ptr(A)),
                  reinterpret_cast<const float*>(cuda::base_ptr(dt_bias)),
                  reinterpret_cast<float*>(cuda::base_ptr(state)), state.ne[3], sp, dims,
                  cuda::desc(out), n, err_word_);
}

void CudaBackend::rms_norm_gated(const Tensor& x, const Tensor& weight, float eps, const Tensor& z,
                                 const Tensor& out) {
  // TEMPO9_CUDA_FUSE_GATED_NORM=0 (read once): the two ops (A/B runs; same bits).
  static const bool off = cuda::env_off("TEMPO9_CUDA_FUSE_GATED_NORM");
  if (off || x.ne[0] > cuda::kWarpRowMax || x.ne[0] % 32 != 0 || x.n_rows() > 0x7fffffff)
    return Backend::rms_norm_gated(x, weight, eps, z, out);
  T9_CUDA_PROF("rms_norm_gated");
  for (const Tensor* t : {&x, &z, &out}) cuda::check_f32_rows(*t, "rms_norm_gated");
  cuda::check_same_shape(x, out, "rms_norm_gated");
  cuda::check_same_shape(z, out, "rms_norm_gated z");
  const float* w = cuda::norm_weight(weight, x);
  if (x.n_rows() == 0) return;
  // z must not overlap out (the composed GLU reads z after the norm wrote out).
  T9_CHECK(!cuda::byte_span(z).overlaps(cuda::byte_span(out)), "rms_norm_gated: z overlaps out");
  const cuda::RoundedOut ro = derived_->produce(out, codes_scratch_, *stream_);
  stream_->launch(cuda::rms_norm_gated_kernel, static_cast<unsigned>(x.n_rows()),
                  static_cast<unsigned>(x.ne[0]), 0, cuda::desc(x), w, eps, cuda::desc(z),
                  cuda::desc(out), ro.xq, ro.xb);
}

}  // namespace t9
