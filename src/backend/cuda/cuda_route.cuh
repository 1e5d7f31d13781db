// Internal to the CUDA backend: one row of Backend::moe_route (softmax, then the top k) as a warp
// function, shared by moe_route_regs_kernel (cuda_moe.cu) and the experts' one-row GEMVs that
// route their own token (SliceArgs::route, select_pair in cuda_units.cuh): one body, so both give
// the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace t9::cuda {

// (v, i) ranks before (bv, bi): larger value, then lower index (the CPU's first-max scan).
__device__ __forceinline__ bool route_ranks_before(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// The top-k routing of one row x of n <= 32 kRegs logits, k <= 32, by one whole warp: lane j < k
// gets rank j's expert (*id) and weight (*w; divided by the k weights' float sum when
// `normalize`); other lanes keep theirs. `ranks` < k stops after the first `ranks` ranks: lanes
// j < ranks get the same ids (rank j's scan does not depend on later ranks), and no lane's weight
// is meaningful then (the sum needs all k), so only callers that want ids alone pass it.
//
// moe_route_kernel's values in its order (the max, each expf, the double sum in e order per lane
// then the warp's tree, the product by the float reciprocal; each lane's first-best scan in e
// order, a taken expert counting as -inf; the winner is unique under route_ranks_before, so any
// reduction order finds it), with everything in registers: lane l holds experts l, l + 32, ...
// (loaded at once, not one L2 round trip per loop step), takes them by a bit mask instead of
// shared memory, and finds each rank's winner with two warp reductions (redux.sync) instead of ten
// shuffles. A lane's best is never NaN (NaN never ranks before anything), so its order key is the
// float's, with -0 folded into +0 as `==` does. p is only ever indexed by unrolled constants: a
// `p[bi / 32]` (or a select loop that the compiler turns into one) puts it in local memory (run
// 122's first form: a 64-byte stack frame, 7.2 us a call). As a replayed chain
// (cuda_op_chain_bench, 256 experts, top 8): 3.75 us a call against moe_route_kernel's 5.3 (runs
// 121, 123).
template <int kRegs>
__device__ __forceinline__ void route_row_regs(const float* __restrict__ x, int n, int k,
                                               bool normalize, int lane, int32_t* id, float* w,
                                               int ranks) {
  float p[kRegs];
#pragma unroll
  for (int c = 0; c < kRegs; ++c) p[c] = lane + 32 * c < n ? x[lane + 32 * c] : 0.0f;
  float mx = -INFINITY;
#pragma unroll
  for (int c = 0; c < kRegs; ++c)
    if (lane + 32 * c < n) mx = fmaxf(mx, p[c]);
  mx = warp_max(mx);
  double sum = 0.0;
#pragma unroll
  for (int c = 0; c < kRegs; ++c)
    if (lane + 32 * c < n) {
      p[c] = expf(p[c] - mx);
      sum += p[c];
    }
  sum = warp_sum(sum);
  const float inv = static_cast<float>(1.0 / sum);
#pragma unroll
  for (int c = 0; c < kRegs; ++c) p[c] *= inv;
  uint32_t taken = 0;  // bit c: expert lane + 32 c (moe_route_kernel's p[e] = -inf)
  int my_id = 0;
  float my_w = 0.0f, picked = 0.0f;
  for (int j = 0; j < ranks; ++j) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
#pragma unroll
    for (int c = 0; c < kRegs; ++c) {
      const float pv = (taken >> c) & 1u ? -INFINITY : p[c];
      if (lane + 32 * c < n && route_ranks_before(pv, lane + 32 * c, bv, bi))
        bv = pv, bi = lane + 32 * c;
    }
    const uint32_t key = float_order_key(bv);
    const uint32_t best = __reduce_max_sync(0xffffffffu, key);
    bi = static_cast<int>(
        __reduce_min_sync(0xffffffffu, key == best ? static_cast<uint32_t>(bi) : 0x7fffffffu));
    float v;  // p[bi]: the winner's own best, or (bi unset) expert 0's p
    if (bi == 0x7fffffff) {
      // A row whose p are all NaN leaves bi unset; take expert 0 so ids stay in range.
      bi = 0;
      v = __shfl_sync(0xffffffffu, taken & 1u ? -INFINITY : p[0], 0);
    } else {
      v = __shfl_sync(0xffffffffu, bv, bi % 32);
    }
    if (lane == bi % 32) taken |= 1u << (bi / 32);
    if (lane == j) my_id = bi, my_w = v;
    picked += v;
  }
  if (lane < k) *id = my_id, *w = normalize ? my_w / picked : my_w;
}

// Experts (n_expert) up to which a launch routes its own tokens (route_row_regs<8>); more go
// through moe_route's kernel first.
constexpr int kRouteFusedMaxExperts = 256;

// matmul_id's ids computed by the experts' launch itself (SliceArgs::route;
// CudaBackend::moe_route_matmul: one launch fewer a MoE layer): pair r's block routes token r / k
// (route_row_regs: the bits of moe_route) and takes rank r % k's expert; its block x 0 stores that
// id and its weight as moe_route would have (ids: the tensor SliceArgs::ids names, which the
// launch then never reads).
struct RouteArgs {
  const float* logits = nullptr;  // [n_tok / k rows of row_floats] F32, or null: no routing
  int64_t row_floats = 0;
  int32_t* ids = nullptr;  // [pairs]
  float* w = nullptr;      // [pairs]
  int32_t n_expert = 0, normalize = 0;
};

}  // namespace t9::cuda
