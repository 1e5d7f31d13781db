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

// matmul_id's grouping on the device, one block of kSortThreads: a stable counting sort of the m
// (token, rank) pairs by expert. Outputs expert_first / tile_first (exclusive prefix sums of
// each expert's pairs and of its launch tiles of tile_rows), and per sorted pair its token
// (x_rows: the x row when the ranks share x) and the pair itself (y_rows: its out row, and its x
// row when x is per rank); within an expert the pairs keep (token, rank) order. Pass 0
// counts with shared-memory atomics; pass 1 takes the pairs a chunk at a time in order: a pair's
// place is its expert's running start, plus that expert's pairs in earlier warps of the chunk
// (per-warp counts in shared memory), in its warp's earlier groups, and in the lanes before it
// in its group (__match_any_sync). An id outside [0, n_expert) is flagged and its pair dropped (its
// out row is left as it was). tile_expert[t] (max_tiles of them) is launch tile t's expert, -1 past
// the last: a grouped block reads its expert in one load (select_expert). Shared memory:
// (1 + kSortWarps) n_expert ints. A chunk is kSortGroups x kSortThreads pairs, warp w's the
// kSortGroups x 32 consecutive ones from kSortGroups 32 w (its groups of 32 in order): four
// groups a chunk cut a 2048-token step's sort (16384 pairs, 256 experts) from 64 chunks and
// their three barriers each to 16.
constexpr int kSortThreads = 256, kSortWarps = kSortThreads / 32, kSortGroups = 4;
struct SortOut {
  int32_t* expert_first;
  int32_t* tile_first;
  int32_t* tile_expert;  // null: not written
  int max_tiles;
  int32_t* x_rows;
  int32_t* y_rows;
};
__global__ void __launch_bounds__(kSortThreads)
    moe_sort_kernel(const int32_t* __restrict__ ids, int m, int n_expert, int k, int tile_rows,
                    SortOut out, unsigned* err) {
  int32_t* __restrict__ expert_first = out.expert_first;
  int32_t* __restrict__ tile_first = out.tile_first;
  int32_t* __restrict__ x_rows = out.x_rows;
  int32_t* __restrict__ y_rows = out.y_rows;
  pdl_enter();
  extern __shared__ int32_t sm[];
  int32_t* running = sm;            // [n_expert]: pass 0 counts, then each expert's next place
  int32_t* wcount = sm + n_expert;  // [kSortWarps][n_expert]: this chunk's pairs per warp
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = threadIdx.x; e < n_expert * (1 + kSortWarps); e += kSortThreads) sm[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += kSortThreads) {
    const int32_t id = ids[i];
    if (id < 0 || id >= n_expert)
      atomicOr(err, kErrMoeId);
    else
      atomicAdd(&running[id], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // n_expert serial steps: small beside the passes
    int f = 0, t = 0;
    for (int e = 0; e < n_expert; ++e) {
      const int c = running[e];
      expert_first[e] = f, tile_first[e] = t;
      running[e] = f;
      f += c;
      t += (c + tile_rows - 1) / tile_rows;
    }
    expert_first[n_expert] = f, tile_first[n_expert] = t;
  }
  __syncthreads();  // tile_first is visible to the block
  if (out.tile_expert != nullptr) {
    for (int e = threadIdx.x; e < n_expert; e += kSortThreads)
      for (int t = tile_first[e]; t < tile_first[e + 1]; ++t) out.tile_expert[t] = e;
    for (int t = tile_first[n_expert] + threadIdx.x; t < out.max_tiles; t += kSortThreads)
      out.tile_expert[t] = -1;
  }
  constexpr int kChunk = kSortGroups * kSortThreads;
  for (int c0 = 0; c0 < m; c0 += kChunk) {
    // Each pair's place among its expert's pairs of this warp's earlier groups and lanes; the
    // warp's running count per expert in wcount (read by every lane of an expert before its
    // first lane adds the group's count).
    int32_t id[kSortGroups], local[kSortGroups];
#pragma unroll
    for (int g = 0; g < kSortGroups; ++g) {
      const int i = c0 + kSortGroups * 32 * warp + 32 * g + lane;
      id[g] = i < m ? ids[i] : -1;
      if (id[g] >= n_expert) id[g] = -1;  // flagged in pass 0
      const unsigned same = __match_any_sync(0xffffffffu, id[g]);
      const int before = __popc(same & ((1u << lane) - 1));
      const int base = id[g] >= 0 ? wcount[warp * n_expert + id[g]] : 0;
      __syncwarp();
      local[g] = base + before;
      if (id[g] >= 0 && before == 0) wcount[warp * n_expert + id[g]] = base + __popc(same);
      __syncwarp();
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < kSortGroups; ++g) {
      if (id[g] < 0) continue;
      const int i = c0 + kSortGroups * 32 * warp + 32 * g + lane;
      int at = running[id[g]] + local[g];
      for (int w = 0; w < warp; ++w) at += wcount[w * n_expert + id[g]];
      x_rows[at] = i / k;
      y_rows[at] = i;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_expert; e += kSortThreads) {
      int add = 0;
      for (int w = 0; w < kSortWarps; ++w) {
        add += wcount[w * n_expert + e];
        wcount[w * n_expert + e] = 0;
      }
      running[e] += add;
    }
    __syncthreads();
  }
}

// The parts' weights as SliceArgs::parts (more than one, or plain rows: one launch for all; the
// first part's fields stand in for the plain call's). All parts have w's type and shape; part i's
// plain rows (n_plain of them) multiply by plain[i].w into plain[i].y.
void set_parts(SliceArgs& s, std::span<const FusedPart> parts, std::span<const FusedPart> plain,
               int64_t n_plain) {
  if (parts.size() < 2 && plain.empty()) return;
  for (size_t i = 0; i < parts.size(); ++i) {
    SlicePart& sp = s.parts.part[s.parts.n++];
    sp = slice_part(parts[i]);
    sp.bias = nullptr;  // matmul_id has no bias
    if (!plain.empty()) {
      sp.plain_w = reinterpret_cast<const uint8_t*>(base_ptr(*plain[i].w));
      sp.plain_y = desc(*plain[i].y);
    }
  }
  if (!plain.empty()) s.parts.plain_rows = static_cast<int>(n_plain);
}

template <GgmlType T>
void run_id(std::span<const FusedPart> parts, std::span<const FusedPart> plain, const Tensor& x,
            const Tensor& ids, Scratch& scratch, unsigned* err, Stream& stream, const RoundedX* pre,
            const RouteArgs& route, bool plain_early) {
  const Tensor& w = *parts[0].w;
  const int64_t n_in = w.ne[0];
  const auto [xq, xb] = pre != nullptr ? *pre : round_x(x, scratch, stream);
  SliceArgs s{reinterpret_cast<const uint8_t*>(base_ptr(w)),
              static_cast<int64_t>(w.nb[1]),
              w.ne[1],
              n_in,
              ids.n_elements(),
              xq,
              xb,
              desc(*parts[0].y),
              nullptr};
  s.ids = reinterpret_cast<const int32_t*>(base_ptr(ids));
  s.n_expert = w.ne[2];
  s.expert_bytes = static_cast<int64_t>(w.nb[2]);
  s.k = ids.ne[0];
  s.x_per_rank = x.ne[1] != 1;
  s.err = err;
  s.route = route;
  s.w_early = plain_early && !plain.empty();  // (the plain rows' blocks only: stages_early)
  // Plain rows: one per token (x per rank: pre's rows after the pairs').
  set_parts(s, parts, plain, s.x_per_rank ? ids.n_rows() : x.n_rows());
  launch_slice_gemv<T>(s, stream);
}

template <GgmlType T>
void run_id_grouped(std::span<const FusedPart> parts, const Tensor& x, const Tensor& ids,
                    const ExpertSort& sort, Scratch& scratch, Stream& stream, const RoundedX* pre) {
  const Tensor& w = *parts[0].w;
  const int64_t n_in = w.ne[0], n_expert = w.ne[2], m = ids.n_elements(), n_x = x.n_rows();
  T9_CHECK(sort.pairs == m && sort.n_expert == n_expert, "matmul_id: sort of {} pairs for {}",
           sort.pairs, m);
  int8_t* xq = nullptr;
  ActBlock* xb = nullptr;
  if (pre == nullptr) {  // x's n_x rows of int8 codes, then their ActBlocks
    const size_t qb = (static_cast<size_t>(n_x * n_in) + 255) & ~size_t{255};
    auto* base = static_cast<uint8_t*>(
        scratch.reserve(qb + static_cast<size_t>(n_x * (n_in / 32)) * sizeof(ActBlock), stream));
    xq = reinterpret_cast<int8_t*>(base);
    xb = reinterpret_cast<ActBlock*>(base + qb);
    launch_round_rows(x, nullptr, n_x, xq, xb, stream);
  }
  SliceArgs s{reinterpret_cast<const uint8_t*>(base_ptr(w)),
              static_cast<int64_t>(w.nb[1]),
              w.ne[1],
              n_in,
              m,
              pre != nullptr ? pre->xq : xq,
              pre != nullptr ? pre->xb : xb,
              desc(*parts[0].y),
              nullptr};
  s.n_expert = n_expert;
  s.expert_bytes = static_cast<int64_t>(w.nb[2]);
  s.expert_first = sort.expert_first;
  s.tile_first = sort.tile_first;
  s.tile_expert = sort.tile_expert;
  s.x_rows = x.ne[1] != 1 ? sort.y_rows : sort.x_rows;  // x per rank: the pair's own row
  s.y_rows = sort.y_rows;
  set_parts(s, parts, {}, 0);
  launch_mma_grouped<T>(s, sort.tile_rows, sort.max_tiles, stream);
}

}  // namespace

bool matmul_id_groups(const Tensor& w) {
  return with_sliced_type(w, [](auto) {});
}

ExpertSort launch_expert_sort(const Tensor& ids, int64_t n_expert, Scratch& scratch, unsigned* err,
                              Stream& stream) {
  ExpertSort es;
  es.pairs = ids.n_elements();
  es.n_expert = n_expert;
  es.k = ids.ne[0];
  es.tile_rows = mma_grouped_tile_rows(es.pairs, n_expert);
  es.max_tiles = (es.pairs + es.tile_rows - 1) / es.tile_rows + n_expert;
  T9_CHECK(es.max_tiles <= 65535, "matmul_id: {} pairs exceed the launch grid", es.pairs);
  // TEMPO9_CUDA_MOE_TILE_MAP=0 (read once, A/B runs): no tile map; blocks search tile_first.
  static const bool map_off = env_off("TEMPO9_CUDA_MOE_TILE_MAP");
  const size_t n_ints = static_cast<size_t>(2 * (n_expert + 1) + 2 * es.pairs + es.max_tiles);
  es.expert_first = static_cast<int32_t*>(scratch.reserve(n_ints * 4, stream));
  es.tile_first = es.expert_first + n_expert + 1;
  es.x_rows = es.tile_first + n_expert + 1;
  es.y_rows = es.x_rows + es.pairs;
  es.tile_expert = map_off ? nullptr : es.y_rows + es.pairs;
  const size_t sort_smem = static_cast<size_t>(n_expert) * (1 + kSortWarps) * 4;
  T9_CHECK(sort_smem <= (48 << 10), "matmul_id: {} experts (at most 1365)", n_expert);
  stream.launch(moe_sort_kernel, 1, kSortThreads, sort_smem,
                reinterpret_cast<const int32_t*>(base_ptr(ids)), static_cast<int>(es.pairs),
                static_cast<int>(n_expert), static_cast<int>(ids.ne[0]), es.tile_rows,
                SortOut{es.expert_first, es.tile_first, es.tile_expert,
                        static_cast<int>(es.max_tiles), es.x_rows, es.y_rows},
                err);
  return es;
}

void launch_matmul_id_grouped(std::span<const FusedPart> parts, const Tensor& x, const Tensor& ids,
                              const ExpertSort& sort, Scratch& scratch, Stream& stream,
                              const RoundedX* pre) {
  const bool ok = with_sliced_type(*parts[0].w, [&](auto t) {
    run_id_grouped<decltype(t)::value>(parts, x, ids, sort, scratch, stream, pre);
  });
  T9_CHECK(ok, "matmul_id: no grouped kernel for {}", type_name(parts[0].w->type));
}

bool launch_matmul_id_gemv(std::span<const FusedPart> parts, const Tensor& x, const Tensor& ids,
                           Scratch& scratch, unsigned* err, Stream& stream, const RoundedX* pre,
                           std::span<const FusedPart> plain, const RouteArgs& route,
                           bool plain_early) {
  T9_CHECK(plain.empty() || (plain.size() == parts.size() && (x.ne[1] == 1 || pre != nullptr)),
           "matmul_id: {} plain parts for {} parts", plain.size(), parts.size());
  T9_CHECK(route.logits == nullptr || (x.ne[1] == 1 && route.n_expert <= kRouteFusedMaxExperts &&
                                       ids.ne[0] <= 32 && route.n_expert >= ids.ne[0]),
           "matmul_id: a fused route of {} experts, top {}", route.n_expert, ids.ne[0]);
  return with_sliced_type(*parts[0].w, [&](auto t) {
    run_id<decltype(t)::value>(parts, plain, x, ids, scratch, err, stream, pre, route, plain_early);
  });
}

bool id_parts_fuse(const Tensor& a, const Tensor& b) {
  return a.type == b.type && a.ne == b.ne && a.nb == b.nb &&
         reinterpret_cast<uintptr_t>(base_ptr(a)) % 16 ==
             reinterpret_cast<uintptr_t>(base_ptr(b)) % 16;
}

bool id_plain_part_fits(const Tensor& experts, const Tensor& w) {
  return w.type == experts.type && w.ne[0] == experts.ne[0] && w.ne[1] == experts.ne[1] &&
         w.ne[2] == 1 && w.ne[3] == 1 && w.nb[1] == experts.nb[1] &&
         reinterpret_cast<uintptr_t>(base_ptr(w)) % 16 ==
             reinterpret_cast<uintptr_t>(base_ptr(experts)) % 16;
}

}  // namespace t9::cuda
