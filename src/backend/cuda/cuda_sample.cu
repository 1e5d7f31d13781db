// Backend::sample on the device: one block of 1024 threads per logits row decides the row's
// token with core/sampling.h's algorithm, so only 4 bytes a row come back (not 1 MB of a 248k
// vocabulary) and the host never sorts. Backend::argmax (batches that are all greedy) is here too,
// below: chunks of a row in parallel, then one warp per row.
//
// Per row (settings: a RowSampling; l_i = logit_i / temperature, IEEE-rounded like the host):
//   - temperature 0: the first index of the largest logit (rows without NaN: core/argmax.h).
//   - no cut (no top-k, top-p 1, min-p 0): p_i = float(expf(l_i - max) / Z) over the whole
//     vocabulary (Z: the double sum of the float exps), walked in token order; each thread owns a
//     contiguous slice and an exclusive scan of the slice sums gives its start.
//   - cuts: the M best (M = top-k, or the best kMaxKept when only top-p / min-p cut) by a radix
//     select on order-preserving keys of l (computed once into scratch with the division, then
//     four 8-bit digit passes over the keys), ties at the threshold taken lowest token first,
//     then a bitonic sort in shared memory (larger l first, then lower id: the host's order).
//     Softmax (over the kept top-k, else over the vocabulary), top-p by a scan, renormalize, min-p,
//     renormalize, the draw by a scan: one candidate per thread.
//   - -1 where the kept set needs more than kMaxKept candidates (a top-k above it; top-p not
//     reached or min-p still passing at the kMaxKept-th): the caller samples that row on the host.
// The arithmetic is the host's except the order of the double sums and expf (CUDA: <= 2 ulp)
// for std::exp, so a draw within a few float ulps of a boundary between two candidates may pick
// the neighbour; tests/ops/cuda_sample_test.cpp requires every differing draw to be such a
// neighbour within 1e-5 of the boundary (run 48: none differed).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_profile.cuh"
#include "core/sampling.h"

namespace t9 {
namespace cuda {
namespace {

constexpr int kSampleThreads = 1024;
constexpr int kMaxKept = 1024;  // candidates the cuts may read: one per thread

// Larger float -> larger key; -0 as +0 (the host compares them equal) and NaN as -inf.
__device__ __forceinline__ uint32_t order_key(float v) {
  return float_order_key(v != v ? -INFINITY : v);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) != 0 ? (k & 0x7fffffffu) : ~k);
}

// Block-wide inclusive prefix sum (blockDim.x == kSampleThreads); `tot` holds 32 doubles.
__device__ double block_scan(double v, double* tot) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += t;
  }
  __syncthreads();  // tot may still be read by a previous call
  if (lane == 31) tot[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = tot[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double t = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += t;
    }
    tot[lane] = w;
  }
  __syncthreads();
  return warp > 0 ? v + tot[warp - 1] : v;
}

// Block-wide min / max of an int (every thread gets it); `cell` is one shared int. INT_MAX
// (min) and INT_MIN (max) mean "none" and come back when every thread passes them.
__device__ int block_min_int(int v, int* cell) {
  __syncthreads();
  if (threadIdx.x == 0) *cell = INT_MAX;
  __syncthreads();
  if (v != INT_MAX) atomicMin(cell, v);
  __syncthreads();
  return *cell;
}
// ~ reverses the order of int32 and maps INT_MIN to INT_MAX, so the max is the min of the ~s.
__device__ int block_max_int(int v, int* cell) {
  return ~block_min_int(~v, cell);
}

// Candidate (ka, ia) ranks before (kb, ib): larger l, then lower token id.
__device__ __forceinline__ bool before(uint32_t ka, int ia, uint32_t kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

struct Smem {
  uint32_t keys[kMaxKept];
  int32_t ids[kMaxKept];
  uint32_t hist[256];
  double dtot[32];
  float fscr[32];
  int cell;
  int sel[3];
  float p0;
};

// The index (into the row) of the first draw-order candidate whose running sum passes u, with
// the host's fallbacks, for candidates held one per thread (index i < kept, probability pi).
__device__ int draw_sorted(float pi, int kept, double u, Smem& s) {
  const int i = threadIdx.x;
  const double cum = block_scan(i < kept ? static_cast<double>(pi) : 0.0, s.dtot);
  const bool live = i < kept && pi > 0.0f;
  int pick = block_min_int(live && u < cum ? i : INT_MAX, &s.cell);
  if (pick == INT_MAX) pick = block_max_int(live ? i : INT_MIN, &s.cell);
  if (pick == INT_MIN) pick = 0;  // every p is 0: the first candidate
  return s.ids[pick];
}

// The M best of the row's keys (M <= kMaxKept), sorted, into s.keys / s.ids [0, M).
__device__ void select_best(const uint32_t* keys, int n, int m, Smem& s) {
  const int tid = threadIdx.x;
  uint32_t prefix = 0, mask = 0;
  int need = m, n_at = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    __syncthreads();  // the previous digit's reads of hist and sel are done
    if (tid < 256) s.hist[tid] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += kSampleThreads) {
      const uint32_t k = keys[i];
      if ((k & mask) == prefix) atomicAdd(&s.hist[(k >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {  // the digit holding the need-th largest, counting from the top
      uint32_t cum = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (cum + s.hist[d] >= static_cast<uint32_t>(need)) break;
        cum += s.hist[d];
      }
      s.sel[0] = d, s.sel[1] = need - static_cast<int>(cum), s.sel[2] = static_cast<int>(s.hist[d]);
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(s.sel[0]) << shift;
    mask |= 0xffu << shift;
    need = s.sel[1], n_at = s.sel[2];
  }
  // prefix is the m-th largest key: every larger key is kept, and `need` of the n_at equal ones,
  // lowest ids first.
  const int n_gt = m - need;
  const bool all_ties = n_at == need;
  __syncthreads();
  if (tid == 0) s.cell = 0;
  __syncthreads();
  for (int i = tid; i < n; i += kSampleThreads) {
    const uint32_t k = keys[i];
    if (k > prefix || (all_ties && k == prefix)) {
      const int slot = atomicAdd(&s.cell, 1);
      s.keys[slot] = k, s.ids[slot] = i;
    }
  }
  if (!all_ties) {  // ties in token order: each thread counts its contiguous slice, then writes
    const int seg = (n + kSampleThreads - 1) / kSampleThreads, b = min(n, tid * seg),
              e = min(n, b + seg);
    int mine = 0;
    for (int i = b; i < e; ++i) mine += keys[i] == prefix;
    int rank = static_cast<int>(block_scan(mine, s.dtot)) - mine;
    for (int i = b; i < e && rank < need; ++i) {
      if (keys[i] != prefix) continue;
      s.keys[n_gt + rank] = prefix, s.ids[n_gt + rank] = i;
      ++rank;
    }
  }
  // Bitonic sort of the next power of two >= m (padding ranks last).
  int p2 = 1;
  while (p2 < m) p2 <<= 1;
  __syncthreads();
  if (tid >= m && tid < p2) s.keys[tid] = 0, s.ids[tid] = INT_MAX;
  for (int k = 2; k <= p2; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      __syncthreads();
      const int i = tid, o = i ^ j;
      if (i < p2 && o > i) {
        const uint32_t ka = s.keys[i], kb = s.keys[o];
        const int ia = s.ids[i], ib = s.ids[o];
        const bool first_half = (i & k) == 0;  // this run ascends in "before" order
        if (first_half ? before(kb, ib, ka, ia) : before(ka, ia, kb, ib))
          s.keys[i] = kb, s.keys[o] = ka, s.ids[i] = ib, s.ids[o] = ia;
      }
    }
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(TensorDesc x, const RowSampling* __restrict__ params,
                  uint32_t* __restrict__ keys_all, int32_t* __restrict__ out) {
  pdl_enter();
  __shared__ Smem s;
  const int64_t r = blockIdx.x;
  const RowSampling p = params[r];
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  const int n = static_cast<int>(x.ne0), tid = threadIdx.x;
  const float temp = p.temperature;

  if (temp == 0.0f) {  // argmax: the largest non-NaN value, its first index
    float v = -INFINITY;
    for (int i = tid; i < n; i += kSampleThreads) v = fmaxf(v, xr[i]);
    v = block_max(v, s.fscr);
    int first = INT_MAX;
    for (int i = tid; i < n && first == INT_MAX; i += kSampleThreads)
      if (xr[i] == v) first = i;
    first = block_min_int(first, &s.cell);
    if (tid == 0) out[r] = first == INT_MAX ? 0 : first;
    return;
  }
  const bool cut_k = p.top_k > 0 && p.top_k < n;
  const bool cut_pm = p.top_p < 1.0f || p.min_p > 0.0f;
  if (cut_k && p.top_k > kMaxKept) {
    if (tid == 0) out[r] = -1;
    return;
  }
  // One pass computes l and its key for every token (the later passes read only the keys), and
  // the vocabulary's softmax without top-k: max over l (0 when not finite, as the host) and Z,
  // the double sum of the float exps.
  uint32_t* keys = keys_all + r * n;
  float v = -INFINITY;
  for (int i = tid; i < n; i += kSampleThreads) {
    const float l = __fdiv_rn(xr[i], temp);
    keys[i] = order_key(l);
    v = fmaxf(v, l);
  }
  float mx = 0.0f;
  double z = 0.0;
  if (!cut_k) {
    mx = block_max(v, s.fscr);
    if (!isfinite(mx)) mx = 0.0f;
    double part = 0.0;
    for (int i = tid; i < n; i += kSampleThreads) part += expf(key_value(keys[i]) - mx);
    z = block_sum(part, s.dtot);
  }
  __syncthreads();  // every key is written before threads read others' (contiguous slices)
  auto prob = [&](float l) {  // the host's normalize(): float(e / sum), e unchanged when sum <= 0
    const float e = expf(l - mx);
    return z > 0.0 ? static_cast<float>(static_cast<double>(e) / z) : e;
  };

  if (!cut_k && !cut_pm) {  // token order over the whole vocabulary
    const int seg = (n + kSampleThreads - 1) / kSampleThreads, b = min(n, tid * seg),
              e = min(n, b + seg);
    double mine = 0.0;
    for (int i = b; i < e; ++i) mine += prob(key_value(keys[i]));
    double cum = block_scan(mine, s.dtot) - mine;
    int hit = INT_MAX, last = INT_MIN;
    for (int i = b; i < e; ++i) {
      const float pi = prob(key_value(keys[i]));
      if (pi <= 0.0f) continue;
      last = i;
      cum += pi;
      if (p.u < cum) {
        hit = i;
        break;
      }
    }
    int pick = block_min_int(hit, &s.cell);
    if (pick == INT_MAX) pick = block_max_int(last, &s.cell);
    if (tid == 0) out[r] = pick == INT_MIN ? 0 : pick;
    return;
  }

  const int m = cut_k ? p.top_k : min(n, kMaxKept);
  select_best(keys, n, m, s);
  const int i = tid;
  const float li = i < m ? key_value(s.keys[i]) : -INFINITY;
  float pi;
  if (cut_k) {  // softmax over the kept top-k
    float m0 = key_value(s.keys[0]);
    if (!isfinite(m0)) m0 = 0.0f;
    const float e = i < m ? expf(li - m0) : 0.0f;
    const double sum = block_sum(static_cast<double>(e), s.dtot);
    pi = sum > 0.0 ? static_cast<float>(static_cast<double>(e) / sum) : e;
  } else {
    pi = i < m ? prob(li) : 0.0f;
  }
  int kept = m;
  const bool partial = !cut_k && m < n;  // more candidates exist beyond the m read
  if (p.top_p < 1.0f) {
    const double cum = block_scan(i < kept ? static_cast<double>(pi) : 0.0, s.dtot);
    const double bar = static_cast<double>(p.top_p) - 1e-6;
    const int first = block_min_int(i < kept && cum >= bar ? i : INT_MAX, &s.cell);
    if (first == INT_MAX && partial) {
      if (tid == 0) out[r] = -1;
      return;
    }
    kept = first == INT_MAX ? kept : first + 1;
    const double sum = block_sum(i < kept ? static_cast<double>(pi) : 0.0, s.dtot);
    if (sum > 0.0 && i < kept) pi = static_cast<float>(static_cast<double>(pi) / sum);
  }
  if (p.min_p > 0.0f) {
    __syncthreads();
    if (tid == 0) s.p0 = pi;
    __syncthreads();
    const float threshold = p.min_p * s.p0;
    const int fail = block_min_int(i >= 1 && i < kept && pi < threshold ? i : INT_MAX, &s.cell);
    if (fail == INT_MAX && kept == m && partial) {
      if (tid == 0) out[r] = -1;
      return;
    }
    kept = min(kept, fail);
    const double sum = block_sum(i < kept ? static_cast<double>(pi) : 0.0, s.dtot);
    if (sum > 0.0 && i < kept) pi = static_cast<float>(static_cast<double>(pi) / sum);
  }
  const int token = draw_sorted(pi, kept, p.u, s);
  if (tid == 0) out[r] = token;
}

// Backend::logprobs: one block of 1024 threads per row (a few per decode step, against a
// vocabulary row copied to the host and reduced there). The host's formula, lse = max +
// log(sum of exp((double) l - max)), with the double sum in the block's order and CUDA's exp /
// log (within an ulp of glibc's), so lse can differ from core/sampling.h's row_logprobs by a
// float ulp where log(sum) sits at a rounding boundary; the token's l - lse; the k best by
// select_best over the raw logits' keys (the sampler's radix select and bitonic sort): the
// host's order, ties lower id first, exactly.
__global__ void __launch_bounds__(kSampleThreads)
    logprobs_kernel(TensorDesc x, const int32_t* __restrict__ tokens, int k,
                    uint32_t* __restrict__ keys_all, TensorDesc out, int32_t* __restrict__ ids) {
  pdl_enter();
  __shared__ Smem s;
  const int64_t r = blockIdx.x;
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  const int n = static_cast<int>(x.ne0), tid = threadIdx.x;
  uint32_t* keys = k > 0 ? keys_all + r * n : nullptr;  // no scratch without a top list
  float v = -INFINITY;
  for (int i = tid; i < n; i += kSampleThreads) {
    const float l = xr[i];
    if (k > 0) keys[i] = order_key(l);
    v = fmaxf(v, l);
  }
  const float mx = block_max(v, s.fscr);
  double part = 0.0;
  for (int i = tid; i < n; i += kSampleThreads)
    part += exp(static_cast<double>(xr[i]) - static_cast<double>(mx));
  const double sum = block_sum(part, s.dtot);
  const float lse = mx + static_cast<float>(log(sum));
  float* o = reinterpret_cast<float*>(out.row(r));
  if (tid == 0) {
    const int t = tokens[r];
    o[0] = t >= 0 && t < n ? xr[t] - lse : NAN;
  }
  if (k == 0) return;
  select_best(keys, n, k, s);  // starts with a barrier: every key is written
  if (tid < k) {
    ids[r * k + tid] = s.ids[tid];
    o[1 + tid] = xr[s.ids[tid]] - lse;
  }
}

// Greedy argmax (Backend::argmax): the first index of the largest value, NaN never winning, 0 for
// a row of only NaN. One block per 4096-element chunk of a row writes its best as one 64-bit key,
// then one warp per row takes the largest key. A key orders by value (order_key; NaN below every
// number) and, among equal values, by lower index (the low word holds ~index), so the max over
// the keys is exact in any order: no ties to break, the same id however the chunks fall. One
// block per row (the old form) spent ~35 us on a 248k-entry row, most of it load latency.
constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxChunk = 4096;  // elements per block: four float4 loads in flight per thread

__device__ __forceinline__ uint64_t argmax_key(float v, int64_t i) {
  const uint64_t k = v != v ? 0u : order_key(v);
  return (k << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}

// grid (chunks, rows); part[r * chunks + c] = chunk c's best key of row r.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_chunks_kernel(TensorDesc x, uint64_t* __restrict__ part) {
  pdl_enter();
  __shared__ uint64_t warp_best[kArgmaxThreads / 32];
  const int64_t r = blockIdx.y, lo = static_cast<int64_t>(blockIdx.x) * kArgmaxChunk;
  const int64_t hi = min(x.ne0, lo + kArgmaxChunk);
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  uint64_t best = 0;
  if (reinterpret_cast<uintptr_t>(xr) % 16 == 0) {  // lo is a multiple of 4: xr + lo is aligned
    float4 v[kArgmaxChunk / (4 * kArgmaxThreads)];
#pragma unroll
    for (int k = 0; k < kArgmaxChunk / (4 * kArgmaxThreads); ++k) {
      const int64_t i = lo + 4 * (threadIdx.x + k * kArgmaxThreads);
      v[k] =
          i + 3 < hi ? *reinterpret_cast<const float4*>(xr + i) : make_float4(NAN, NAN, NAN, NAN);
    }
#pragma unroll
    for (int k = 0; k < kArgmaxChunk / (4 * kArgmaxThreads); ++k) {
      const int64_t i = lo + 4 * (threadIdx.x + k * kArgmaxThreads);
      if (i + 3 < hi) {
        const float e[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) best = max(best, argmax_key(e[j], i + j));
      } else {
        for (int64_t j = i; j < hi; ++j) best = max(best, argmax_key(xr[j], j));  // the tail
      }
    }
  } else {
    for (int64_t i = lo + threadIdx.x; i < hi; i += kArgmaxThreads)
      best = max(best, argmax_key(xr[i], i));
  }
  best = warp_max(best);
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) best = max(best, warp_best[w]);
    part[r * gridDim.x + blockIdx.x] = best;
  }
}

// One warp per row over its chunks' keys.
__global__ void argmax_rows_kernel(const uint64_t* __restrict__ part, int chunks, int64_t rows,
                                   int32_t* __restrict__ out) {
  pdl_enter();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // uniform per warp
  const int lane = threadIdx.x % 32;
  uint64_t best = 0;
  for (int c = lane; c < chunks; c += 32) best = max(best, part[r * chunks + c]);
  best = warp_max(best);
  if (lane == 0)
    out[r] =
        (best >> 32) == 0 ? 0 : static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(best));
}

// Row r's pending token (-1: none): pending entries are few (at most one per logit row of the
// call), read by every thread from L1.
__device__ __forceinline__ int pending_of_row(const PendingEdit* __restrict__ pending,
                                              int n_pending, int row) {
  for (int i = 0; i < n_pending; ++i)
    if (pending[i].row == row) return i;
  return -1;
}

// Threads [0, n): one edit each (at most one per (row, token)); threads [n, n + n_pending): one
// pending token each, which edits its logit only when its row has no edit of that token (that
// edit's thread applies pending_edit then), so no two threads write one logit. Padding rows < 0
// and out-of-range entries leave the logits alone (the engine makes only valid ones; the CPU op
// checks).
__global__ void adjust_logits_kernel(TensorDesc x, const LogitEdit* __restrict__ edits, int64_t n,
                                     const PendingEdit* __restrict__ pending, int n_pending,
                                     const int32_t* __restrict__ ids, int64_t n_ids) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  auto token_of = [&](const PendingEdit& p) {
    return p.input >= 0 && p.input < n_ids ? ids[p.input] : -1;
  };
  if (i < n) {
    const LogitEdit e = edits[i];
    if (e.row < 0 || e.row >= x.n_rows() || e.token < 0 || e.token >= x.ne0) return;
    float* l = reinterpret_cast<float*>(x.row(e.row)) + e.token;
    const int pi = n_pending > 0 ? pending_of_row(pending, n_pending, e.row) : -1;
    *l = pi >= 0 && token_of(pending[pi]) == e.token
             ? edited_logit(*l, pending_edit(&e, pending[pi]))
             : edited_logit(*l, e);
    return;
  }
  if (i >= n + n_pending) return;
  const PendingEdit p = pending[i - n];
  const int32_t t = token_of(p);
  if (p.row < 0 || p.row >= x.n_rows() || t < 0 || t >= x.ne0) return;
  // The row's edit of t, if any, by binary search over (row, token) (padding rows sort last).
  auto key = [](int32_t row, int32_t token) {
    return (static_cast<int64_t>(row < 0 ? INT_MAX : row) << 32) | static_cast<uint32_t>(token);
  };
  const int64_t want = key(p.row, t);
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (key(edits[mid].row, edits[mid].token) < want)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < n && key(edits[lo].row, edits[lo].token) == want) return;  // that edit's thread
  float* l = reinterpret_cast<float*>(x.row(p.row)) + t;
  *l = edited_logit(*l, pending_edit(nullptr, p));
}

}  // namespace
}  // namespace cuda

void CudaBackend::adjust_logits(const Tensor& logits, const Tensor& edits, const Tensor& pending,
                                const Tensor& ids) {
  T9_CUDA_PROF("adjust_logits");
  derived_->wrote(logits);
  cuda::check_f32_rows(logits, "adjust_logits logits");
  T9_CHECK(edits.type == GgmlType::I32 && edits.ne[0] == 8 && edits.is_contiguous(),
           "adjust_logits: edits must be I32 [n, 8]");
  int n_pending = 0;
  if (pending.valid()) {
    T9_CHECK(pending.type == GgmlType::I32 && pending.ne[0] == 4 && pending.is_contiguous(),
             "adjust_logits: pending must be I32 [n, 4]");
    T9_CHECK(ids.valid() && ids.type == GgmlType::I32 && ids.is_contiguous(),
             "adjust_logits: pending edits need the call's ids (I32)");
    n_pending = static_cast<int>(pending.n_rows());
  }
  const int64_t n = edits.n_rows();
  if (n + n_pending == 0) return;
  stream_->launch(
      cuda::adjust_logits_kernel, cuda::grid_1d(n + n_pending, 256), 256, 0, cuda::desc(logits),
      reinterpret_cast<const LogitEdit*>(cuda::base_ptr(edits)), n,
      n_pending > 0 ? reinterpret_cast<const PendingEdit*>(cuda::base_ptr(pending)) : nullptr,
      n_pending, n_pending > 0 ? reinterpret_cast<const int32_t*>(cuda::base_ptr(ids)) : nullptr,
      n_pending > 0 ? ids.n_elements() : int64_t{0});
}

void CudaBackend::argmax(const Tensor& logits, const Tensor& out) {
  T9_CUDA_PROF("argmax");
  cuda::check_f32_rows(logits, "argmax logits");
  T9_CHECK(out.type == GgmlType::I32 && out.n_elements() == logits.n_rows() && out.is_contiguous(),
           "argmax: out");
  T9_CHECK(logits.ne[0] < INT_MAX, "argmax: {} logits per row", logits.ne[0]);
  derived_->wrote(out);
  const int64_t rows = logits.n_rows();
  if (rows == 0) return;
  const int chunks =
      std::max(1, static_cast<int>((logits.ne[0] + cuda::kArgmaxChunk - 1) / cuda::kArgmaxChunk));
  T9_CHECK(rows <= 65535, "argmax: {} rows", rows);  // grid.y
  auto* part = static_cast<uint64_t*>(
      argmax_scratch_.reserve(static_cast<size_t>(rows * chunks) * sizeof(uint64_t), *stream_));
  stream_->launch(cuda::argmax_chunks_kernel,
                  dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)),
                  cuda::kArgmaxThreads, 0, cuda::desc(logits), part);
  stream_->launch(cuda::argmax_rows_kernel, cuda::grid_1d(rows, 4), 128, 0,
                  static_cast<const uint64_t*>(part), chunks, rows,
                  reinterpret_cast<int32_t*>(cuda::base_ptr(out)));
}

bool CudaBackend::settles(const RowSampling& s) const {
  if (s.temperature == 0.0f) return true;
  if (s.top_k > 0) return s.top_k <= cuda::kMaxKept;  // (a top-k past the vocabulary: m = n)
  return s.top_p >= 1.0f && s.min_p <= 0.0f;
}

void CudaBackend::logprobs(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                           const Tensor& ids) {
  T9_CUDA_PROF("logprobs");
  cuda::check_f32_rows(logits, "logprobs logits");
  cuda::check_f32_rows(out, "logprobs out");
  check_logprobs_args(logits, tokens, k, out, ids);
  const int64_t n = logits.n_rows();
  derived_->wrote(out);
  if (k > 0) derived_->wrote(ids);
  if (n == 0) return;
  auto* keys = static_cast<uint32_t*>(
      k == 0 ? nullptr
             : sample_scratch_.reserve(static_cast<size_t>(n * logits.ne[0]) * sizeof(uint32_t),
                                       *stream_));
  stream_->launch(cuda::logprobs_kernel, static_cast<unsigned>(n), cuda::kSampleThreads, 0,
                  cuda::desc(logits), reinterpret_cast<const int32_t*>(cuda::base_ptr(tokens)), k,
                  keys, cuda::desc(out),
                  k > 0 ? reinterpret_cast<int32_t*>(cuda::base_ptr(ids)) : nullptr);
}

void CudaBackend::sample(const Tensor& logits, const Tensor& params, const Tensor& out) {
  T9_CUDA_PROF("sample");
  derived_->wrote(out);
  cuda::check_f32_rows(logits, "sample logits");
  const int64_t n = logits.n_rows();
  T9_CHECK(params.type == GgmlType::I32 && params.ne[0] == 6 && params.n_rows() == n &&
               params.is_contiguous(),
           "sample: params must be I32 [{}, 6]", n);
  T9_CHECK(out.type == GgmlType::I32 && out.n_elements() == n && out.is_contiguous(),
           "sample: out");
  T9_CHECK(logits.ne[0] < INT_MAX, "sample: {} logits per row", logits.ne[0]);
  if (n == 0) return;
  auto* keys = static_cast<uint32_t*>(
      sample_scratch_.reserve(static_cast<size_t>(n * logits.ne[0]) * sizeof(uint32_t), *stream_));
  stream_->launch(cuda::sample_kernel, static_cast<unsigned>(n), cuda::kSampleThreads, 0,
                  cuda::desc(logits), reinterpret_cast<const RowSampling*>(cuda::base_ptr(params)),
                  keys, reinterpret_cast<int32_t*>(cuda::base_ptr(out)));
}

}  // namespace t9
