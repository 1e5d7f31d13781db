// Internal to the CUDA backend: the int8-activation building blocks shared by the GEMV kernels
// (cuda_gemv.cu) and the tensor-core kernel (cuda_mma.cu): the activation rounding, the per-type
// weight "units" (cuda_unit_types.cuh: decode to signed int8x4 words + float scales, and the
// float arithmetic that turns a unit's integer sums into its dot), the copies and the slices. Both
// kernels call the same float functions on the same integers (integer sums are exact in any order:
// dp4a and mma give the same values), so a unit's dot is the same bits in both.
//
// Canonical sum order of one output for the "sliced" types (is_sliced_type: Q3_K .. Q6_K, Q8_0;
// slice_begin below): the n_units units of the row split into 32 contiguous slices, slice l =
// units [floor(l n / 32), floor((l + 1) n / 32)); p_l = 0.0f, then p_l = Unit::acc(p_l, u) for its
// units in order; y = 0.0f, then y += p_l for l = 0..31 in order, then + bias. acc is p + dot(u)
// (the K-quants: a unit's dot is a pure function of the unit, which the one-row GEMV relies
// on) or the unit's last product fused into p (Q8_0: p = fma(d * a.d, s, p)). An empty slice adds
// +0.0f, which never changes y (y starts at +0.0f and a round-to-nearest sum is -0.0f only when
// both terms are), so a kernel may skip empty slices.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_quant.cuh"
#include "backend/cuda/cuda_route.cuh"
#include "backend/cuda/cuda_unit_types.cuh"

namespace t9::cuda {

// ---- activation quantization ----

// A block's scale d = amax / 127 and its reciprocal (0 for an all-zero block), IEEE-rounded: every
// rounding below takes them from here, so their codes are the same bits.
struct BlockScale {
  float d, id;
};
__device__ __forceinline__ BlockScale block_scale(float amax) {
  const float d = __fdiv_rn(amax, 127.0f);
  return {d, d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f};
}

// One element's code: rint(v * (1 / d)), clamped to int8.
__device__ __forceinline__ int code_of(float v, float id) {
  return max(-128, min(127, __float2int_rn(__fmul_rn(v, id))));
}

// One 32-element block, lane = element v (all 32 lanes of the warp call it); the CPU backend's
// quantize_act_row rounding: d = amax / 127, q = rint(x * (1 / d)) (both IEEE-rounded, no
// contraction). The separate kernel, the fused decode path and the ops that round their own
// output (DerivedCache, cuda_derived.cuh) all call this, so their codes are the same bits.
__device__ __forceinline__ void quantize_value(float v, int lane, int8_t* xq, ActBlock* xb) {
  const auto [d, id] = block_scale(warp_max(fabsf(v)));
  const int q = code_of(v, id);
  xq[lane] = static_cast<int8_t>(q);
  const int s = __reduce_add_sync(0xffffffffu, q);
  if (lane == 0) *xb = ActBlock{d, static_cast<float>(s)};
}
__device__ __forceinline__ void quantize_block(const float* x, int lane, int8_t* xq, ActBlock* xb) {
  quantize_value(x[lane], lane, xq, xb);
}

// The same rounding of one 32-element block held in the mma accumulator layout: the 4 lanes of a
// quad (q = lane % 4) hold elements 8j + 2q and 8j + 2q + 1 (v[j][0], v[j][1]) for j = 0..3.
// amax (a max) and the code sum (integers) do not depend on the order they are taken in, and d,
// 1 / d and each code are the same expressions on the same floats: quantize_value's bits. Only
// the quad's lanes take part (their shuffles name just them), so quads may diverge.
__device__ __forceinline__ void quantize_quad(const float (&v)[4][2], int lane, int8_t* xq,
                                              ActBlock* xb) {
  const unsigned quad = 0xFu << (lane & ~3);
  float amax = fabsf(v[0][0]);
#pragma unroll
  for (int j = 0; j < 4; ++j) amax = fmaxf(amax, fmaxf(fabsf(v[j][0]), fabsf(v[j][1])));
  amax = fmaxf(amax, __shfl_xor_sync(quad, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(quad, amax, 2));
  const auto [d, id] = block_scale(amax);
  int s = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int q0 = code_of(v[j][0], id);
    const int q1 = code_of(v[j][1], id);
    *reinterpret_cast<char2*>(xq + 8 * j + 2 * (lane % 4)) =
        make_char2(static_cast<signed char>(q0), static_cast<signed char>(q1));
    s += q0 + q1;
  }
  s += __shfl_xor_sync(quad, s, 1);
  s += __shfl_xor_sync(quad, s, 2);
  if (lane % 4 == 0) *xb = ActBlock{d, static_cast<float>(s)};
}

// quantize_value's rounding of one 32-element block held by the 8 lanes of an octet (lane % 8 =
// j holds elements 4j .. 4j + 3): amax (a max) and the code sum (integers) do not depend on the
// order they are taken in, and d, 1 / d and each code are the same expressions on the same
// floats, so the same bits. Only the octet's lanes take part in its shuffles.
__device__ __forceinline__ void quantize_octet(const float (&v)[4], int lane, int8_t* xq,
                                               ActBlock* xb) {
  const unsigned octet = 0xFFu << (lane & ~7);
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
  amax = fmaxf(amax, __shfl_xor_sync(octet, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(octet, amax, 2));
  amax = fmaxf(amax, __shfl_xor_sync(octet, amax, 4));
  const auto [d, id] = block_scale(amax);
  int q[4], s = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    q[k] = code_of(v[k], id);
    s += q[k];
  }
  *reinterpret_cast<char4*>(xq + 4 * (lane % 8)) =
      make_char4(static_cast<signed char>(q[0]), static_cast<signed char>(q[1]),
                 static_cast<signed char>(q[2]), static_cast<signed char>(q[3]));
  s += __shfl_xor_sync(octet, s, 1);
  s += __shfl_xor_sync(octet, s, 2);
  s += __shfl_xor_sync(octet, s, 4);
  if (lane % 8 == 0) *xb = ActBlock{d, static_cast<float>(s)};
}

// Byte i (0..11) of the scales held in words s0..s2, without indexing a register array.
__device__ __forceinline__ int scale_byte(uint32_t s0, uint32_t s1, uint32_t s2, int i) {
  const uint32_t w = i < 4 ? s0 : i < 8 ? s1 : s2;
  return static_cast<int>((w >> (8 * (i & 3))) & 0xFFu);
}

template <bool kLdg>
__device__ __forceinline__ uint4 ld16(const uint8_t* p) {
  if constexpr (kLdg) return __ldg(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<const uint4*>(p);
}

// Unit p of the Q4_K super-block at blk (16-byte aligned, global or shared memory) as its three
// 16-byte words: the header (d, dmin, the 12 scale bytes) and the unit's 32 quant bytes (kLdg:
// through the read-only path). The one-row GEMV issues these for all of a step's rows before it
// decodes any (decode_q4k), so that their loads are in flight together.
struct Q4kRaw {
  uint4 h, qa, qb;
};
template <bool kLdg>
__device__ __forceinline__ Q4kRaw load_q4k_raw(const uint8_t* blk, int p) {
  return {ld16<kLdg>(blk), ld16<kLdg>(blk + 16 + 32 * p), ld16<kLdg>(blk + 32 + 32 * p)};
}

// The same W as Unit<Q4_K>::load from the raw words: sub-block j's 6-bit scale and min
// (k_scale_min, quant/k_scales.h). kSelect: by selects, without branches. p = u % 4 differs from
// lane to lane, and the if / else on j < 4 is then a divergent branch after each row's loads,
// which kept the one-row GEMV's later loads from being issued until the earlier ones had landed
// (its top stall in ncu runs 126 / 127: the first use of d, long scoreboard). The tiles of
// several activation rows keep the branch: with selects ptxas spills the 8-row tile (92 bytes at
// 72 registers), and those were not measured. The same W either way.
template <bool kSelect>
__device__ __forceinline__ Unit<GgmlType::Q4_K>::W decode_q4k(const Q4kRaw& r, int p) {
  Unit<GgmlType::Q4_K>::W w;
  const uint4 h = r.h;
  const float d = f16(static_cast<uint16_t>(h.x & 0xFFFFu));
  const float dmin = f16(static_cast<uint16_t>(h.x >> 16));
  float sv[2], mv[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int j = 2 * p + k;
    int sc, mn;
    if constexpr (kSelect) {
      const int bj = scale_byte(h.y, h.z, h.w, j), bj4 = scale_byte(h.y, h.z, h.w, j + 4);
      const int bj_lo = scale_byte(h.y, h.z, h.w, j & 3);  // byte j - 4 when j >= 4
      const bool low = j < 4;
      sc = low ? bj & 63 : (bj4 & 0xF) | (bj_lo >> 6) << 4;
      mn = low ? bj4 & 63 : (bj4 >> 4) | (bj >> 6) << 4;
    } else if (j < 4) {
      sc = scale_byte(h.y, h.z, h.w, j) & 63;
      mn = scale_byte(h.y, h.z, h.w, j + 4) & 63;
    } else {
      sc = (scale_byte(h.y, h.z, h.w, j + 4) & 0xF) | (scale_byte(h.y, h.z, h.w, j - 4) >> 6) << 4;
      mn = (scale_byte(h.y, h.z, h.w, j + 4) >> 4) | (scale_byte(h.y, h.z, h.w, j) >> 6) << 4;
    }
    sv[k] = __fmul_rn(d, static_cast<float>(sc));
    mv[k] = __fmul_rn(dmin, static_cast<float>(mn));
  }
  w.s0 = sv[0], w.m0 = mv[0], w.s1 = sv[1], w.m1 = mv[1];
  const uint32_t q[8] = {r.qa.x, r.qa.y, r.qa.z, r.qa.w, r.qb.x, r.qb.y, r.qb.z, r.qb.w};
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    w.q[k] = static_cast<int>(q[k] & 0x0F0F0F0Fu);
    w.q[k + 8] = static_cast<int>((q[k] >> 4) & 0x0F0F0F0Fu);
  }
  return w;
}
// Unit p's W with three 16-byte loads, the scale decode branched (the multi-row tiles).
template <bool kLdg>
__device__ __forceinline__ Unit<GgmlType::Q4_K>::W load_q4k_16(const uint8_t* blk, int p) {
  return decode_q4k<false>(load_q4k_raw<kLdg>(blk, p), p);
}

// ---- cp.async ----

__device__ __forceinline__ void cp_async16(uint8_t* dst, const uint8_t* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_1() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_0() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// ---- bulk copies (sm_90: the copy engine moves a byte range, completing on an mbarrier) ----

// A one-arrival mbarrier, visible to the copy engine afterwards.
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The one arrival of this phase, which then completes once `bytes` have landed.
__device__ __forceinline__ void mbar_expect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// Adds `bytes` to the transfers the current phase waits for, with no arrival (copies issued one
// by one before the phase's one arrival, mbar_arrive).
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// The one arrival of this phase (its transfers declared by mbar_expect_tx).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// `bytes` (a multiple of 16; both ends 16-byte aligned) from global src to shared dst.
__device__ __forceinline__ void bulk_copy(uint8_t* dst, const uint8_t* src, unsigned bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// Waits until phase `parity` of bar has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra W;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// First unit of slice l (0..32) of a row of n units: see the canonical order above.
__host__ __device__ __forceinline__ int64_t slice_begin(int64_t l, int64_t n) {
  return l * n / 32;
}
// One output of a short row (n_units <= kLanes, warp-uniform) in the canonical order: every
// slice holds at most one unit, so the sum is the units' partials acc(0, u) added in unit order.
// Lane j of the kLanes-lane group g = lane / kLanes holds unit j of the group's row (`row`: its
// bytes; null when the group has no row), xq / xb the activation row; every lane of the group
// gets the sum (the group adds down a shuffle chain). All 32 lanes call it.
template <GgmlType T, int kLanes>
__device__ __forceinline__ float short_row_dot(const uint8_t* row, const int8_t* xq,
                                               const ActBlock* xb, int n_units, int lane) {
  using U = Unit<T>;
  const int g = lane / kLanes, j = lane % kLanes;
  float p = 0.0f;
  if (row != nullptr && j < n_units) {
    const typename U::W wu = U::load(row + (j / U::kPerBlock) * U::kBlockBytes, j % U::kPerBlock);
    p = U::acc(0.0f, wu, xq, xb, j);
  }
  // Every unit's partial first (independent shuffles, in flight together), then the additions in
  // unit order: the bits of a shuffle-then-add chain without a shuffle's latency in every step
  // (a 16-unit row: ~16 x 30 cycles of chain before, ~30 + 16 x 4 now).
  float v[kLanes];
#pragma unroll
  for (int u = 0; u < kLanes; ++u) v[u] = __shfl_sync(0xffffffffu, p, g * kLanes + u);
  float y = 0.0f;
#pragma unroll
  for (int u = 0; u < kLanes; ++u)
    if (u < n_units) y = __fadd_rn(y, v[u]);  // warp-uniform; units past n_units add nothing
  return y;
}

// The slice ends of a row of n units, walked in unit order: ends_at(u) is true when unit u is
// the last unit of a non-empty slice (some m in 1..32 has floor(m n / 32) = u + 1). Called for
// u = 0, 1, 2, ... in turn. It replaces two 64-bit divisions per unit (a ~70-instruction
// subroutine each, as many instructions as a warp's eight mma and their float epilogue) with a
// compare; n < 2^26 (n_in / 32 units), so l * n fits an int and / 32 is a shift.
// From unit u0 (u0 > 0: a split launch, below) the walk starts at the first slice ending after
// it. `last` is the index of the slice that ended at the latest true ends_at.
struct SliceWalk {
  int n, l = 1, end, last = -1;
  __device__ __forceinline__ explicit SliceWalk(int n_units, int u0 = 0)
      : n(n_units), end(n_units / 32) {
    while (end <= u0 && l < 32) end = ++l * n / 32;
  }
  __device__ __forceinline__ bool ends_at(int u) {
    if (u + 1 != end) return false;
    last = l - 1;
    while (end <= u + 1 && l < 32) end = ++l * n / 32;
    return true;
  }
};

// Several plain matmuls of one weight type and n_in over the same rounded x, in one launch
// (matmul_shared_x: q/k/v, gate/up): part i multiplies by w_i (n_out_i packed rows) into y_i
// (+ bias_i) and owns launch blocks [block_first[i], block_first[i + 1]) along x. select_part()
// turns the arguments into the block's part, so every output gets the bits of a launch of its
// part alone (rule 7). The point is the launches saved: a decode step is a chain of
// latency-bound kernels, each costing its own ~3 us chain whatever its bytes.
//
// A matmul_id's parts may carry plain rows (SliceParts::plain_rows > 0; the one-row GEMVs only):
// launch-grid rows n_tok .. n_tok + plain_rows - 1, after the pairs, multiply x row r - n_tok
// (with x per rank: x row r, the rows after the pairs') by the part's plain_w (one matrix of the
// experts' type, shape and row bytes) into row r - n_tok of plain_y, with the bits of a plain
// one-row matmul. matmul_shared_x puts the MoE shared expert's gate and up there, beside the
// routed experts' (one launch instead of two per MoE layer), and moe_down its down projection.
struct SlicePart {  // every member initialized (the tape's bytes: cuda_stream.cuh)
  const uint8_t* w = nullptr;
  TensorDesc y = {};
  const float* bias = nullptr;  // null: none
  float* split_p = nullptr;     // this part's split partials (SliceArgs::split_p), or null
  int64_t n_out = 0;
  const uint8_t* plain_w = nullptr;  // matmul_id with plain rows: the plain rows' matrix
  TensorDesc plain_y = {};           // and their output
};
struct SliceParts {
  SlicePart part[kMaxParts] = {};
  int32_t block_first[kMaxParts + 1] = {};
  int n = 0;           // 0: a plain call (no parts)
  int plain_rows = 0;  // matmul_id: plain rows after the pairs (see above)
  int32_t unused = 0;  // no padding after the array (see SliceArgs below)
};

// The kernel's view of one part of a fused call (a null or !valid() bias: none).
inline SlicePart slice_part(const FusedPart& p) {
  const bool bias = p.bias != nullptr && p.bias->valid();
  return {reinterpret_cast<const uint8_t*>(base_ptr(*p.w)), desc(*p.y),
          bias ? reinterpret_cast<const float*>(base_ptr(*p.bias)) : nullptr, nullptr, p.w->ne[1]};
}

// Blocks along x for parts whose blocks take rows_per_block weight rows each per pass, capped
// at `cap` in all: each part gets its share in proportion to its rows (at least one block);
// fills parts.block_first and returns the total.
inline int64_t part_blocks(SliceParts& parts, int64_t rows_per_block, int64_t cap) {
  int64_t need[kMaxParts], total = 0;
  for (int i = 0; i < parts.n; ++i) {
    need[i] = (parts.part[i].n_out + rows_per_block - 1) / rows_per_block;
    total += need[i];
  }
  int64_t first = 0;
  for (int i = 0; i < parts.n; ++i) {
    parts.block_first[i] = static_cast<int32_t>(first);
    first += total <= cap ? need[i] : std::max<int64_t>(1, need[i] * cap / total);
  }
  parts.block_first[parts.n] = static_cast<int32_t>(first);
  return first;
}

// One int8-activation matmul as the sliced kernels (GEMV and MMA) see it: y [n_tok, n_out] =
// xq [n_tok, n_in] (int8 codes, rows contiguous, n_in apart; xb: n_in / 32 ActBlocks per row)
// times w^T (n_out packed rows of row_bytes) + bias (null or n_out floats).
//
// matmul_id's form (ids non-null; the one-row GEMVs only): n_tok counts (token, rank) pairs, one
// launch-grid row (blockIdx.y) each; pair r = t * k + j multiplies xq row (x_per_rank ? r : t)
// by expert ids[r]'s matrix (w + ids[r] * expert_bytes) into y row r. select_pair() turns the
// arguments into that one-row matmul inside the kernel, so every pair gets the bits of a plain
// one-row matmul with its expert (rule 7) and the grouping needs no host round trip.
struct SliceArgs {  // every member initialized (the tape's bytes: cuda_stream.cuh)
  const uint8_t* w = nullptr;
  int64_t row_bytes = 0, n_out = 0, n_in = 0, n_tok = 0;
  const int8_t* xq = nullptr;
  const ActBlock* xb = nullptr;
  TensorDesc y = {};
  const float* bias = nullptr;
  const int32_t* ids = nullptr;  // [n_tok] expert per pair, or null
  int64_t n_expert = 0, expert_bytes = 0, k = 1;
  bool x_per_rank = false;
  unsigned* err = nullptr;  // kErrMoeId for an id outside [0, n_expert)
  // matmul_id's grouped form (tensor-core kernel only): the pairs sorted by expert
  // (expert_first[e] .. expert_first[e + 1] - 1 are expert e's, in (token, rank) order), launch
  // tile blockIdx.y is tile blockIdx.y - tile_first[e] of expert e (tile_first[e] <= blockIdx.y <
  // tile_first[e + 1]); sorted pair i reads x row x_rows[i] (xq / xb hold x's rows in their own
  // order: rounding x once, not a gathered copy per call) and goes to y row y_rows[i].
  // select_expert() makes that tile's arguments.
  const int32_t* expert_first = nullptr;  // [n_expert + 1]
  const int32_t* tile_first = nullptr;    // [n_expert + 1]; tile_first[n_expert] = tiles in all
  // [gridDim.y]: the expert of each launch tile, -1 past the last (null: select_expert searches
  // tile_first)
  const int32_t* tile_expert = nullptr;
  const int32_t* x_rows = nullptr;  // [pairs]
  const int32_t* y_rows = nullptr;  // [pairs]
  // Split form (tensor-core kernel, plain matmuls only): launch z = 0..3 computes the slice
  // partials p_l of slices 8z .. 8z + 7 of every output into split_p[(l * n_tok + t) * n_out + o]
  // (empty slices are not written); a second kernel adds them in the canonical order, skipping
  // empty slices, plus the bias, into y. The same bits as one launch, with four times the blocks.
  // Null: one launch computes y.
  float* split_p = nullptr;
  // Plain matmuls of uploaded weights (launch_fast_matmul's w_early): the kernel starts its
  // first weight reads before its dependent-launch wait (cuda_common.cuh, prefetch_l2). In a
  // matmul_id (ids set): its plain rows' matrices are uploaded weights (stages_early).
  bool w_early = false;
  // The staged one-row GEMVs (gemv_slice_kernel and gemv_coal_kernel with kBufs 1 or 2,
  // gemv_short_kernel): each warp's rows staged by one bulk copy per row or run (lane 0) on an
  // mbarrier per buffer instead of per-lane cp.async (run 177: 2x the ideal L2 sectors and 3.5x
  // the shared wavefronts per cp.async instruction). The same bytes, the same bits.
  bool bulk_rows = false;
  // matmul_id's ids computed by the launch itself (RouteArgs), or route.logits null.
  RouteArgs route = {};
  SliceParts parts = {};  // several weights in one launch (plain matmuls only), or parts.n == 0
  // Tensor-core kernel: 64-row weight tiles per block (launch block x takes tiles w_tiles * x ..,
  // one after another; not with the split form). Each output's bits do not depend on it.
  int w_tiles = 1;
  int32_t unused = 0;  // no padding after parts (below)
};

// No padding after the parts array, anywhere. The stream clears an argument's padding bytes
// before it goes on the tape (__builtin_clear_padding, cuda_stream.cuh), and GCC 12.2 clears the
// wrong bytes for padding that follows an array of structs: it zeroed the upper half of part 0's
// first pointer, or of a field of its y, depending on the layout. That was run 176's "null
// plain_y" (SliceArgs grown to 1032 bytes: the by-pair kernels' plain rows wrote through a zeroed
// pointer) and run 180's illegal address (48 bytes more). Reproduced on the host (a struct
// {bool; {T part[4]; int n;}} of 304 bytes: bytes 12-15 cleared instead of 300-303); the
// explicit `unused` members leave no padding there to misplace.
static_assert(offsetof(SliceParts, unused) + sizeof(int32_t) == sizeof(SliceParts) &&
                  offsetof(SliceParts, block_first) == sizeof(SlicePart) * kMaxParts,
              "SliceParts: no padding after its array (see above)");
static_assert(offsetof(SliceArgs, w_tiles) == offsetof(SliceArgs, parts) + sizeof(SliceParts) &&
                  offsetof(SliceArgs, unused) + sizeof(int32_t) == sizeof(SliceArgs),
              "SliceArgs: no padding after parts (see above)");

// Weight rows of the whole call: n_out, or every part's (host: the launchers' choices).
inline int64_t weight_rows(const SliceArgs& a) {
  if (a.parts.n == 0) return a.n_out;
  int64_t rows = 0;
  for (int i = 0; i < a.parts.n; ++i) rows += a.parts.part[i].n_out;
  return rows;
}

// The part of launch block blockIdx.x (SliceParts): a becomes that part's matmul. Returns the
// block's index within its part and puts the part's block count in n_blocks (without parts:
// blockIdx.x and gridDim.x). Uniform per block; reads only kernel parameters, so it may run
// before the dependent-launch wait.
__device__ __forceinline__ int64_t select_part(SliceArgs& a, int64_t& n_blocks) {
  const int b = static_cast<int>(blockIdx.x);
  if (a.parts.n == 0) {
    n_blocks = gridDim.x;
    return b;
  }
  int first = 0, last = 0;
  // A plain row of a matmul_id (SlicePart::plain_w; the pairs' grid rows come first).
  const bool plain = a.ids != nullptr && blockIdx.y >= a.n_tok;
#pragma unroll
  for (int i = 0; i < kMaxParts; ++i) {  // constant indices: parameter loads, no local copy
    if (i < a.parts.n && b >= a.parts.block_first[i]) {
      const SlicePart& p = a.parts.part[i];
      a.w = p.w, a.y = p.y, a.bias = p.bias, a.split_p = p.split_p, a.n_out = p.n_out;
      if (plain) a.w = p.plain_w, a.y = p.plain_y;
      first = a.parts.block_first[i], last = a.parts.block_first[i + 1];
    }
  }
  n_blocks = last - first;
  return b - first;
}

// Whether a one-row kernel's block stages its first weights before the dependent-launch wait
// (SliceArgs::w_early): a plain matmul's blocks, and a matmul_id's plain rows (their matrix, the
// MoE shared expert's, does not depend on the route: its copy overlaps the router's launch); a
// pair's expert comes from a predecessor. Uniform per block; call before select_pair.
__device__ __forceinline__ bool stages_early(const SliceArgs& a, bool by_pair) {
  return a.w_early && (!by_pair || static_cast<int64_t>(blockIdx.y) >= a.n_tok);
}

// Launch-grid rows of a call with one activation row per grid row: its rows or pairs, and a
// matmul_id's plain rows after the pairs (SliceParts).
inline int64_t one_row_grid_rows(const SliceArgs& a) {
  return a.n_tok + (a.ids != nullptr ? a.parts.plain_rows : 0);
}

// The one-row matmul of pair blockIdx.y, or of a plain row after the pairs (see SliceArgs,
// SliceParts). False (flagged once) when a pair's expert id is out of range: the block computes
// nothing. Uniform per block.
__device__ __forceinline__ bool select_pair(SliceArgs& a) {
  const int64_t r = blockIdx.y;
  if (r >= a.n_tok) {  // a plain row (SliceParts::plain_rows): select_part chose its matrix
    // x row t of a shared x; with x per rank, the rows after the pairs' (launch_moe_glu_codes).
    const int64_t t = r - a.n_tok, xr = a.x_per_rank ? r : t;
    a.xq += xr * a.n_in;
    a.xb += xr * (a.n_in / 32);
    a.y.base = a.y.row(t);
    a.n_tok = 1;
    return true;
  }
  int32_t e;
  if (a.route.logits != nullptr) {
    // Warp 0 alone routes the pair's token and hands rank j's expert to the block through one
    // shared word (a block barrier: every thread of the block comes here, r being uniform).
    // Every warp routing for itself was ~29% of the 35B's gate/up launch's executed instructions
    // even after the stop below (run 283). Only block x 0 stores the weights, which need every
    // rank; the others stop after rank j.
    __shared__ int32_t s_expert;
    if (threadIdx.x < 32) {
      const int64_t t = r / a.k;
      const int j = static_cast<int>(r % a.k), lane = static_cast<int>(threadIdx.x);
      int32_t id = 0;
      float w = 0.0f;
      route_row_regs<kRouteFusedMaxExperts / 32>(
          a.route.logits + t * a.route.row_floats, a.route.n_expert, static_cast<int>(a.k),
          a.route.normalize != 0, lane, &id, &w, blockIdx.x == 0 ? static_cast<int>(a.k) : j + 1);
      const int32_t pick = __shfl_sync(0xffffffffu, id, j);
      if (lane == 0) s_expert = pick;
      if (blockIdx.x == 0 && lane == j) a.route.ids[r] = id, a.route.w[r] = w;
    }
    __syncthreads();
    e = s_expert;
  } else {
    e = a.ids[r];
  }
  if (e < 0 || e >= a.n_expert) {
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicOr(a.err, kErrMoeId);
    return false;
  }
  const int64_t xr = a.x_per_rank ? r : r / a.k;
  a.w += e * a.expert_bytes;
  a.xq += xr * a.n_in;
  a.xb += xr * (a.n_in / 32);
  a.y.base = a.y.row(r);
  a.n_tok = 1;
  return true;
}

// The expert of launch tile blockIdx.y of a grouped matmul_id (see SliceArgs): a becomes that
// expert's matmul (n_tok its pair count), t0 the tile's first row. False when the tile is past
// the last expert's (the grid is sized by an upper bound). Uniform per block.
__device__ __forceinline__ bool select_expert(SliceArgs& a, int tile_rows, int64_t& t0) {
  const int item = static_cast<int>(blockIdx.y);
  const int n_expert = static_cast<int>(a.n_expert);
  int lo = 0;
  if (a.tile_expert != nullptr) {  // one load instead of a search's chain of ~log2(n_expert)
    lo = a.tile_expert[item];
    if (lo < 0) return false;
  } else {
    if (item >= a.tile_first[n_expert]) return false;
    // The largest e with tile_first[e] <= item: then tile_first[e + 1] > item, so e has pairs.
    int hi = n_expert - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (a.tile_first[mid] <= item)
        lo = mid;
      else
        hi = mid - 1;
    }
  }
  const int64_t first = a.expert_first[lo];
  a.n_tok = a.expert_first[lo + 1] - first;
  t0 = static_cast<int64_t>(item - a.tile_first[lo]) * tile_rows;
  a.w += lo * a.expert_bytes;
  a.x_rows += first;
  a.y_rows += first;
  return true;
}

// The sliced GEMV (cuda_gemv_slice.cu) for T = Q4_K, Q6_K, Q8_0, any n_tok (tiles of 1, 4, 8).
template <GgmlType T>
void launch_slice_gemv(const SliceArgs& a, Stream& stream);

// The tensor-core kernel (cuda_mma.cu) for T = Q4_K, Q6_K, Q8_0: same bits as the sliced GEMV.
// With a.split_p set: the split form (SliceArgs), two launches.
template <GgmlType T>
void launch_mma(const SliceArgs& a, Stream& stream);
// Scratch bytes for a.split_p when a tensor-core call over w_tiles tiles of weight rows
// (mma_weight_tiles per part) and n_out outputs in all should split (0: it should not): few
// activation rows over few weight-row tiles leave most SMs idle otherwise.
size_t mma_split_bytes(int64_t w_tiles, int64_t n_out, int64_t n_tok, int64_t n_units);
int64_t mma_weight_tiles(int64_t n_out);

// Activation rows per launch tile of a grouped matmul_id of `pairs` pairs over n_expert experts
// (16, 32 or 64), and its launch: n_tiles >= a.tile_first[n_expert] tiles (an upper bound the host
// knows without the ids: pairs / tile_rows + n_expert).
int mma_grouped_tile_rows(int64_t pairs, int64_t n_expert);
template <GgmlType T>
void launch_mma_grouped(const SliceArgs& a, int tile_rows, int64_t n_tiles, Stream& stream);

}  // namespace t9::cuda
