// matmul_id's device routes (contract in cuda_moe_gemv.cuh): the one-row sliced GEMV over
// (row block, pair) for up to moe_device_pairs() pairs, and for more a stable counting sort by
// expert on the device followed by one tensor-core launch over every expert's row tiles. Both
// give each row the bits of a plain matmul of that row with its expert (rule 7).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_moe_gemv.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

// matmul_id's grouping on the device, one block: a stable counting sort of the m (token, rank)
// pairs by expert. Outputs expert_first / tile_first (exclusive prefix sums of each expert's
// pairs and of its launch tiles of tile_rows), and per sorted pair its x row (x_rows) and out
// row (y_rows); within an expert the pairs keep (token, rank) order. Thread e counts and places
// expert e's pairs by scanning all ids, which are staged through shared memory in chunks (every
// thread reads the same id at once: broadcasts). An id outside [0, n_expert) is flagged and its
// pair dropped (its out row is left as it was).
constexpr int kSortChunk = 4096;
__global__ void moe_sort_kernel(const int32_t* __restrict__ ids, int m, int n_expert, int k,
                                bool x_per_rank, int tile_rows, int32_t* __restrict__ expert_first,
                                int32_t* __restrict__ tile_first, int32_t* __restrict__ x_rows,
                                int32_t* __restrict__ y_rows, unsigned* err) {
  __shared__ int32_t chunk[kSortChunk];
  extern __shared__ int32_t count[];  // [n_expert]
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) count[e] = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int c0 = 0; c0 < m; c0 += kSortChunk) {
      const int n = min(kSortChunk, m - c0);
      __syncthreads();  // the previous chunk is read by every thread
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int32_t id = ids[c0 + i];
        if (pass == 0 && (id < 0 || id >= n_expert)) atomicOr(err, kErrMoeId);
        chunk[i] = id;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
        int c = count[e];
        for (int i = 0; i < n; ++i) {
          if (chunk[i] != e) continue;
          if (pass == 1) {
            const int r = c0 + i;
            x_rows[c] = x_per_rank ? r : r / k;
            y_rows[c] = r;
          }
          ++c;
        }
        count[e] = c;
      }
    }
    __syncthreads();
    if (pass == 0) {
      if (threadIdx.x == 0) {  // n_expert serial steps: small beside the scans
        int f = 0, t = 0;
        for (int e = 0; e < n_expert; ++e) {
          expert_first[e] = f, tile_first[e] = t;
          f += count[e];
          t += (count[e] + tile_rows - 1) / tile_rows;
          count[e] = expert_first[e];  // pass 1 places from here
        }
        expert_first[n_expert] = f, tile_first[n_expert] = t;
      }
      __syncthreads();
    }
  }
}

template <GgmlType T>
void run_id(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out,
            Scratch& scratch, unsigned* err, Stream& stream, const RoundedX* pre) {
  const int64_t n_in = w.ne[0];
  const auto [xq, xb] = pre != nullptr ? *pre : round_x(x, scratch, stream);
  SliceArgs s{reinterpret_cast<const uint8_t*>(base_ptr(w)),
              static_cast<int64_t>(w.nb[1]),
              w.ne[1],
              n_in,
              ids.n_elements(),
              xq,
              xb,
              desc(out),
              nullptr};
  s.ids = reinterpret_cast<const int32_t*>(base_ptr(ids));
  s.n_expert = w.ne[2];
  s.expert_bytes = static_cast<int64_t>(w.nb[2]);
  s.k = ids.ne[0];
  s.x_per_rank = x.ne[1] != 1;
  s.err = err;
  launch_slice_gemv<T>(s, stream);
}

template <GgmlType T>
void run_id_grouped(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out,
                    Scratch& scratch, unsigned* err, Stream& stream) {
  const int64_t n_in = w.ne[0], n_expert = w.ne[2], m = ids.n_elements();
  const int tile_rows = mma_grouped_tile_rows(m, n_expert);
  // Scratch: 2 (n_expert + 1) + 2 m int32 of grouping, then m rows of int8 codes, their ActBlocks.
  auto align = [](size_t b) { return (b + 255) & ~size_t{255}; };
  const size_t ib = align(static_cast<size_t>(2 * (n_expert + 1) + 2 * m) * 4);
  const size_t qb = align(static_cast<size_t>(m * n_in));
  const size_t bb = static_cast<size_t>(m * (n_in / 32)) * sizeof(ActBlock);
  auto* base = static_cast<uint8_t*>(scratch.reserve(ib + qb + bb, stream));
  auto* expert_first = reinterpret_cast<int32_t*>(base);
  int32_t* tile_first = expert_first + n_expert + 1;
  int32_t* x_rows = tile_first + n_expert + 1;
  int32_t* y_rows = x_rows + m;
  auto* xq = reinterpret_cast<int8_t*>(base + ib);
  auto* xb = reinterpret_cast<ActBlock*>(base + ib + qb);
  T9_CHECK(n_expert * 4 <= (48 << 10) - kSortChunk * 4, "matmul_id: {} experts", n_expert);
  stream.launch(moe_sort_kernel, 1, 256, static_cast<size_t>(n_expert) * 4,
                reinterpret_cast<const int32_t*>(base_ptr(ids)), static_cast<int>(m),
                static_cast<int>(n_expert), static_cast<int>(ids.ne[0]), x.ne[1] != 1, tile_rows,
                expert_first, tile_first, x_rows, y_rows, err);
  launch_round_rows(x, x_rows, m, xq, xb, stream);
  SliceArgs s{reinterpret_cast<const uint8_t*>(base_ptr(w)),
              static_cast<int64_t>(w.nb[1]),
              w.ne[1],
              n_in,
              m,
              xq,
              xb,
              desc(out),
              nullptr};
  s.n_expert = n_expert;
  s.expert_bytes = static_cast<int64_t>(w.nb[2]);
  s.expert_first = expert_first;
  s.tile_first = tile_first;
  s.y_rows = y_rows;
  launch_mma_grouped<T>(s, tile_rows, (m + tile_rows - 1) / tile_rows + n_expert, stream);
}

// Calls f(std::integral_constant<GgmlType, T>) for the sliced types (Q4_K, Q6_K, Q8_0) with
// 2-byte-aligned weights unless TEMPO9_CUDA_LEGACY_GEMV is set; false when it does not.
template <typename F>
bool with_sliced_type(const Tensor& w, F&& f) {
  static const bool legacy = std::getenv("TEMPO9_CUDA_LEGACY_GEMV") != nullptr;
  if (legacy || reinterpret_cast<uintptr_t>(base_ptr(w)) % 2 != 0) return false;
  switch (w.type) {
    case GgmlType::Q4_K:
      f(std::integral_constant<GgmlType, GgmlType::Q4_K>{});
      return true;
    case GgmlType::Q6_K:
      f(std::integral_constant<GgmlType, GgmlType::Q6_K>{});
      return true;
    case GgmlType::Q8_0:
      f(std::integral_constant<GgmlType, GgmlType::Q8_0>{});
      return true;
    default:
      return false;
  }
}

}  // namespace

bool launch_matmul_id_grouped(const Tensor& w, const Tensor& x, const Tensor& ids,
                              const Tensor& out, Scratch& scratch, unsigned* err, Stream& stream) {
  return with_sliced_type(
      w, [&](auto t) { run_id_grouped<decltype(t)::value>(w, x, ids, out, scratch, err, stream); });
}

bool launch_matmul_id_gemv(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out,
                           Scratch& scratch, unsigned* err, Stream& stream, const RoundedX* pre) {
  return with_sliced_type(
      w, [&](auto t) { run_id<decltype(t)::value>(w, x, ids, out, scratch, err, stream, pre); });
}

}  // namespace t9::cuda
