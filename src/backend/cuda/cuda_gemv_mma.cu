// The few-row tensor-core GEMV (Q8_0, Q4_K, Q6_K; 2..32 activation rows): int8 mma.sync m16n8k32
// (k16 for Q6_K's 16-element groups) with 16 weight rows as A and groups of 8 activation rows as
// B, in the canonical order of cuda_units.cuh, so the same bits as the sliced GEMV and the tile
// kernel (rule 7).
//
// Why: a decode step of 8 agents multiplies every dense weight by 8 rows, a 32-way step by 32.
// The sliced GEMV's 8-row tile spends 8 dp4a and 3 float instructions per (weight row, Q8_0 unit,
// activation row) and is latency-bound (docs/CUDA.md stage 19: the 35B's DeltaNet in-projection
// at 8 rows ~19 us for 27 MB, 1.4 TB/s); the 64-row tile kernel moves the 8B's Q4_K weights at
// 0.3-0.55 TB/s at 32 rows. One mma gives a 16 x 8 block of a unit's integer sums; what is left per
// unit and row group is Unit::acc's float arithmetic.
//
// A block owns 16 weight rows and kGroups groups of 8 activation rows (blockIdx.y: the next
// 8 kGroups rows); warp w of kWarps takes slices [32 w / kWarps, 32 (w + 1) / kWarps) of all 16
// rows, a contiguous byte range per row, which it stages in shared memory with cp.async (before
// the dependent-launch wait when the weights are uploaded ones: SliceArgs::w_early) from the
// 16-byte boundary below it. Per unit it builds the A fragments and the rows' scales from the
// staged bytes once, then per row group reads the B fragments (the activation codes, from global
// memory: L1, every block reads the same rows), runs the mma and adds each output's term into its
// slice partial (Unit::acc), flushing the partials to shared memory where a slice ends
// (SliceWalk). After a barrier one thread per (weight row, activation row) adds the 32 partials
// in slice order from y = 0, then the bias.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_gemv_mma.cuh"
#include "backend/cuda/cuda_imma.cuh"
#include "backend/cuda/cuda_quant.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

constexpr int kRows = 16;                           // weight rows per block: the mma's m
constexpr int kToks = 8;                            // activation rows per group: the mma's n
constexpr int kMaxGroups = 4;                       // groups per block: up to 32 activation rows
constexpr int kMaxSmem = 200 << 10;                 // dynamic shared memory limit of the kernels
constexpr int kPartBytes = 32 * kRows * kToks * 4;  // one group's slice partials, bytes

// Per weight type: where a warp's units sit in a row, and one unit's A fragments, scales and terms.
template <GgmlType T>
struct Few;

// Q8_0: unit = one 34-byte block (f16 d, 32 codes); codes are 2-byte aligned, 4-byte aligned
// every other block (kA4).
template <>
struct Few<GgmlType::Q8_0> {
  using U = Unit<GgmlType::Q8_0>;
  static constexpr int kElems = 32;
  // The byte range of units [u0, u1) in a row.
  static __host__ __device__ int64_t begin(int64_t u0) { return 34 * u0; }
  static __host__ __device__ int64_t end(int64_t u1) { return 34 * u1; }
  struct A {
    uint32_t w[4];  // m16n8k32 A: rows g (h even) / g + 8 (odd), bytes 4q (h < 2) / 16 + 4q
    float d0, d1;   // the scales of rows g and g + 8
  };
  // blk: row g's unit (its d), stride: bytes between staged rows, q = lane % 4.
  template <bool kA4>
  static __device__ __forceinline__ A load(const uint8_t* blk, int stride, int q) {
    A a;
#pragma unroll
    for (int h = 0; h < 4; ++h)
      a.w[h] = lds32_at<kA4>(blk + 2 + 4 * q + 16 * (h / 2) + 8 * stride * (h % 2));
    a.d0 = f16(lds16(blk));
    a.d1 = f16(lds16(blk + 8 * stride));
    return a;
  }
  // One group's terms into p (accumulators: p[0] (row g, act 2q), p[1] (g, 2q + 1), p[2]
  // (g + 8, 2q), p[3] (g + 8, 2q + 1)). xg: the group's activation row g (+ 4q), valid when
  // `b`; xs0 / xs1: the ActBlocks of its rows 2q, 2q + 1.
  static __device__ __forceinline__ void terms(const A& a, int u, const int8_t* xg, bool b,
                                               const ActBlock* xs0, const ActBlock* xs1,
                                               float (&p)[4]) {
    uint32_t b0 = 0, b1 = 0;
    if (b) {
      b0 = __ldg(reinterpret_cast<const uint32_t*>(xg + 32 * u));
      b1 = __ldg(reinterpret_cast<const uint32_t*>(xg + 32 * u + 16));
    }
    int c[4];
    mma_k32(c, a.w, b0, b1);
    const ActBlock x0 = xs0[u], x1 = xs1[u];
    p[0] = U::acc(p[0], a.d0, x0, unbias(c[0]));
    p[1] = U::acc(p[1], a.d0, x1, unbias(c[1]));
    p[2] = U::acc(p[2], a.d1, x0, unbias(c[2]));
    p[3] = U::acc(p[3], a.d1, x1, unbias(c[3]));
  }
};

// The k-quants' units are the four quarters (64 inputs) of a super-block of kBytes: a warp stages
// the whole super-blocks its units touch, from the 16-byte boundary below the first (skew: none
// when kBytes is a multiple of 16, at most 14 bytes otherwise).
template <int kBytes>
struct SuperBlocks {
  static constexpr int kElems = 64, kSuperBytes = kBytes;
  static __host__ __device__ int64_t begin(int64_t u0) { return int64_t{kBytes} * (u0 / 4); }
  static __host__ __device__ int64_t end(int64_t u1) { return int64_t{kBytes} * ((u1 + 3) / 4); }
};

// Q4_K: unit p = u % 4 of a 144-byte super-block (f16 d, f16 dmin, 12 bytes of 6-bit scales and
// mins, 128 bytes of nibbles): elements 64p .. 64p + 63, sub-block 2p in the low nibbles of bytes
// 16 + 32p .., sub-block 2p + 1 in the high ones.
template <>
struct Few<GgmlType::Q4_K> : SuperBlocks<144> {
  using U = Unit<GgmlType::Q4_K>;
  struct A {
    uint32_t lo[4], hi[4];             // the two sub-blocks' A fragments (nibbles 0..15 fit s8)
    float s0[2], m0[2], s1[2], m1[2];  // rows g, g + 8: Unit<Q4_K>::load's scales and mins
  };
  // sb: row g's super-block; p: the unit in it.
  static __device__ __forceinline__ A load(const uint8_t* sb, int p, int stride, int q) {
    A a;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const uint32_t v = *reinterpret_cast<const uint32_t*>(sb + 16 + 32 * p + 4 * q +
                                                            16 * (h / 2) + 8 * stride * (h % 2));
      a.lo[h] = v & 0x0F0F0F0Fu;
      a.hi[h] = (v >> 4) & 0x0F0F0F0Fu;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t* b = sb + 8 * stride * r;
      const float d = f16(lds16(b)), dmin = f16(lds16(b + 2));
      int sc, mn;
      k_scale_min(b + 4, 2 * p, &sc, &mn);
      a.s0[r] = __fmul_rn(d, static_cast<float>(sc));
      a.m0[r] = __fmul_rn(dmin, static_cast<float>(mn));
      k_scale_min(b + 4, 2 * p + 1, &sc, &mn);
      a.s1[r] = __fmul_rn(d, static_cast<float>(sc));
      a.m1[r] = __fmul_rn(dmin, static_cast<float>(mn));
    }
    return a;
  }
  static __device__ __forceinline__ void terms(const A& a, int u, const int8_t* xg, bool b,
                                               const ActBlock* xs0, const ActBlock* xs1,
                                               float (&p)[4]) {
    int c[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // sub-block j: elements 64u + 32j ..
      uint32_t b0 = 0, b1 = 0;
      if (b) {
        b0 = __ldg(reinterpret_cast<const uint32_t*>(xg + 64 * u + 32 * j));
        b1 = __ldg(reinterpret_cast<const uint32_t*>(xg + 64 * u + 32 * j + 16));
      }
      mma_k32(c[j], j == 0 ? a.lo : a.hi, b0, b1);
    }
    const ActBlock x[2][2] = {{xs0[2 * u], xs0[2 * u + 1]}, {xs1[2 * u], xs1[2 * u + 1]}};
    // Unit<Q4_K>::dot_at's arithmetic (and the tile kernel's unit_acc): the first sub-block's
    // term scaled, the second's fused onto it, then added to the slice partial.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = i / 2, t = i % 2;
      const float in0 = U::inner(a.s0[r], a.m0[r], x[t][0], unbias(c[0][i]));
      const float in1 = U::inner(a.s1[r], a.m1[r], x[t][1], unbias(c[1][i]));
      p[i] = __fadd_rn(p[i], U::second(U::first(x[t][0], in0), x[t][1], in1));
    }
  }
};

// Q6_K: unit v = 2h + lh of a 210-byte super-block (ql 128 bytes, qh 64, 16 int8 scales, f16 d)
// is four groups s of 16 elements 128h + 32s + 16lh + i (Unit<Q6_K>): one k16 mma each, whose A
// fragment (4 elements i = 4q .. 4q + 3 of rows g and g + 8) is Unit<Q6_K>::load's word q of the
// group. Its words sit on 2-byte boundaries (210-byte super-blocks): lds32.
template <>
struct Few<GgmlType::Q6_K> : SuperBlocks<210> {
  using U = Unit<GgmlType::Q6_K>;
  struct A {
    uint32_t w[4][2];  // group s: rows g, g + 8
    float sc[4][2];    // group s's scale, rows g, g + 8
  };
  // sb: row g's super-block; v: the unit in it.
  static __device__ __forceinline__ A load(const uint8_t* sb, int v, int stride, int q) {
    A a;
    const int h = v / 2, lh = v % 2;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint8_t* b = sb + 8 * stride * r;
      const uint8_t* qa = b + 64 * h + 16 * lh + 4 * q;
      const uint32_t la = lds32(qa), lb = lds32(qa + 32);
      const uint32_t hb = lds32(b + 128 + 32 * h + 16 * lh + 4 * q);
      a.w[0][r] =
          static_cast<uint32_t>(to_signed<32>((la & 0x0F0F0F0Fu) | ((hb << 4) & 0x30303030u)));
      a.w[1][r] =
          static_cast<uint32_t>(to_signed<32>((lb & 0x0F0F0F0Fu) | ((hb << 2) & 0x30303030u)));
      a.w[2][r] =
          static_cast<uint32_t>(to_signed<32>(((la >> 4) & 0x0F0F0F0Fu) | (hb & 0x30303030u)));
      a.w[3][r] = static_cast<uint32_t>(
          to_signed<32>(((lb >> 4) & 0x0F0F0F0Fu) | ((hb >> 2) & 0x30303030u)));
      const float d = f16(lds16(b + 208));
#pragma unroll
      for (int s = 0; s < 4; ++s)
        a.sc[s][r] =
            __fmul_rn(d, static_cast<float>(static_cast<int8_t>(b[192 + 8 * h + 2 * s + lh])));
    }
    return a;
  }
  static __device__ __forceinline__ void terms(const A& a, int u, const int8_t* xg, bool b,
                                               const ActBlock* xs0, const ActBlock* xs1,
                                               float (&p)[4]) {
    const int sbi = u / 4, v = u % 4, h = v / 2, lh = v % 2;
    const int64_t x0 = 256 * static_cast<int64_t>(sbi) + 128 * h + 16 * lh;  // group 0's element
    const int64_t ab = 8 * static_cast<int64_t>(sbi) + 4 * h;                // and ActBlock
    float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint32_t bw = b ? __ldg(reinterpret_cast<const uint32_t*>(xg + x0 + 32 * s)) : 0u;
      int c[4];
      mma_k16(c, a.w[s][0], a.w[s][1], bw);
      const ActBlock xa[2] = {xs0[ab + s], xs1[ab + s]};
      // Unit<Q6_K>::group (the tile kernel's order): r = fma(a.d, sc * si, r) from 0.0f.
#pragma unroll
      for (int i = 0; i < 4; ++i) r[i] = U::group(r[i], a.sc[s][i / 2], xa[i % 2], unbias(c[i]));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = __fadd_rn(p[i], r[i]);
  }
};

template <GgmlType T, int kWarps, int kGroups>
__global__ void __launch_bounds__(kWarps * 32) gemv_mma_rows_kernel(SliceArgs a, int stride) {
  using F = Few<T>;
  constexpr int kT = kToks * kGroups;  // activation rows per block
  extern __shared__ __align__(16) uint8_t smem[];
  int64_t n_blocks = 0;
  const int64_t r0 = select_part(a, n_blocks) * kRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int n_units = static_cast<int>(a.n_in / F::kElems);
  const int l0 = 32 * warp / kWarps, l1 = 32 * (warp + 1) / kWarps;  // this warp's slices
  const int u0 = l0 * n_units / 32, u1 = l1 * n_units / 32;          // and their units
  uint8_t* rows = smem + warp * kRows * stride;
  float* part = reinterpret_cast<float*>(smem + kWarps * kRows * stride);  // [slice][row][act]
  // Rows start on 16-byte boundaries (the launcher checks w and row_bytes), so every row's range
  // sits `skew` bytes into its first granule.
  const int first = static_cast<int>(F::begin(u0)), skew = first % 16;
  const int granules = (skew + static_cast<int>(F::end(u1)) - first + 15) / 16;
  const auto stage = [&] {
    if (r0 >= a.n_out) return;
    for (int i = lane; i < kRows * granules; i += 32) {
      const int r = i / granules, c = i - r * granules;
      const int64_t o = min64(r0 + r, a.n_out - 1);  // past the last row: a copy of it, unused
      cp_async16(rows + r * stride + 16 * c, a.w + o * a.row_bytes + (first - skew) + 16 * c);
    }
    cp_async_commit();
  };
  if (a.w_early) stage();
  pdl_enter();
  if (r0 >= a.n_out) return;
  if (!a.w_early) stage();
  for (int i = l0 * kRows * kT + lane; i < l1 * kRows * kT; i += 32) part[i] = 0.0f;  // empty
  cp_async_wait_0();
  __syncwarp();

  const int g = lane / 4, q = lane % 4;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kT;
  // Per group k: its activation rows (n[k] <= 0: none), row g's codes (+ 4q), the ActBlocks of
  // rows 2q and 2q + 1 (clamped to valid rows; the outputs past n[k] are not stored).
  int n[kGroups];
  const int8_t* xg[kGroups];
  const ActBlock *xs0[kGroups], *xs1[kGroups];
  const int64_t n_blk = a.n_in / 32;  // ActBlocks per activation row
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const int64_t tk = t0 + kToks * k;
    n[k] = static_cast<int>(min64(kToks, a.n_tok - tk));
    const int64_t last = tk + max(n[k], 1) - 1;
    xg[k] = a.xq + min64(tk + g, last) * a.n_in + 4 * q;
    xs0[k] = a.xb + min64(tk + 2 * q, last) * n_blk;
    xs1[k] = a.xb + min64(tk + 2 * q + 1, last) * n_blk;
  }
  float p[kGroups][4];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) p[k][0] = p[k][1] = p[k][2] = p[k][3] = 0.0f;
  SliceWalk walk(n_units, u0);
  const auto group_terms = [&](const typename F::A& w, int u) {
#pragma unroll
    for (int k = 0; k < kGroups; ++k)
      if (n[k] > 0) F::terms(w, u, xg[k], g < n[k], xs0[k], xs1[k], p[k]);
    if (walk.ends_at(u)) {
      float* pl = part + walk.last * (kRows * kT);
#pragma unroll
      for (int k = 0; k < kGroups; ++k) {
        const int c = kToks * k + 2 * q;
        pl[g * kT + c] = p[k][0];
        pl[g * kT + c + 1] = p[k][1];
        pl[(g + 8) * kT + c] = p[k][2];
        pl[(g + 8) * kT + c + 1] = p[k][3];
        p[k][0] = p[k][1] = p[k][2] = p[k][3] = 0.0f;
      }
    }
  };
  // Row g's first staged byte (row g + 8's: + 8 stride).
  const uint8_t* wg = rows + g * stride + skew;
  if constexpr (T == GgmlType::Q8_0) {
    // 34-byte blocks: the units' codes alternate between 4- and 2-byte alignment (the same for
    // every row), so the units go in pairs whose two alignments are compile-time constants.
    const auto walk_pairs = [&](auto a4) {
      constexpr bool kFirst = decltype(a4)::value;
      int u = u0;
      for (; u + 1 < u1; u += 2) {
        group_terms(F::template load<kFirst>(wg + 34 * (u - u0), stride, q), u);
        group_terms(F::template load<!kFirst>(wg + 34 * (u + 1 - u0), stride, q), u + 1);
      }
      if (u < u1) group_terms(F::template load<kFirst>(wg + 34 * (u - u0), stride, q), u);
    };
    if (((skew + 2) & 3) == 0)
      walk_pairs(std::true_type{});
    else
      walk_pairs(std::false_type{});
  } else {
    for (int u = u0; u < u1; ++u)
      group_terms(F::load(wg + F::kSuperBytes * (u / 4 - u0 / 4), u % 4, stride, q), u);
  }
  __syncthreads();
  // y = 0, y += p_l for l = 0..31 (empty slices hold +0.0f, which changes no sum), + bias.
  for (int j = static_cast<int>(threadIdx.x); j < kRows * kT; j += kWarps * 32) {
    const int r = j / kT, t = j % kT;
    if (r0 + r >= a.n_out || t0 + t >= a.n_tok) continue;
    float y = 0.0f;
#pragma unroll 8
    for (int l = 0; l < 32; ++l) y = __fadd_rn(y, part[l * (kRows * kT) + j]);
    if (a.bias != nullptr) y = __fadd_rn(y, a.bias[r0 + r]);
    reinterpret_cast<float*>(a.y.row(t0 + t))[r0 + r] = y;
  }
}

// A call's launch shape: warps per block (8 for rows of 128 units or more, so each warp's staged
// range stays small, and for several row groups; else 4), row groups per block (what its rows
// need, 1, 2 or 4, halved while the shared memory does not fit), the staged row stride and the
// shared memory. The same bits for every shape: a slice's partial and the order of the final sum do
// not depend on which warp or block computed it.
struct Shape {
  int warps = 4, groups = 1, stride = 0, smem = 0;
};
template <GgmlType T>
Shape shape_of(int64_t n_in, int64_t n_tok) {
  Shape s;
  const int64_t n_units = n_in / Few<T>::kElems;
  const int64_t need = (n_tok + kToks - 1) / kToks;
  s.groups = need <= 1 ? 1 : need <= 2 ? 2 : kMaxGroups;
  // Several groups take 8 warps too: their slice partials (16 KB a group) leave room for one or
  // two blocks per SM, and 4 warps an SM would not hide a unit's chain of loads and mma.
  s.warps = n_units >= 128 || s.groups > 1 ? 8 : 4;
  // The largest range a warp stages (the kernel's split of the slices), plus its skew (even, at
  // most 14 bytes: rows start on 16-byte boundaries).
  int64_t bound = 0;
  for (int w = 0; w < s.warps; ++w) {
    const int64_t u0 = 32 * w / s.warps * n_units / 32, u1 = 32 * (w + 1) / s.warps * n_units / 32;
    bound = std::max(bound, 14 + Few<T>::end(u1) - Few<T>::begin(u0));
  }
  s.stride = static_cast<int>(16 * (((bound + 15) / 16) | 1));  // odd granules: banks (see A)
  const auto smem = [&](int groups) {
    return static_cast<int64_t>(s.warps) * kRows * s.stride + int64_t{groups} * kPartBytes;
  };
  while (s.groups > 1 && smem(s.groups) > kMaxSmem) s.groups /= 2;
  s.smem = static_cast<int>(std::min<int64_t>(smem(s.groups), kMaxSmem + 1));
  return s;
}

template <GgmlType T, int kWarps, int kGroups>
void launch_rows(dim3 grid, int smem, const SliceArgs& a, int stride, Stream& stream) {
  constexpr auto kernel = gemv_mma_rows_kernel<T, kWarps, kGroups>;
  static const bool attr = [] {  // once per kernel
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    return true;
  }();
  (void)attr;
  stream.launch(kernel, grid, kWarps * 32, smem, a, stride);
}

template <GgmlType T>
void launch_typed(const SliceArgs& a, Stream& stream) {
  const Shape s = shape_of<T>(a.n_in, a.n_tok);
  SliceArgs b = a;
  int64_t blocks = (a.n_out + kRows - 1) / kRows;
  if (b.parts.n > 0) blocks = part_blocks(b.parts, kRows, INT64_MAX);
  const int64_t tok_groups = (a.n_tok + kToks * s.groups - 1) / (kToks * s.groups);
  T9_CHECK(blocks <= 0x7fffffff && tok_groups <= 65535, "matmul: launch grid");
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(tok_groups));
  if (s.warps == 4) return launch_rows<T, 4, 1>(grid, s.smem, b, s.stride, stream);  // one group
  if (s.groups == 4) return launch_rows<T, 8, 4>(grid, s.smem, b, s.stride, stream);
  if (s.groups == 2) return launch_rows<T, 8, 2>(grid, s.smem, b, s.stride, stream);
  launch_rows<T, 8, 1>(grid, s.smem, b, s.stride, stream);
}

}  // namespace

bool mma_rows_fits(const SliceArgs& a, GgmlType t) {
  if ((t != GgmlType::Q8_0 && t != GgmlType::Q4_K && t != GgmlType::Q6_K) || a.ids != nullptr ||
      a.split_p != nullptr || a.row_bytes % 16 != 0)
    return false;
  if (a.n_in % (t == GgmlType::Q8_0 ? 32 : 256) != 0) return false;
  const auto aligned = [](const uint8_t* w) { return reinterpret_cast<uintptr_t>(w) % 16 == 0; };
  if (a.parts.n == 0 && !aligned(a.w)) return false;
  for (int i = 0; i < a.parts.n; ++i)
    if (!aligned(a.parts.part[i].w)) return false;
  const Shape s = t == GgmlType::Q4_K   ? shape_of<GgmlType::Q4_K>(a.n_in, a.n_tok)
                  : t == GgmlType::Q6_K ? shape_of<GgmlType::Q6_K>(a.n_in, a.n_tok)
                                        : shape_of<GgmlType::Q8_0>(a.n_in, a.n_tok);
  return s.smem <= kMaxSmem;
}

void launch_mma_rows(const SliceArgs& a, GgmlType t, Stream& stream) {
  if (t == GgmlType::Q4_K) return launch_typed<GgmlType::Q4_K>(a, stream);
  if (t == GgmlType::Q6_K) return launch_typed<GgmlType::Q6_K>(a, stream);
  launch_typed<GgmlType::Q8_0>(a, stream);
}

}  // namespace t9::cuda
