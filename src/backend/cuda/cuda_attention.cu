// CUDA RoPE, KV writes and paged attention.
//
// Attention: split-K (flash-decoding). A row's visible keys are cut into up to kMaxSplits
// contiguous ranges of whole tiles, the count a function of the row's own key count; one
// 128-thread block per (query row, head, range). Inside a block each warp runs its own online
// softmax over interleaved groups of consecutive keys (lanes split head_dim; a group's K and V
// rows are loaded together, so one memory round trip serves the whole group), the warps merge in
// order, and a combine kernel merges the ranges in order. The order of every reduction is fixed by
// the block shape and the key positions, so a row's result never depends on the other sequences.
// (Qwen3-8B decode, 640 keys, H200: one block per (row, head) over all keys 368 us per layer;
// split-K with one 64-key tile per block scored by warps, folded by all threads key by key:
// 43 us.)
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_flash_attention.cuh"
#include "backend/cuda/cuda_profile.cuh"
#include "backend/cuda/cuda_rope.cuh"

namespace t9 {
namespace cuda {
namespace {

constexpr int kAttnThreads = 128;
constexpr int kKeyTile = 64;      // split ranges are whole multiples of this many keys
constexpr int kMaxHeadDim = 512;  // a lane holds up to 16 dims of q, K, V and acc

struct KvGeom {
  int n_kv_head, head_dim, block_size;
  int64_t n_tables, n_slots;
  int64_t nb1, nb2;  // cache strides: one kv head, one slot
};

// ---- kernels ----

// One block per (token, head) row; threads over rotated pairs, then the pass-through tail.
__global__ void rope_kernel(TensorDesc x, const int32_t* __restrict__ pos, RopeConsts rc,
                            TensorDesc out) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int64_t t = r / x.ne1;
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  float* yr = reinterpret_cast<float*>(out.row(r));
  for (int k = threadIdx.x; k < rc.n_rot / 2; k += blockDim.x) {
    const RopePair p = rope_pair(rc, k, pos[t]);
    rope_rotate(p, xr[p.a], xr[p.b], yr);
  }
  if (yr != xr)
    for (int64_t i = rc.n_rot + threadIdx.x; i < x.ne0; i += blockDim.x) yr[i] = xr[i];
}

// The sequence whose rows [q_begin, q_begin + n_q) hold row r, or -1. Flags sequences whose rows
// fall outside the batch of n_rows.
__device__ int find_seq(const AttnSeq* seqs, int n_seqs, int64_t r, int64_t n_rows, unsigned* err) {
  int found = -1;
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq s = seqs[i];
    if (s.q_begin < 0 || s.n_q < 0 || static_cast<int64_t>(s.q_begin) + s.n_q > n_rows) {
      atomicOr(err, kErrSeqRows);
      continue;
    }
    if (found < 0 && r >= s.q_begin && r < s.q_begin + s.n_q) found = i;
  }
  return found;
}

// Pool slot of position p of sequence s, or -1 (flagged) when the table or the pool is too short.
__device__ __forceinline__ int64_t kv_slot(const AttnSeq& s, const int32_t* tables, KvGeom g,
                                           int64_t p, unsigned* err) {
  const int64_t ti = s.block_table_offset + p / g.block_size;
  if (ti < 0 || ti >= g.n_tables) {
    atomicOr(err, kErrKvSlot);
    return -1;
  }
  const int64_t slot = static_cast<int64_t>(tables[ti]) * g.block_size + p % g.block_size;
  if (slot < 0 || slot >= g.n_slots) {
    atomicOr(err, kErrKvSlot);
    return -1;
  }
  return slot;
}

// qk_norm_rope in one launch: one warp per head row, q's rows then k's, kQkWarps per block. The
// row's RMSNorm is rms_norm_warp_kernel's (cuda_row_ops.cu: lanes strided, the sum of squares in
// double over the warp's tree; the same expression per element), kept in shared memory; then the
// rotation of rope_kernel, in place there (each element belongs to one pair, rotated by one
// lane), and the row goes back to x in one coalesced pass. The same bits as the four separate
// ops. With a KvStore (the op's KvWrite), k's rotated rows and then v's rows (after k's in the
// grid) also go to the pools, as write_kv_kernel stores them: one launch instead of two. q's rows
// are read from q_from (q itself, or the gated attention's query halves: the copy's launch saved,
// ~1.5% of the 35B's decode step, run 175) and written to q.
constexpr int kQkWarps = 8;

struct KvStore {
  TensorDesc v;
  char* k_cache;  // null: no store (no v rows in the grid)
  char* v_cache;
  const AttnSeq* seqs;
  int n_seqs;
  const int32_t* tables;
  KvGeom g;
  bool f16;
  unsigned* err;
};

// Row `hr` (token t = hr / n_kv_head, kv head hr % n_kv_head) of k or v, n elements in `row`
// (shared, or any memory the warp can read), into its pool slot.
__device__ __forceinline__ void store_kv_row(const KvStore& st, char* cache, int64_t hr,
                                             const float* row, int64_t n, int64_t n_tok, int lane) {
  const int64_t t = hr / st.g.n_kv_head, h = hr % st.g.n_kv_head;
  const int si = find_seq(st.seqs, st.n_seqs, t, n_tok, st.err);
  if (si < 0) return;
  const AttnSeq s = st.seqs[si];
  const int64_t slot = kv_slot(s, st.tables, st.g, s.n_past + (t - s.q_begin), st.err);
  if (slot < 0) return;
  char* p = cache + slot * st.g.nb2 + h * st.g.nb1;
  for (int64_t i = lane; i < n; i += 32) {
    if (st.f16)
      reinterpret_cast<__half*>(p)[i] = __float2half_rn(row[i]);
    else
      reinterpret_cast<float*>(p)[i] = row[i];
  }
}

__global__ void __launch_bounds__(kQkWarps * 32)
    qk_norm_rope_kernel(TensorDesc q, TensorDesc q_from, TensorDesc k, const float* __restrict__ wq,
                        const float* __restrict__ wk, bool norm, float eps, float weight_bias,
                        const int32_t* __restrict__ pos, RopeConsts rc, KvStore st) {
  pdl_enter();
  __shared__ float rows[kQkWarps][kQkRowMax];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kQkWarps + warp, nq = q.n_rows();
  const int64_t nk = k.n_rows(), n = q.ne0;
  const bool store = st.k_cache != nullptr;
  if (r >= nq + nk + (store ? nk : 0)) return;  // uniform per warp
  if (r >= nq + nk) {                           // a v row: stored as it is
    const int64_t hr = r - nq - nk;
    store_kv_row(st, st.v_cache, hr, reinterpret_cast<const float*>(st.v.row(hr)), n, k.ne2, lane);
    return;
  }
  const bool is_q = r < nq;
  const int64_t rr = is_q ? r : r - nq, heads = is_q ? q.ne1 : k.ne1;
  float* xr = reinterpret_cast<float*>(is_q ? q.row(rr) : k.row(rr));
  const float* w = is_q ? wq : wk;
  float* row = rows[warp];
  constexpr int kPer = kQkRowMax / 32;
  const float* src = is_q ? reinterpret_cast<const float*>(q_from.row(rr)) : xr;
  norm_rope_row(src, n, norm ? w : nullptr, norm, eps, weight_bias, rc, pos[rr / heads], row,
                lane);  // (x's own elements are read before the warp's barrier inside)
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const int64_t i = lane + 32 * c;
    if (i < n) xr[i] = row[i];
  }
  if (store && !is_q) store_kv_row(st, st.k_cache, rr, row, n, k.ne2, lane);
}

// One block per token row of k/v; threads over (kv head, dim). kVec: four elements per thread
// (16-byte loads; head_dim % 4 == 0 and aligned rows, checked by the launcher), and each thread's
// first k/v loads are issued before the slot lookup so the two chains of loads overlap (the
// element-at-a-time loop took 7.7 us a decode step on Qwen3-8B: ~8 dependent L2 round trips).
template <bool kF16, bool kVec>
__global__ void write_kv_kernel(TensorDesc k, TensorDesc v, char* __restrict__ k_cache,
                                char* __restrict__ v_cache, const AttnSeq* __restrict__ seqs,
                                int n_seqs, const int32_t* __restrict__ tables, KvGeom g,
                                unsigned* err) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int n = g.n_kv_head * g.head_dim;
  constexpr int kW = kVec ? 4 : 1;  // elements per access
  const auto load = [&](const TensorDesc& t, int e, float* out) {
    const int h = e / g.head_dim, d = e % g.head_dim;
    const float* src = reinterpret_cast<const float*>(t.row(r * g.n_kv_head + h)) + d;
    if constexpr (kVec) {
      const float4 f = *reinterpret_cast<const float4*>(src);
      out[0] = f.x, out[1] = f.y, out[2] = f.z, out[3] = f.w;
    } else {
      out[0] = *src;
    }
  };
  const int e0 = kW * static_cast<int>(threadIdx.x), step = kW * static_cast<int>(blockDim.x);
  float kv[2][kW];
  if (e0 < n) load(k, e0, kv[0]), load(v, e0, kv[1]);
  const int si = find_seq(seqs, n_seqs, r, k.ne2, err);
  if (si < 0) return;
  const AttnSeq s = seqs[si];
  const int64_t slot = kv_slot(s, tables, g, s.n_past + (r - s.q_begin), err);
  if (slot < 0) return;
  char* dst[2] = {k_cache, v_cache};
  for (int e = e0; e < n; e += step) {
    if (e != e0) load(k, e, kv[0]), load(v, e, kv[1]);
    const int h = e / g.head_dim, d = e % g.head_dim;
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      char* p = dst[w] + slot * g.nb2 + h * g.nb1;
      if constexpr (kF16 && kVec) {
        const __half2 lo = __floats2half2_rn(kv[w][0], kv[w][1]);
        const __half2 hi = __floats2half2_rn(kv[w][2], kv[w][3]);
        uint2 u;
        u.x = *reinterpret_cast<const uint32_t*>(&lo);
        u.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(reinterpret_cast<__half*>(p) + d) = u;
      } else if constexpr (kF16) {
        reinterpret_cast<__half*>(p)[d] = __float2half_rn(kv[w][0]);
      } else if constexpr (kVec) {
        *reinterpret_cast<float4*>(reinterpret_cast<float*>(p) + d) =
            make_float4(kv[w][0], kv[w][1], kv[w][2], kv[w][3]);
      } else {
        reinterpret_cast<float*>(p)[d] = kv[w][0];
      }
    }
  }
}

// Split-K over keys: a row's visible keys [lo, pos] are cut into attn_splits(n_k) contiguous
// ranges (whole tiles of kKeyTile, at most kMaxSplits), one block each; the count depends only on
// the row's own key count, so a row's result never depends on the batch (bitwise batch
// invariance and whole == token by token hold as before).
constexpr int kMaxSplits = 16;
constexpr int kAttnWarps = kAttnThreads / 32;

__device__ __forceinline__ int attn_splits(int64_t n_k) {
  return static_cast<int>(min64(kMaxSplits, (n_k + kKeyTile - 1) / kKeyTile));
}

// Keys per split: ceil(n_k / splits) rounded up to whole tiles (trailing splits may be empty).
__device__ __forceinline__ int64_t attn_chunk(int64_t n_k, int n_split) {
  const int64_t c = (n_k + n_split - 1) / n_split;
  return (c + kKeyTile - 1) / kKeyTile * kKeyTile;
}

// Keys a warp takes at a time: their K and V rows (kGroup * kPer values each per lane) are all
// in flight together; fewer for wide heads to bound the registers.
template <int kPer>
constexpr int kGroup = kPer <= 2 ? 16 : 32 / kPer;

// Head dim of a lane's i-th value: lanes own kPer consecutive dims when head_dim = 32 kPer
// (kContig: one vector load per row), else dims lane, lane + 32, ... (bounds-checked).
template <int kPer, bool kContig>
__device__ __forceinline__ int lane_dim(int lane, int i) {
  return kContig ? lane * kPer + i : lane + 32 * i;
}

// A lane's kPer values of a K or V row (zeros past head_dim).
template <bool kF16, int kPer, bool kContig>
__device__ __forceinline__ void load_kv(const char* row, int lane, int hd, float (&out)[kPer]) {
  constexpr int kBytes = kPer * (kF16 ? 2 : 4);
  if constexpr (!kContig || kBytes < 4) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int d = lane_dim<kPer, kContig>(lane, i);
      out[i] = 0.0f;
      if (kContig || d < hd)
        out[i] = kF16 ? __half2float(reinterpret_cast<const __half*>(row)[d])
                      : reinterpret_cast<const float*>(row)[d];
    }
  } else {
    constexpr int kWords = kBytes / 4;
    uint32_t w[kWords];
    const char* p = row + lane * kBytes;  // rows are head_dim * elt apart: 4 * kWords aligned
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int c = 0; c < kWords / 4; ++c) {
        const uint4 u = reinterpret_cast<const uint4*>(p)[c];
        w[4 * c] = u.x, w[4 * c + 1] = u.y, w[4 * c + 2] = u.z, w[4 * c + 3] = u.w;
      }
    } else if constexpr (kWords == 2) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      w[0] = u.x, w[1] = u.y;
    } else {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    }
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (kF16) {
        out[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] & 0xffffu)));
        out[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] >> 16)));
      } else {
        out[i] = __uint_as_float(w[i]);
      }
    }
  }
}

// Block (row r, head h, split z) over the split's keys; writes the partial [acc (head_dim,
// unnormalised), m, l] to part[(r * n_head + h) * kMaxSplits + z] (m = -inf, l = 0 for a split
// with no keys). attention_combine_kernel merges the splits.
//
// Warp w takes the split's groups of kGroup consecutive keys number w, w + 4, ...: lane j < kGroup
// looks up key j's slot, then every lane loads its kPer values of all the group's K and V rows at
// once, scores each key (a kPer-term fmaf chain per lane, then a warp xor tree), and folds the
// group into its running (m, l, acc) with one rescale. The four warps' partials are merged in warp
// order at the end. Every order is fixed by the key positions and the block shape.
template <bool kF16, int kPer, bool kContig>
__global__ void __launch_bounds__(kAttnThreads)
    attention_kernel(TensorDesc q, const char* k_cache, const char* v_cache,
                     const AttnSeq* __restrict__ seqs, int n_seqs,
                     const int32_t* __restrict__ tables, KvGeom g, int n_head, float scale,
                     float softcap, int window, float* __restrict__ part, unsigned* err) {
  pdl_enter();
  constexpr int G = kGroup<kPer>;
  __shared__ float s_acc[kAttnWarps][32 * kPer];
  __shared__ float s_m[kAttnWarps], s_l[kAttnWarps];
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  const int si = find_seq(seqs, n_seqs, r, q.ne2, err);
  if (si < 0) return;  // a row no sequence owns is left as it is (as on the CPU)
  const AttnSeq s = seqs[si];
  const int64_t pos = s.n_past + (r - s.q_begin);
  const int64_t lo0 = window > 0 ? max64(0, pos - window + 1) : 0;
  const int hd = g.head_dim;
  const int z = blockIdx.z, n_split = attn_splits(pos + 1 - lo0);
  float* pr = part + ((r * n_head + h) * kMaxSplits + z) * (hd + 2);
  const int64_t chunk = attn_chunk(pos + 1 - lo0, n_split);
  const int64_t lo = lo0 + z * chunk, hi = min64(pos, lo + chunk - 1);
  if (z >= n_split || lo > hi) {
    if (threadIdx.x == 0) {
      pr[hd] = -INFINITY;
      pr[hd + 1] = 0.0f;
    }
    return;
  }
  const int kvh = h / (n_head / g.n_kv_head);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float qv[kPer];
  const float* qr = reinterpret_cast<const float*>(q.row(r * n_head + h));
#pragma unroll
  for (int i = 0; i < kPer; ++i) {  // scalar loads: q rows may be views at any 4-byte offset
    const int d = lane_dim<kPer, kContig>(lane, i);
    qv[i] = kContig || d < hd ? qr[d] : 0.0f;
  }
  const char* k_base = k_cache + kvh * g.nb1;
  const char* v_base = v_cache + kvh * g.nb1;

  float acc[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t kb = lo + warp * G; kb <= hi; kb += kAttnWarps * G) {
    int64_t my_slot = -1;
    if (lane < G && kb + lane <= hi) my_slot = kv_slot(s, tables, g, kb + lane, err);
    int64_t slot[G];
    float kf[G][kPer], vf[G][kPer];
#pragma unroll
    for (int j = 0; j < G; ++j) {
      slot[j] = __shfl_sync(0xffffffffu, my_slot, j);
#pragma unroll
      for (int i = 0; i < kPer; ++i) kf[j][i] = vf[j][i] = 0.0f;
      if (slot[j] >= 0) {
        load_kv<kF16, kPer, kContig>(k_base + slot[j] * g.nb2, lane, hd, kf[j]);
        load_kv<kF16, kPer, kContig>(v_base + slot[j] * g.nb2, lane, hd, vf[j]);
      }
    }
    float sc[G];
    float gmax = -INFINITY;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kPer; ++i) dot = fmaf(qv[i], kf[j][i], dot);
      float v = warp_sum(dot) * scale;
      if (softcap > 0.0f) v = softcap * tanhf(v / softcap);
      sc[j] = slot[j] >= 0 ? v : -INFINITY;
      gmax = fmaxf(gmax, sc[j]);
    }
    if (gmax == -INFINITY) continue;  // no visible key in the group (uniform per warp)
    const float m_new = fmaxf(m, gmax);
    const float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] *= corr;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      if (slot[j] < 0) continue;
      const float w = expf(sc[j] - m_new);
      l += w;
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc[i] = fmaf(w, vf[j][i], acc[i]);
    }
    m = m_new;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int d = lane_dim<kPer, kContig>(lane, i);
    if (kContig || d < hd) s_acc[warp][d] = acc[i];
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  __syncthreads();
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, s_m[w]);
  float f[kAttnWarps], lsum = 0.0f;
#pragma unroll
  for (int w = 0; w < kAttnWarps; ++w) {
    f[w] = s_m[w] == -INFINITY ? 0.0f : expf(s_m[w] - mx);
    if (s_m[w] != -INFINITY) lsum = fmaf(s_l[w], f[w], lsum);
  }
  for (int d = threadIdx.x; d < hd; d += kAttnThreads) {
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; ++w)
      if (s_m[w] != -INFINITY) a = fmaf(s_acc[w][d], f[w], a);
    pr[d] = a;
  }
  if (threadIdx.x == 0) {
    pr[hd] = mx;
    pr[hd + 1] = lsum;
  }
}

// One block per (row, head): out = sum_z acc_z e^(m_z - M) / sum_z l_z e^(m_z - M), splits in
// order (M the largest m_z). With one split this is acc / l, stage 1's result bit for bit.
__global__ void __launch_bounds__(kAttnThreads)
    attention_combine_kernel(const float* __restrict__ part, const AttnSeq* __restrict__ seqs,
                             int n_seqs, int n_rows, int n_head, int hd, TensorDesc out,
                             unsigned* err) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y;
  if (find_seq(seqs, n_seqs, r, n_rows, err) < 0) return;
  const float* pr = part + (r * n_head + h) * kMaxSplits * (hd + 2);
  float mx = -INFINITY;
  for (int z = 0; z < kMaxSplits; ++z) mx = fmaxf(mx, pr[z * (hd + 2) + hd]);
  float l = 0.0f;
  for (int z = 0; z < kMaxSplits; ++z) {
    const float mz = pr[z * (hd + 2) + hd];
    if (mz != -INFINITY) l = fmaf(pr[z * (hd + 2) + hd + 1], expf(mz - mx), l);
  }
  float* o = reinterpret_cast<float*>(out.row(r * n_head + h));
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int z = 0; z < kMaxSplits; ++z) {
      const float mz = pr[z * (hd + 2) + hd];
      if (mz != -INFINITY) acc = fmaf(pr[z * (hd + 2) + d], expf(mz - mx), acc);
    }
    o[d] = acc / l;
  }
}

// ---- launchers ----

// attention_kernel for the pool type and head_dim: kPer = head_dim / 32 rounded up to a power of
// two; contiguous dims per lane (vector loads) when head_dim is exactly 32 kPer and both pools
// start on 16-byte boundaries (rows are then aligned to their per-lane load size).
template <typename... A>
void launch_attention(bool f16, int head_dim, bool pools_aligned, dim3 grid, Stream& stream,
                      A... args) {
  const auto go = [&](auto kernel) { stream.launch(kernel, grid, kAttnThreads, 0, args...); };
  const auto pick = [&](auto f16_tag) {
    constexpr bool kF16 = decltype(f16_tag)::value;
    const bool exact = pools_aligned && head_dim % 32 == 0;
    if (head_dim <= 32)
      return exact ? go(attention_kernel<kF16, 1, true>) : go(attention_kernel<kF16, 1, false>);
    if (head_dim <= 64)
      return exact && head_dim == 64 ? go(attention_kernel<kF16, 2, true>)
                                     : go(attention_kernel<kF16, 2, false>);
    if (head_dim <= 128)
      return exact && head_dim == 128 ? go(attention_kernel<kF16, 4, true>)
                                      : go(attention_kernel<kF16, 4, false>);
    if (head_dim <= 256)
      return exact && head_dim == 256 ? go(attention_kernel<kF16, 8, true>)
                                      : go(attention_kernel<kF16, 8, false>);
    if (exact && head_dim == 512) return go(attention_kernel<kF16, 16, true>);
    go(attention_kernel<kF16, 16, false>);
  };
  if (f16)
    pick(std::true_type{});
  else
    pick(std::false_type{});
}

float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

}  // namespace

RopeConsts rope_consts(const RopeParams& p) {
  RopeConsts rc{};
  rc.n_rot = p.n_rot;
  rc.neox = p.layout == RopeLayout::kNeox;
  rc.theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  rc.freq_scale = p.freq_scale;
  rc.ext_factor = p.ext_factor;
  rc.mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) {
    rc.low =
        std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    rc.high = std::min(static_cast<float>(p.n_rot - 1),
                       std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
    rc.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  }
  return rc;
}

namespace {

const AttnSeq* seq_table(const Tensor& seqs, const AttnParams& p) {
  T9_CHECK(seqs.type == GgmlType::I32 && seqs.ne[0] == 4 && seqs.n_rows() == p.n_seqs &&
               seqs.is_contiguous(),
           "seqs must be I32 [n_seqs={}, 4]", p.n_seqs);
  return reinterpret_cast<const AttnSeq*>(base_ptr(seqs));
}

void check_cache(const Tensor& c, const AttnParams& p, const char* what) {
  T9_CHECK(c.type == GgmlType::F16 || c.type == GgmlType::F32, "{} must be F16 or F32", what);
  T9_CHECK(c.ne[0] == p.head_dim && c.ne[1] == p.n_kv_head && c.is_contiguous(),
           "{} must be [slots, n_kv_head={}, head_dim={}]", what, p.n_kv_head, p.head_dim);
  T9_CHECK(p.block_size > 0 && c.ne[2] % p.block_size == 0, "{}: slots not whole blocks", what);
}

KvGeom kv_geom(const Tensor& cache, const Tensor& block_tables, const AttnParams& p) {
  T9_CHECK(block_tables.type == GgmlType::I32 && block_tables.is_contiguous(),
           "block_tables must be contiguous I32");
  return {p.n_kv_head,
          p.head_dim,
          p.block_size,
          block_tables.n_elements(),
          cache.ne[2],
          static_cast<int64_t>(cache.nb[1]),
          static_cast<int64_t>(cache.nb[2])};
}

// write_kv's checks of its arguments, and the kernels' view of the store (write_kv_kernel's, or
// qk_norm_rope_kernel's KvStore). k_cache null when nothing is stored (no rows or sequences).
KvStore kv_store(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                 const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                 unsigned* err) {
  check_cache(k_cache, p, "k_cache");
  check_cache(v_cache, p, "v_cache");
  T9_CHECK(k_cache.type == v_cache.type, "write_kv: k and v pools differ in type");
  check_f32_rows(k, "write_kv k");
  check_f32_rows(v, "write_kv v");
  T9_CHECK(k.ne[0] == p.head_dim && k.ne[1] == p.n_kv_head && v.ne == k.ne, "write_kv: k/v shape");
  KvStore st{};
  st.v = desc(v);
  st.k_cache = k.ne[2] == 0 || p.n_seqs == 0 ? nullptr : base_ptr(k_cache);
  st.v_cache = base_ptr(v_cache);
  st.seqs = seq_table(seqs, p);
  st.n_seqs = p.n_seqs;
  st.tables = reinterpret_cast<const int32_t*>(base_ptr(block_tables));
  st.g = kv_geom(k_cache, block_tables, p);
  st.f16 = k_cache.type == GgmlType::F16;
  st.err = err;
  return st;
}

}  // namespace
}  // namespace cuda

void CudaBackend::rope(const Tensor& x, const Tensor& positions, const RopeParams& p,
                       const Tensor& out) {
  T9_CUDA_PROF("rope");
  derived_->wrote(out);
  cuda::check_f32_rows(x, "rope x");
  cuda::check_f32_rows(out, "rope out");
  cuda::check_same_shape(x, out, "rope");
  const int64_t head_dim = x.ne[0], n_tok = x.ne[2];
  T9_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim, "rope: n_rot {}", p.n_rot);
  T9_CHECK(positions.type == GgmlType::I32 && positions.n_elements() == n_tok &&
               positions.is_contiguous(),
           "rope: positions must be I32 [{}]", n_tok);
  T9_CHECK(x.ne[3] == 1, "rope: x must be [n_tokens, n_heads, head_dim]");
  if (x.n_rows() == 0) return;
  stream_->launch(cuda::rope_kernel, static_cast<unsigned>(x.n_rows()), 64, 0, cuda::desc(x),
                  reinterpret_cast<const int32_t*>(cuda::base_ptr(positions)), cuda::rope_consts(p),
                  cuda::desc(out));
}

void CudaBackend::qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm,
                               const Tensor& k_norm, float eps, float weight_bias,
                               const Tensor& positions, const RopeParams& p, const KvWrite* kv,
                               const Tensor* q_from) {
  const int64_t head_dim = q.ne[0], n_tok = q.ne[2];
  // One warp per row needs rows of at most 256 (rms_norm's warp kernel too: the same bits) and
  // a norm on both or neither. q_from: read in place of q (its rows are whole head rows); it
  // must not overlap q, whose rows the kernel writes while others read.
  // TEMPO9_CUDA_Q_FROM=0 (read once): q_from copied by its own launch first (A/B runs).
  static const bool q_from_off = cuda::env_off("TEMPO9_CUDA_Q_FROM");
  if (!fuse_parts_ || head_dim > cuda::kQkRowMax || q_norm.valid() != k_norm.valid() ||
      (q_from != nullptr &&
       (q_from_off || q_from->type != GgmlType::F32 || q_from->ne != q.ne || q_from->nb[0] != 4 ||
        cuda::byte_span(*q_from).overlaps(cuda::byte_span(q)))))
    return Backend::qk_norm_rope(q, k, q_norm, k_norm, eps, weight_bias, positions, p, kv, q_from);
  T9_CUDA_PROF(kv != nullptr ? "qk_norm_rope_kv" : "qk_norm_rope");
  derived_->wrote(q);
  derived_->wrote(k);
  for (const Tensor* t : {&q, &k}) {
    cuda::check_f32_rows(*t, "qk_norm_rope q/k");
    T9_CHECK(t->ne[0] == head_dim && t->ne[2] == n_tok && t->ne[3] == 1 && t->is_contiguous(),
             "qk_norm_rope: q and k must be contiguous [n_tokens, heads, {}]", head_dim);
  }
  for (const Tensor* w : {&q_norm, &k_norm}) {
    if (w->valid())
      T9_CHECK(w->type == GgmlType::F32 && w->n_elements() == head_dim && w->is_contiguous(),
               "qk_norm_rope: norm weights must be F32 [{}]", head_dim);
  }
  T9_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim, "rope: n_rot {}", p.n_rot);
  T9_CHECK(positions.type == GgmlType::I32 && positions.n_elements() == n_tok &&
               positions.is_contiguous(),
           "rope: positions must be I32 [{}]", n_tok);
  cuda::KvStore st{};
  if (kv != nullptr) {  // k's rows are stored as they are rotated, then v's
    derived_->wrote(kv->k_cache);
    derived_->wrote(kv->v_cache);
    st = cuda::kv_store(k, kv->v, kv->k_cache, kv->v_cache, kv->seqs, kv->block_tables, kv->p,
                        err_word_);
  }
  const int64_t rows = q.n_rows() + k.n_rows() * (st.k_cache != nullptr ? 2 : 1);
  if (rows == 0) return;
  const auto* wq =
      q_norm.valid() ? reinterpret_cast<const float*>(cuda::base_ptr(q_norm)) : nullptr;
  const auto* wk =
      k_norm.valid() ? reinterpret_cast<const float*>(cuda::base_ptr(k_norm)) : nullptr;
  stream_->launch(
      cuda::qk_norm_rope_kernel, cuda::grid_1d(rows, cuda::kQkWarps), cuda::kQkWarps * 32, 0,
      cuda::desc(q), cuda::desc(q_from != nullptr ? *q_from : q), cuda::desc(k), wq, wk,
      q_norm.valid(), eps, weight_bias, reinterpret_cast<const int32_t*>(cuda::base_ptr(positions)),
      cuda::rope_consts(p), st);
}

void CudaBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& k_cache,
                           const Tensor& v_cache, const Tensor& seqs, const Tensor& block_tables,
                           const AttnParams& p) {
  T9_CUDA_PROF("write_kv");
  derived_->wrote(k_cache);
  derived_->wrote(v_cache);
  const cuda::KvStore st = cuda::kv_store(k, v, k_cache, v_cache, seqs, block_tables, p, err_word_);
  if (st.k_cache == nullptr) return;
  const unsigned blocks = static_cast<unsigned>(k.ne[2]);
  // Four elements per access: 16-byte k/v rows and 8- (F16) or 16-byte (F32) cache rows.
  const auto aligned = [](const void* ptr, std::initializer_list<size_t> strides, size_t a) {
    bool ok = reinterpret_cast<uintptr_t>(ptr) % a == 0;
    for (const size_t stride : strides) ok = ok && stride % a == 0;
    return ok;
  };
  const size_t ca = st.f16 ? 8 : 16;
  const bool vec = p.head_dim % 4 == 0 && aligned(cuda::base_ptr(k), {k.nb[1], k.nb[2]}, 16) &&
                   aligned(cuda::base_ptr(v), {v.nb[1], v.nb[2]}, 16) &&
                   aligned(cuda::base_ptr(k_cache),
                           {static_cast<size_t>(st.g.nb1), static_cast<size_t>(st.g.nb2)}, ca) &&
                   aligned(cuda::base_ptr(v_cache), {}, ca);
  const int n4 = static_cast<int>(p.n_kv_head * p.head_dim / 4);
  const int threads = vec ? std::min(256, (n4 + 31) / 32 * 32) : 128;
  const auto go = [&](auto kernel) {
    stream_->launch(kernel, blocks, threads, 0, cuda::desc(k), st.v, st.k_cache, st.v_cache,
                    st.seqs, st.n_seqs, st.tables, st.g, st.err);
  };
  if (st.f16)
    vec ? go(cuda::write_kv_kernel<true, true>) : go(cuda::write_kv_kernel<true, false>);
  else
    vec ? go(cuda::write_kv_kernel<false, true>) : go(cuda::write_kv_kernel<false, false>);
}

void CudaBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                            const Tensor& out) {
  attention_with(q, k_cache, v_cache, seqs, block_tables, p, nullptr, out);
}

// TEMPO9_CUDA_FUSE_GATE=0 (read once): attention then mul_sigmoid (A/B runs; the same bits).
void CudaBackend::gated_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                  const Tensor& seqs, const Tensor& block_tables,
                                  const AttnParams& p, const Tensor& gate, const Tensor& out) {
  static const bool off = cuda::env_off("TEMPO9_CUDA_FUSE_GATE");
  if (off || !attention_with(q, k_cache, v_cache, seqs, block_tables, p, &gate, out))
    Backend::gated_attention(q, k_cache, v_cache, seqs, block_tables, p, gate, out);
}

namespace cuda {
namespace {

bool pools_aligned(const Tensor& k_cache, const Tensor& v_cache) {
  return (reinterpret_cast<uintptr_t>(base_ptr(k_cache)) |
          reinterpret_cast<uintptr_t>(base_ptr(v_cache))) %
             16 ==
         0;
}

// Whether the tensor-core kernels serve a call on these pools (F16, 16-byte aligned) and shape.
bool flash_serves(const Tensor& k_cache, const Tensor& v_cache, const AttnParams& p) {
  return flash_attention_fits(k_cache.type == GgmlType::F16 && pools_aligned(k_cache, v_cache),
                              p.head_dim, p.n_head, p.n_kv_head);
}

// Whether the kernels' output store takes this gate: float2 pairs of whole head rows,
// [n, n_head, head_dim] like out, not overlapping it.
bool gate_fits(const Tensor& gate, const Tensor& out) {
  return gate.type == GgmlType::F32 && gate.ne == out.ne && gate.nb[0] == 4 &&
         gate.nb[1] % 8 == 0 && gate.nb[2] % 8 == 0 &&
         reinterpret_cast<uintptr_t>(base_ptr(gate)) % 8 == 0 &&
         !byte_span(gate).overlaps(byte_span(out));
}

}  // namespace
}  // namespace cuda

void CudaBackend::rope_attention(const RopeAttention& a) {
  static const bool off = cuda::env_off("TEMPO9_CUDA_ATTN_PREP");  // A/B runs; read once
  const AttnParams& p = a.kv.p;
  const Tensor& q = a.q;
  const Tensor& src = a.q_from != nullptr ? *a.q_from : q;
  // Decode rows (as many as sequences: each has one), the tensor-core kernel, head rows one warp
  // normalizes (qk_norm_rope_kernel's limit), norms on both or neither, q rows as qk_norm_rope
  // reads q_from, and a gate gated_attention's kernel takes.
  const bool fits =
      !off && fuse_parts_ && p.n_seqs > 0 && q.ne[2] == p.n_seqs && p.n_kv_head > 0 &&
      static_cast<int64_t>(p.n_seqs) * (p.n_head / p.n_kv_head) <= attn_prep_slots_ &&
      p.head_dim <= cuda::kQkRowMax && cuda::flash_serves(a.kv.k_cache, a.kv.v_cache, p) &&
      a.q_norm.valid() == a.k_norm.valid() && src.type == GgmlType::F32 && src.ne == q.ne &&
      src.nb[0] == 4 && a.k.type == GgmlType::F32 && a.k.is_contiguous() &&
      a.kv.v.type == GgmlType::F32 && a.kv.v.nb[0] == 4 && a.k.ne == a.kv.v.ne &&
      a.k.ne[0] == p.head_dim && a.k.ne[1] == p.n_kv_head && a.k.ne[2] == q.ne[2] &&
      a.positions.type == GgmlType::I32 && a.positions.n_elements() == q.ne[2] &&
      a.positions.is_contiguous() && a.rope.n_rot > 0 && a.rope.n_rot % 2 == 0 &&
      a.rope.n_rot <= p.head_dim && (a.gate == nullptr || cuda::gate_fits(*a.gate, a.out));
  if (!fits) return Backend::rope_attention(a);
  for (const Tensor* w : {&a.q_norm, &a.k_norm})
    if (w->valid())
      T9_CHECK(w->type == GgmlType::F32 && w->n_elements() == p.head_dim && w->is_contiguous(),
               "rope_attention: norm weights must be F32 [{}]", p.head_dim);
  derived_->wrote(a.kv.k_cache);
  derived_->wrote(a.kv.v_cache);
  cuda::FlashPrep prep;
  prep.q_from = cuda::desc(src);
  prep.k = cuda::desc(a.k);
  prep.v = cuda::desc(a.kv.v);
  prep.norm = a.q_norm.valid() ? 1 : 0;
  prep.wq = a.q_norm.valid() ? reinterpret_cast<const float*>(cuda::base_ptr(a.q_norm)) : nullptr;
  prep.wk = a.k_norm.valid() ? reinterpret_cast<const float*>(cuda::base_ptr(a.k_norm)) : nullptr;
  prep.eps = a.eps;
  prep.weight_bias = a.weight_bias;
  prep.positions = reinterpret_cast<const int32_t*>(cuda::base_ptr(a.positions));
  prep.rc = cuda::rope_consts(a.rope);
  const bool ran = attention_with(q, a.kv.k_cache, a.kv.v_cache, a.kv.seqs, a.kv.block_tables, p,
                                  a.gate, a.out, &prep);
  T9_CHECK(ran, "rope_attention: the checked call was refused");
  ++attn_preps_;
}

bool CudaBackend::attention_with(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                 const Tensor& seqs, const Tensor& block_tables,
                                 const AttnParams& p, const Tensor* gate, const Tensor& out,
                                 const cuda::FlashPrep* prep) {
  const bool aligned = cuda::pools_aligned(k_cache, v_cache);
  const bool f16 = k_cache.type == GgmlType::F16;
  const bool flash = cuda::flash_serves(k_cache, v_cache, p);
  if (gate != nullptr && (!flash || !cuda::gate_fits(*gate, out))) return false;
  T9_CUDA_PROF(fmt::format("{} rows {}", gate != nullptr ? "gated_attention" : "attention",
                           cuda::rows_bucket(q.ne[2])));
  derived_->wrote(out);
  cuda::check_cache(k_cache, p, "k_cache");
  cuda::check_cache(v_cache, p, "v_cache");
  T9_CHECK(k_cache.type == v_cache.type, "attention: k and v pools differ in type");
  cuda::check_f32_rows(q, "attention q");
  cuda::check_f32_rows(out, "attention out");
  cuda::check_same_shape(q, out, "attention");
  // Three dimensions: the kernels address q and out rows as (head, row) without a division.
  T9_CHECK(q.ne[0] == p.head_dim && q.ne[1] == p.n_head && q.ne[3] == 1,
           "attention: q must be [n, {}, {}]", p.n_head, p.head_dim);
  T9_CHECK(p.n_kv_head > 0 && p.n_head % p.n_kv_head == 0, "attention: n_head {} n_kv_head {}",
           p.n_head, p.n_kv_head);
  T9_CHECK(p.head_dim > 0 && p.head_dim <= cuda::kMaxHeadDim, "attention: head_dim {} above {}",
           p.head_dim, cuda::kMaxHeadDim);
  const AttnSeq* s = cuda::seq_table(seqs, p);
  const auto* tables = reinterpret_cast<const int32_t*>(cuda::base_ptr(block_tables));
  const cuda::KvGeom g = cuda::kv_geom(k_cache, block_tables, p);
  if (q.ne[2] == 0 || p.n_seqs == 0) return true;
  T9_CHECK(q.ne[2] <= 0x7fffffff && p.n_head <= 65535, "attention: launch grid");
  if (flash) {
    cuda::FlashArgs fa{};
    fa.q = cuda::desc(q);
    fa.out = cuda::desc(out);
    fa.k_cache = cuda::base_ptr(k_cache);
    fa.v_cache = cuda::base_ptr(v_cache);
    fa.seqs = s;
    fa.n_seqs = p.n_seqs;
    fa.tables = tables;
    fa.n_tables = g.n_tables;
    fa.n_slots = g.n_slots;
    fa.nb1 = g.nb1;
    fa.nb2 = g.nb2;
    fa.n_head = p.n_head;
    fa.n_kv_head = p.n_kv_head;
    fa.head_dim = p.head_dim;
    fa.block_size = p.block_size;
    fa.scale = p.scale;
    fa.softcap = p.softcap;
    fa.window = p.sliding_window;
    fa.err = err_word_;
    // The output projection's rounding of out, written with it (DerivedCache).
    const cuda::RoundedOut ro = derived_->produce(out, codes_scratch_, *stream_);
    fa.out_q = ro.xq;
    fa.out_b = ro.xb;
    if (gate != nullptr) fa.gate = cuda::desc(*gate);
    if (prep != nullptr) fa.prep = *prep;
    const cuda::FlashLaunch fl = cuda::flash_attention(
        fa, q.ne[2], p.max_ctx,
        {attn_fold_rows_, attn_row_warps_, attn_row_chunk_, attn_row_chunk_one_}, attn_scratch_,
        attn_counters_, *stream_);
    attn_kernel_folds_ += fl.folded ? 1 : 0;
    attn_row_launches_ += fl.row_warps ? 1 : 0;
    attn_chunk_launches_ += fl.row_chunk ? 1 : 0;
    return true;
  }
  T9_CHECK(prep == nullptr, "attention: q/k preparation needs the tensor-core kernel");
  const dim3 grid(static_cast<unsigned>(q.ne[2]), static_cast<unsigned>(p.n_head));
  const dim3 grid_split(grid.x, grid.y, cuda::kMaxSplits);
  auto* part = static_cast<float*>(attn_scratch_.reserve(
      static_cast<size_t>(q.ne[2]) * p.n_head * cuda::kMaxSplits * (p.head_dim + 2) * 4, *stream_));
  cuda::launch_attention(f16, p.head_dim, aligned, grid_split, *stream_, cuda::desc(q),
                         cuda::base_ptr(k_cache), cuda::base_ptr(v_cache), s, p.n_seqs, tables, g,
                         p.n_head, p.scale, p.softcap, p.sliding_window, part, err_word_);
  stream_->launch(cuda::attention_combine_kernel, grid, cuda::kAttnThreads, 0, part, s, p.n_seqs,
                  static_cast<int>(q.ne[2]), p.n_head, p.head_dim, cuda::desc(out), err_word_);
  return true;
}

}  // namespace t9
