// Tensor-core matmul for many activation rows (Q4_K, Q6_K, Q8_0): int8 mma.sync (m16n8k32, and
// m16n8k16 for Q6_K's 16-element groups), the same bits as the sliced GEMV (cuda_units.cuh).
//
// A block computes a tile of kBM = 64 weight rows x kBN = 16 kNT activation rows (kNT = 4 from
// 33 rows on, 2 below: fewer wasted columns, more blocks per SM; matmul_id's grouped tiles may
// also take kNT = 1), walking n_in in chunks of
// 256 elements (one super-block, or eight Q8_0 blocks). Per chunk:
//   1. cp.async (issued one chunk ahead, double-buffered): each weight row's raw chunk bytes (from
//      the 16-byte boundary below; `skew` bytes in), the int8 activations and their ActBlocks.
//   2. decode: the block turns every (row, unit) of the chunk into signed int8 in element order
//      (Unit<T>::load, the GEMV's decode) plus float scales, in shared memory.
//   3. four warps (2 x 2, each 32 rows x 32 activation rows) take the units in order: per 32
//      (or 16) elements one mma per 16x8 sub-tile gives the exact integer sums, which the unit's
//      float arithmetic (Unit<T>::acc and its parts, shared with the GEMV) adds to the running
//      slice partial p; each output keeps p and the total y, flushed at slice ends (SliceWalk),
//      so y is the canonical order of cuda_units.cuh.
// Q8_0 in the narrow tiles (kNT <= 2) skips step 2 (direct form, direct_acc): the warps build their
// A fragments from the raw chunk itself (Q8_0's codes are plain int8, 2-byte aligned), the raw
// chunk is double-buffered, and a chunk costs one barrier instead of two.
// A block may take several weight tiles one after another (SliceArgs::w_tiles: grouped calls of
// few rows per expert), its set-up (expert, x row indices) done once.
// Small-row calls over few tiles split n_in over four launches (blockIdx.z: slices 8z .. 8z + 7,
// SliceArgs::split_p): each stores its slice partials, and split_total_kernel adds them in order.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_imma.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

constexpr int kBM = 64;               // weight rows per block
constexpr int kChunk = 256;           // elements per k-step
constexpr int kStride = kChunk + 16;  // bytes per row of decoded weights / activations (banks)
constexpr int kThreads = 128;
constexpr int kAbStride = 9;  // ActBlocks per activation row in shared memory (8 used; banks)

// Per type: units per chunk; floats per row of the chunk's scales (one pair more than used, so
// that the 8 rows a warp reads at once fall in different banks); the decoded unit's store.
template <GgmlType T>
struct MmaType;

// Q4_K, Q5_K (UnitKMin): (scale, min) of sub-block j as the float pair sc[2j], sc[2j + 1] (one
// 8-byte load).
template <GgmlType T>
struct MmaTypeKMin {
  static constexpr int kUnits = 4, kSc = 18;
  using U = Unit<T>;
  static __device__ __forceinline__ void store(const typename U::W& w, int lu, uint8_t* dec,
                                               float* sc) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      *reinterpret_cast<int4*>(dec + 64 * lu + 16 * k) =
          make_int4(w.q[4 * k], w.q[4 * k + 1], w.q[4 * k + 2], w.q[4 * k + 3]);
    *reinterpret_cast<float2*>(sc + 4 * lu) = make_float2(w.s0, w.m0);  // rows are 8-byte aligned
    *reinterpret_cast<float2*>(sc + 4 * lu + 2) = make_float2(w.s1, w.m1);
  }
};
template <>
struct MmaType<GgmlType::Q4_K> : MmaTypeKMin<GgmlType::Q4_K> {};
template <>
struct MmaType<GgmlType::Q5_K> : MmaTypeKMin<GgmlType::Q5_K> {};

template <>
struct MmaType<GgmlType::Q8_0> {
  static constexpr int kUnits = 8, kSc = 9;
  using U = Unit<GgmlType::Q8_0>;
  static __device__ __forceinline__ void store(const U::W& w, int lu, uint8_t* dec, float* sc) {
#pragma unroll
    for (int k = 0; k < 2; ++k)
      *reinterpret_cast<int4*>(dec + 32 * lu + 16 * k) =
          make_int4(w.q[4 * k], w.q[4 * k + 1], w.q[4 * k + 2], w.q[4 * k + 3]);
    sc[lu] = w.d;
  }
};

// Q6_K and Q3_K (UnitK16) unit v = 2h + lh: group s (16 elements) sits at element
// 128h + 32s + 16lh, scale 4v + s.
template <GgmlType T>
struct MmaTypeK16 {
  static constexpr int kUnits = 4, kSc = 17;
  using U = Unit<T>;
  static __device__ __forceinline__ void store(const typename U::W& w, int v, uint8_t* dec,
                                               float* sc) {
    const int h = v / 2, lh = v % 2;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      *reinterpret_cast<int4*>(dec + 128 * h + 32 * s + 16 * lh) =
          make_int4(w.q[4 * s], w.q[4 * s + 1], w.q[4 * s + 2], w.q[4 * s + 3]);
      sc[4 * v + s] = w.sc[s];
    }
  }
};
template <>
struct MmaType<GgmlType::Q6_K> : MmaTypeK16<GgmlType::Q6_K> {};
template <>
struct MmaType<GgmlType::Q3_K> : MmaTypeK16<GgmlType::Q3_K> {};

// Shared-memory layout of one block (bytes). kDirect (Q8_0, narrow tiles: direct_acc): two raw
// weight buffers and no decoded copy.
template <GgmlType T, int kNT, bool kDirect = false>
struct Smem {
  using U = Unit<T>;
  static constexpr int kBN = 16 * kNT;  // activation rows per block
  static constexpr int kChunkBytes = MmaType<T>::kUnits / U::kPerBlock * U::kBlockBytes;
  // The direct form's rows start on 16-byte boundaries (no skew) and are read by the mma's A
  // pattern: a stride of an odd number of 16-byte granules puts rows g = 0..7 in banks 4 k g mod
  // 32 (k odd) = eight distinct multiples of 4, each followed by its 4 words of tq, so a warp's 32
  // loads hit 32 banks. The chunk's own 272 bytes (68 words: banks 4g) need no padding; at 304
  // (stage 17's stride) a 32-row tile took 59.5 KB and three blocks per SM, at 272 55.5 KB and
  // four (by registers too: 128 at __launch_bounds__(128, 4)).
  static constexpr int kRawStride =
      kDirect ? (kChunkBytes + 15) / 16 * 16 : (kChunkBytes + 15 + 15) / 16 * 16;
  static constexpr int kRaw = (kDirect ? 2 : 1) * kBM * kRawStride;  // raw weight chunk(s)
  static constexpr int kAct = 2 * kBN * kStride;                     // int8 activations, 2 buffers
  static constexpr int kAb = 2 * kBN * kAbStride * 8;                // ActBlocks, 2 buffers
  static constexpr int kDec = kDirect ? 0 : kBM * kStride;           // decoded weights
  static constexpr int kScales = kDirect ? 0 : (kBM * MmaType<T>::kSc * 4 + 15) / 16 * 16;
  static constexpr int kBytes = kRaw + kAct + kAb + kDec + kScales;
  static_assert(kRaw % 16 == 0 && kAb % 16 == 0 && kDec % 16 == 0);
  static_assert(!kDirect || (T == GgmlType::Q8_0 && kNT <= 2 && kRawStride % 16 == 0 &&
                             kRawStride / 16 % 2 == 1));
};

__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr(dst)), "l"(src));
}

// A warp's view of the shared tiles. Fragments come from ldmatrix (cuda_common.cuh): lane l
// points at one 16-byte row of one 8x8 matrix. m16n8k32 A (weight rows wm*32 + 16mt ..): matrix
// m = l / 8 is rows 8(m % 2) .., bytes 16(m / 2) ..; B (activation rows, two 8-row tiles per
// x4): matrix m is tile m / 2, bytes 16(m % 2) ... m16n8k16 A: lane l is row l of the warp's 32
// (matrices = mt0 low, mt0 high, mt1 low, mt1 high); B: lane l is activation row l (tile l / 8).
// Accumulators: weight row row0 + mt*16 + 8*(i/2), activation row tok0 + nt*8 + i%2 (g = lane / 4,
// t = lane % 4: row0 = wm*32 + g, tok0 = wn*kWN + 2t).
struct WarpTile {
  const uint8_t* a32;  // decoded weights, this lane's k32 A row
  const uint8_t* b32;  // activations, this lane's k32 B row (buffer 0)
  const uint8_t* a16;  // decoded weights, this lane's k16 A row
  const uint8_t* b16;  // activations, this lane's k16 B row (buffer 0)
  int row0, tok0;
};

// B fragments (activations) of the 32 elements at column k0 for the warp's kNT 8-row tiles.
template <int kNT>
__device__ __forceinline__ void load_b32(const WarpTile& w, int boff, int k0,
                                         uint32_t (&b)[kNT][2]) {
  if constexpr (kNT == 1) {
    ldmatrix_x2(b[0], w.b32 + boff + k0);
  } else {
#pragma unroll
    for (int np = 0; np < kNT / 2; ++np) {
      uint32_t r[4];
      ldmatrix_x4(r, w.b32 + boff + np * 16 * kStride + k0);
      b[2 * np][0] = r[0], b[2 * np][1] = r[1], b[2 * np + 1][0] = r[2], b[2 * np + 1][1] = r[3];
    }
  }
}

// Integer sums of the 32 elements at column k0 for the warp's 2 x kNT sub-tiles.
template <int kNT>
__device__ __forceinline__ void sums_k32(const WarpTile& w, int boff, int k0, int (&c)[2][kNT][4]) {
  uint32_t a[2][4], b[kNT][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) ldmatrix_x4(a[mt], w.a32 + mt * 16 * kStride + k0);
  load_b32<kNT>(w, boff, k0, b);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mma_k32(c[mt][nt], a[mt], b[nt][0], b[nt][1]);
}

// The same for the 16 elements at column k0.
template <int kNT>
__device__ __forceinline__ void sums_k16(const WarpTile& w, int boff, int k0, int (&c)[2][kNT][4]) {
  uint32_t a[4], b[4];
  ldmatrix_x4(a, w.a16 + k0);
  if constexpr (kNT == 4) {
    ldmatrix_x4(b, w.b16 + boff + k0);
  } else if constexpr (kNT == 2) {
    uint32_t r[2];
    ldmatrix_x2(r, w.b16 + boff + k0);
    b[0] = r[0], b[1] = r[1];
  } else {
    ldmatrix_x1(b[0], w.b16 + boff + k0);
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mma_k16(c[mt][nt], a[2 * mt], a[2 * mt + 1], b[nt]);
}

// Accumulator element i of sub-tile (mt, nt): weight row row0 + mt*16 + 8*(i/2), activation row
// tok0 + nt*8 + i%2.
#define T9_FOR_ACC(...)                                   \
  _Pragma("unroll") for (int mt = 0; mt < 2; ++mt)        \
      _Pragma("unroll") for (int nt = 0; nt < kNT; ++nt)  \
          _Pragma("unroll") for (int i = 0; i < 4; ++i) { \
    __VA_ARGS__;                                          \
  }

// p = Unit<T>::acc(p, unit lu) for every accumulator of the warp (cuda_units.cuh: the same float
// functions as the GEMV, on the same integer sums).
template <GgmlType T, int kNT>
__device__ __forceinline__ void unit_acc(const WarpTile& w, int boff, int lu, const float* sc,
                                         const ActBlock* ab, float (&p)[2][kNT][4]) {
  using U = Unit<T>;
  constexpr int kS = MmaType<T>::kSc;
  int c[2][kNT][4];
  if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    float d[2][kNT][4];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int j = 2 * lu + k;  // sub-block
      sums_k32<kNT>(w, boff, 32 * j, c);
      T9_FOR_ACC({
        const int r = w.row0 + mt * 16 + 8 * (i / 2), t = w.tok0 + nt * 8 + i % 2;
        const float2 sm = *reinterpret_cast<const float2*>(sc + r * kS + 2 * j);
        const ActBlock at = ab[t * kAbStride + j];
        const float in = U::inner(sm.x, sm.y, at, unbias(c[mt][nt][i]));
        d[mt][nt][i] = k == 0 ? U::first(at, in) : U::second(d[mt][nt][i], at, in);
      })
    }
    T9_FOR_ACC(p[mt][nt][i] = __fadd_rn(p[mt][nt][i], d[mt][nt][i]))
  } else if constexpr (T == GgmlType::Q8_0) {
    sums_k32<kNT>(w, boff, 32 * lu, c);
    T9_FOR_ACC({
      const int r = w.row0 + mt * 16 + 8 * (i / 2), t = w.tok0 + nt * 8 + i % 2;
      p[mt][nt][i] =
          U::acc(p[mt][nt][i], sc[r * kS + lu], ab[t * kAbStride + lu], unbias(c[mt][nt][i]));
    })
  } else {  // Q6_K, Q3_K: unit v = lu = 2h + lh, groups s = 0..3
    const int h = lu / 2, lh = lu % 2;
    float d[2][kNT][4];
    T9_FOR_ACC(d[mt][nt][i] = 0.0f)
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      sums_k16<kNT>(w, boff, 128 * h + 32 * s + 16 * lh, c);
      T9_FOR_ACC({
        const int r = w.row0 + mt * 16 + 8 * (i / 2), t = w.tok0 + nt * 8 + i % 2;
        d[mt][nt][i] = U::group(d[mt][nt][i], sc[r * kS + 4 * lu + s],
                                ab[t * kAbStride + 4 * h + s], unbias(c[mt][nt][i]));
      })
    }
    T9_FOR_ACC(p[mt][nt][i] = __fadd_rn(p[mt][nt][i], d[mt][nt][i]))
  }
}

// Q8_0's direct form of unit_acc: the A fragments and scales come straight from the raw chunk
// (row r's unit lu: f16 d at byte 34 lu, codes at 34 lu + 2 — 4-byte aligned for odd lu, 2-byte
// for even), so the block needs no decode pass and no decoded copy (MmaCopies). raw is this
// lane's first row (wm * 32 + g) in the chunk's buffer, plus 4 tq. Same integer sums and the same
// Unit::acc as unit_acc: the same bits.
template <int kNT, int kRawStride>
__device__ __forceinline__ void direct_acc(const WarpTile& w, const uint8_t* raw, int boff, int lu,
                                           const ActBlock* ab, float (&p)[2][kNT][4]) {
  using U = Unit<GgmlType::Q8_0>;
  constexpr int kBlock = U::kBlockBytes;
  const uint8_t* q = raw + kBlock * lu + 2;
  uint32_t a[2][4], b[kNT][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 4; ++h) {  // m16n8k32 A: rows g (h even) / g + 8 (odd), bytes 16 (h / 2)
      const uint8_t* at = q + (16 * mt + 8 * (h % 2)) * kRawStride + 16 * (h / 2);
      a[mt][h] = (kBlock * lu + 2) % 4 == 0 ? lds32_at<true>(at) : lds32_at<false>(at);
    }
  load_b32<kNT>(w, boff, 32 * lu, b);
  int c[2][kNT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mma_k32(c[mt][nt], a[mt], b[nt][0], b[nt][1]);
  // The scales of rows g, g + 8 of each 16-row sub-tile (the lane's 4 tq bytes taken back off).
  const uint8_t* ds = raw - 4 * (threadIdx.x % 4) + kBlock * lu;
  float d[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) d[mt][h] = f16(lds16(ds + (16 * mt + 8 * h) * kRawStride));
  T9_FOR_ACC({
    const int t = w.tok0 + nt * 8 + i % 2;
    p[mt][nt][i] = U::acc(p[mt][nt][i], d[mt][i / 2], ab[t * kAbStride + lu], unbias(c[mt][nt][i]));
  })
}

// The block's copies and decode. Each thread copies fixed rows, whose addresses it computes once:
// weight row tid / kTW (kTW = kThreads / kBM threads per row) and activation row tid / kTX; per
// chunk a copy is one offset and one predicate. A weight row's chunk is copied from the 16-byte
// boundary below it (rows may start on any 2-byte boundary; Q6_K chunks are 210 bytes): the data
// then sits `skew` bytes in, recomputed per chunk from the row's low address bits (row_lo).
template <GgmlType T, int kNT, bool kDirect = false>
struct MmaCopies {
  using U = Unit<T>;
  using M = MmaType<T>;
  using L = Smem<T, kNT, kDirect>;
  static constexpr int kBN = L::kBN;
  static constexpr int kTW = kThreads / kBM, kTX = kThreads / kBN;
  static constexpr int kG = L::kRawStride / 16;  // 16-byte granules per raw row
  static_assert(kThreads % kBM == 0 && kThreads % kBN == 0 && 8 % kTX == 0);

  const uint8_t* w_row;  // this thread's weight row, chunk 0
  const int8_t* x_row;   // this thread's activation row (null past the rows)
  const ActBlock* b_row;
  uint8_t* w_dst;  // its raw row in shared memory
  int wi0, xi0;    // its first granule (weights, activations)

  __device__ __forceinline__ MmaCopies(const SliceArgs& a, int64_t o0, const int32_t* x_rows,
                                       uint8_t* smem) {
    const int tid = threadIdx.x;
    set_tile(a, o0);
    w_dst = smem + tid / kTW * L::kRawStride;
    wi0 = tid % kTW;
    const int64_t xr = x_rows[tid / kTX];  // -1 past the rows
    x_row = xr >= 0 ? a.xq + xr * a.n_in : nullptr;
    b_row = xr >= 0 ? a.xb + xr * (a.n_in / 32) : nullptr;
    xi0 = tid % kTX;
  }
  // The weight tile of rows o0 .. o0 + 63 (for the next issue_w).
  __device__ __forceinline__ void set_tile(const SliceArgs& a, int64_t o0) {
    w_row = a.w + min64(o0 + threadIdx.x / kTW, a.n_out - 1) * a.row_bytes;
  }
  // Chunk c (of `units` units) of this thread's weight row into raw buffer buf (the direct form
  // has two), and the row's low address bits into row_lo (for the decode's skew; read after the
  // block's next barrier; null in the direct form, whose rows are 16-byte aligned).
  __device__ __forceinline__ void issue_w(int64_t c, int units, uint8_t* row_lo,
                                          int buf = 0) const {
    if (row_lo != nullptr && threadIdx.x % kTW == 0)
      row_lo[threadIdx.x / kTW] = static_cast<uint8_t>(reinterpret_cast<uintptr_t>(w_row) & 15);
    uint8_t* dst = w_dst + buf * (kBM * L::kRawStride);
    const uint8_t* src = w_row + c * L::kChunkBytes;
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    const int end = skew + units / U::kPerBlock * U::kBlockBytes;
    src -= skew;
#pragma unroll
    for (int k = 0; k < (kG + kTW - 1) / kTW; ++k) {
      const int i = wi0 + kTW * k;
      if (i < kG && 16 * i < end) cp_async16(dst + 16 * i, src + 16 * i);
    }
  }
  // Chunk c of this thread's activation row and its ActBlocks into buffer buf.
  __device__ __forceinline__ void issue_x(int64_t c, int units, int buf, uint8_t* smem) const {
    if (x_row == nullptr) return;
    const int r = threadIdx.x / kTX, elems = units * U::kElems;
    uint8_t* act = smem + L::kRaw + (buf * kBN + r) * kStride;
    auto* ab = reinterpret_cast<ActBlock*>(smem + L::kRaw + L::kAct) + (buf * kBN + r) * kAbStride;
    const auto* xs = reinterpret_cast<const uint8_t*>(x_row + c * kChunk);
#pragma unroll
    for (int k = 0; k < 16 / kTX; ++k) {
      const int i = xi0 + kTX * k;
      if (16 * i < elems) cp_async16(act + 16 * i, xs + 16 * i);
    }
#pragma unroll
    for (int k = 0; k < 8 / kTX; ++k) {
      const int i = xi0 + kTX * k;
      if (32 * i < elems) cp_async8(ab + i, b_row + c * (kChunk / 32) + i);
    }
  }
  // Every (row, unit) of chunk c: raw bytes to int8 in element order + float scales.
  static __device__ __forceinline__ void decode(int64_t c, int units, uint8_t* smem,
                                                const uint8_t* row_lo) {
    const uint8_t* raw = smem;
    uint8_t* dec = smem + L::kRaw + L::kAct + L::kAb;
    auto* sc = reinterpret_cast<float*>(dec + L::kDec);
    static_assert(kBM * M::kUnits % kThreads == 0);
#pragma unroll
    for (int k = 0; k < kBM * M::kUnits / kThreads; ++k) {
      const int idx = threadIdx.x + kThreads * k, r = idx / M::kUnits, lu = idx % M::kUnits;
      if (lu >= units) continue;
      const int skew = (row_lo[r] + static_cast<int>(c % 16) * L::kChunkBytes) & 15;
      const typename U::W w = U::load(
          raw + r * L::kRawStride + skew + (lu / U::kPerBlock) * U::kBlockBytes, lu % U::kPerBlock);
      M::store(w, lu, dec + r * kStride, sc + r * M::kSc);
    }
  }
};

// Blocks per SM the register budget is cut for: 4 for the narrow tiles; 3 for Q4_K's 64-row
// tiles (168 registers, no spills, and 3 x 76 KB of shared memory fit the H200's 228 KB: 12 warps
// per SM instead of 8 on the prefill GEMMs); 2 for the others (their shared memory allows no
// third block).
template <GgmlType T, int kNT>
constexpr int kMinBlocks = kNT <= 2              ? 4
                           : T == GgmlType::Q4_K ? 3
                                                 : 2;
// Dynamic + static (x_rows, row_lo) + the driver's 1 KB per block, three times in 228 KB; four
// for Q8_0's direct 32-row tiles.
static_assert(3 * (Smem<GgmlType::Q4_K, 4>::kBytes + 64 * 4 + kBM + 1024) <= 228 * 1024);
static_assert(4 * (Smem<GgmlType::Q8_0, 2, true>::kBytes + 32 * 4 + kBM + 1024) <= 228 * 1024);

// Whether blocks of kNT-wide tiles take several weight tiles (SliceArgs::w_tiles): not the
// 64-row tiles, whose loop state spilled Q4_K's registers (196 bytes against 28, ptxas -v).
template <int kNT>
constexpr bool kLoopTiles = kNT <= 2;

// kDirect: Q8_0's direct form (direct_acc): per chunk one barrier, after which the next chunk is
// issued into the other raw buffer; the decoded form waits at a second barrier for the decode.
// kMaySplit: the kernel of the split form's launches (it serves whole calls too); the others
// carry no partial stores, which are most of the chunk loop's code (128 stores and their tests
// for a 64-row tile, inlined at every slice end).
// kL > 0 (whole calls only, fixed_slice_units below): every slice holds kL units (1: at most
// one) and kL divides a chunk's units, so the slice ends inside a chunk are known at compile
// time. The generic walk tests each unit at run time (SliceWalk::ends_at, a loop) and each unit
// for the split form's bounds; those branches made every unit a divergence region (BSSY/BSYNC
// in the SASS) that the compiler cannot schedule across, so one unit's shared loads and mma
// could not issue under the previous unit's float work.
template <GgmlType T, int kNT, bool kDirect, bool kMaySplit, int kL = 0>
__global__ void __launch_bounds__(kThreads, kMinBlocks<T, kNT>) mma_kernel(SliceArgs a) {
  static_assert(kL == 0 || (!kMaySplit && MmaType<T>::kUnits % (kL > 0 ? kL : 1) == 0));
  using K = MmaCopies<T, kNT, kDirect>;
  using M = MmaType<T>;
  using L = Smem<T, kNT, kDirect>;
  constexpr int kBN = L::kBN, kWN = kBN / 2;  // activation rows per block, per warp
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 2, wn = warp % 2, g = lane / 4, tq = lane % 4;
  int64_t part_tiles;
  // The block's weight tiles: w_tiles of them from row o_first (fewer at the part's end). Only
  // the narrow tiles loop: the 64-row tile's registers are full (kLoopTiles).
  const int w_tiles = kLoopTiles<kNT> ? a.w_tiles : 1;
  const int64_t o_first = select_part(a, part_tiles) * kBM * w_tiles;
  const int n_wt =
      kLoopTiles<kNT> ? static_cast<int>(min64(w_tiles, (a.n_out - o_first + kBM - 1) / kBM)) : 1;
  int64_t t0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const bool grouped = a.tile_first != nullptr;  // matmul_id: the tile's expert from the sort
  // The sort (and any x_rows) are a predecessor's output: read after the wait.
  const bool early = a.w_early && !grouped && a.x_rows == nullptr;
  if (!early) pdl_enter();
  if (grouped && !select_expert(a, kBN, t0)) return;
  const int n_units = static_cast<int>(a.n_in / Unit<T>::kElems);
  // Units [u_begin, u_end): all, or (split form) those of slices 8z .. 8z + 7.
  const bool split = kMaySplit && a.split_p != nullptr;
  const int z = static_cast<int>(blockIdx.z);
  const int u_begin = split ? static_cast<int>(slice_begin(8 * z, n_units)) : 0;
  const int u_end = split ? static_cast<int>(slice_begin(8 * z + 8, n_units)) : n_units;
  const int64_t c_begin = u_begin / M::kUnits, c_end = (u_end + M::kUnits - 1) / M::kUnits;
  uint8_t* dec = smem + L::kRaw + L::kAct + L::kAb;
  const auto* sc = reinterpret_cast<const float*>(dec + L::kDec);

  // Each tile row's x row, once (grouped matmul_id: through the sort's x_rows); the low address
  // bits of each weight row (for the decode's skew).
  __shared__ int32_t x_rows[kBN];  // 32-bit: Q4_K's three blocks per SM need the 256 bytes
  __shared__ uint8_t row_lo[kBM];  // unused by the direct form
  for (int r = threadIdx.x; r < kBN; r += kThreads)
    x_rows[r] = t0 + r >= a.n_tok     ? -1
                : a.x_rows != nullptr ? a.x_rows[t0 + r]
                                      : static_cast<int32_t>(t0 + r);
  __syncthreads();
  K copies(a, o_first, x_rows, smem);

  SliceWalk slices(n_units, u_begin);
  float p[2][kNT][4], y[2][kNT][4];
  T9_FOR_ACC(p[mt][nt][i] = 0.0f; y[mt][nt][i] = 0.0f)

  const auto units_of = [&](int64_t c) {
    return min(M::kUnits, n_units - static_cast<int>(c) * M::kUnits);
  };
  // c_begin < c_end: n_in holds at least one unit, and the split form's launches eight slices.
  copies.issue_w(c_begin, units_of(c_begin), kDirect ? nullptr : row_lo);
  if (early) pdl_enter();  // the first weights are in flight; x is a predecessor's output
  copies.issue_x(c_begin, units_of(c_begin), 0, smem);
  cp_async_commit();
  const uint8_t* act = smem + L::kRaw;
  const WarpTile w{dec + (wm * 32 + lane % 8 + 8 * ((lane / 8) % 2)) * kStride + 16 * (lane / 16),
                   act + (wn * kWN + lane % 8 + 8 * (lane / 16)) * kStride + 16 * ((lane / 8) % 2),
                   dec + (wm * 32 + lane) * kStride,
                   act + (wn * kWN + lane % kWN) * kStride,
                   wm * 32 + g,
                   wn * kWN + 2 * tq};
  const uint8_t* raw_lane = smem + (wm * 32 + g) * L::kRawStride + 4 * tq;  // direct form
  // A warp whose activation rows all lie past the tile's rows (n_tok: the expert's pairs in a
  // grouped call, where a 16-row tile holds ~5 of them in a warm agent turn) copies and decodes
  // with the block but multiplies nothing: its outputs are never stored. Uniform per warp. Not
  // for the 64-row tiles (mostly full; the flag cost Q4_K's 168 registers 16 bytes of spills).
  const bool mma_idle = kNT <= 2 && t0 + wn * kWN >= a.n_tok;
  // Chunk c of weight tile j is multiplied while the next one (of this tile or the next) is in
  // flight: a block of several weight tiles streams them back to back, paying the set-up above
  // once (x's chunks are re-read per tile, from L2).
  int buf = 0;
  for (int j = 0; j < n_wt; ++j) {
    const int64_t o0 = o_first + j * kBM;
    for (int64_t c = c_begin; c < c_end; ++c, buf ^= 1) {
      const int units = units_of(c);
      const bool next_in_tile = c + 1 < c_end, more = next_in_tile || j + 1 < n_wt;
      const int64_t cn = next_in_tile ? c + 1 : c_begin;
      const int lo = max(u_begin - static_cast<int>(c) * M::kUnits, 0);
      const int hi = min(u_end - static_cast<int>(c) * M::kUnits, units);
      cp_async_wait_0();
      __syncthreads();  // this chunk landed for every thread; every warp is done with the last
      if constexpr (kDirect) {  // the last chunk's buffers are free
        if (more) {
          if (!next_in_tile) copies.set_tile(a, o0 + kBM);
          copies.issue_w(cn, units_of(cn), nullptr, buf ^ 1);
          copies.issue_x(cn, units_of(cn), buf ^ 1, smem);
        }
      } else {
        if (more) copies.issue_x(cn, units_of(cn), buf ^ 1, smem);
        K::decode(c, units, smem, row_lo);
        __syncthreads();  // decoded; the raw buffer and row_lo are free
        if (more) {
          if (!next_in_tile) copies.set_tile(a, o0 + kBM);
          copies.issue_w(cn, units_of(cn), row_lo);
        }
      }
      cp_async_commit();  // the next chunk's weights and activations land while this one multiplies
      const int boff = buf * kBN * kStride;
      const auto* ab =
          reinterpret_cast<const ActBlock*>(smem + L::kRaw + L::kAct) + buf * kBN * kAbStride;
      if (mma_idle) continue;
      if constexpr (kL > 0) {  // full chunks, slice ends at compile-time units
#pragma unroll
        for (int lu = 0; lu < M::kUnits; ++lu) {
          if constexpr (kDirect)
            direct_acc<kNT, L::kRawStride>(w, raw_lane + buf * (kBM * L::kRawStride), boff, lu, ab,
                                           p);
          else
            unit_acc<T, kNT>(w, boff, lu, sc, ab, p);
          if ((lu + 1) % kL == 0)
            T9_FOR_ACC(y[mt][nt][i] = __fadd_rn(y[mt][nt][i], p[mt][nt][i]); p[mt][nt][i] = 0.0f)
        }
      } else {
#pragma unroll
        for (int lu = 0; lu < M::kUnits; ++lu) {
          if (lu >= hi) break;
          if (lu < lo) continue;  // before a split launch's first unit
          if constexpr (kDirect)
            direct_acc<kNT, L::kRawStride>(w, raw_lane + buf * (kBM * L::kRawStride), boff, lu, ab,
                                           p);
          else
            unit_acc<T, kNT>(w, boff, lu, sc, ab, p);
          if (slices.ends_at(static_cast<int>(c) * M::kUnits + lu)) {  // uniform across the block
            if (split) {
              T9_FOR_ACC({
                const int64_t o = o0 + wm * 32 + mt * 16 + g + 8 * (i / 2);
                const int64_t t = t0 + wn * kWN + nt * 8 + 2 * tq + i % 2;
                if (o < a.n_out && t < a.n_tok)
                  a.split_p[(slices.last * a.n_tok + t) * a.n_out + o] = p[mt][nt][i];
                p[mt][nt][i] = 0.0f;
              })
            } else {
              T9_FOR_ACC(y[mt][nt][i] = __fadd_rn(y[mt][nt][i], p[mt][nt][i]); p[mt][nt][i] = 0.0f)
            }
          }
        }
      }
    }
    if (split) return;  // one tile (w_tiles == 1)
    T9_FOR_ACC({
      const int64_t o = o0 + wm * 32 + mt * 16 + g + 8 * (i / 2);
      const int64_t t = t0 + wn * kWN + nt * 8 + 2 * tq + i % 2;
      if (o < a.n_out && t < a.n_tok) {
        float* yr = reinterpret_cast<float*>(a.y.row(a.y_rows != nullptr ? a.y_rows[t] : t));
        yr[o] = a.bias != nullptr ? __fadd_rn(y[mt][nt][i], a.bias[o]) : y[mt][nt][i];
      }
      y[mt][nt][i] = 0.0f;
    })
    slices = SliceWalk(n_units, u_begin);
  }
}

#undef T9_FOR_ACC

// The split form's second step: y = 0, y += p_l for the non-empty slices l = 0..31 in order,
// + bias (the canonical order, cuda_units.cuh), one thread per output.
// With parts, its blocks are split among them by block_first (set by launch_tiles).
__global__ void split_total_kernel(SliceArgs a, int n_units) {
  pdl_enter();
  int64_t part_blocks_;
  const int64_t i = select_part(a, part_blocks_) * blockDim.x + threadIdx.x;
  if (i >= a.n_tok * a.n_out) return;
  const int64_t t = i / a.n_out, o = i % a.n_out, plane = a.n_tok * a.n_out;
  float y = 0.0f;
  for (int l = 0; l < 32; ++l)
    if (slice_begin(l + 1, n_units) > slice_begin(l, n_units))
      y = __fadd_rn(y, a.split_p[l * plane + i]);
  reinterpret_cast<float*>(a.y.row(t))[o] = a.bias != nullptr ? __fadd_rn(y, a.bias[o]) : y;
}

// Whether whole calls of type T take mma_kernel<..., false> (no partial stores) rather than the
// split-capable kernel. Run 134 (cuda_gemv_bench, 2048 / 500 / 200 rows, same bits, two repeats):
// Q4_K 3-4% and Q6_K 2-4% faster without the stores (4096 -> 12288 at 2048 rows: 2072 -> 1992 us;
// Q6_K 2782 -> 2682), Q8_0 3-6% slower (2060 -> 2124; 12288 -> 4096 2058 -> 2174), so Q8_0 keeps
// one kernel for both forms.
template <GgmlType T>
constexpr bool kWholeKernel = T != GgmlType::Q8_0;

// Units per slice when every slice of a row of n_units holds the same count dividing a chunk's
// units (mma_kernel's kL): 1 (n_units <= 32: at most one unit each), 2 or 4; else 0 (the
// generic walk). Whole chunks only. Kernels exist for Q8_0's 1, 2 and 4 (n_in 512, 2048, 4096:
// every matmul of Qwen3.5-35B-A3B; run 147: 15-22% faster per call) and Q4_K's and Q6_K's 2
// (n_in 4096: Qwen3-8B's projections but the down projection; run 149 against the walk: Q6_K
// 4-5% faster, Q4_K 1-3% at 2048 rows and 512-row 4096 -> 6144, but 4096 -> 4096 at 512 rows 6%
// slower, 260 vs 245 us). TEMPO9_CUDA_MMA_FIXED_SLICES=0 (read once, A/B runs): always 0. The
// same bits either way.
template <GgmlType T>
constexpr bool kHasFixedSlices(int l) {
  return T == GgmlType::Q8_0 ? l == 1 || l == 2 || l == 4 : l == 2;
}
template <GgmlType T>
int fixed_slice_units(int64_t n_units) {
  static const bool off = env_off("TEMPO9_CUDA_MMA_FIXED_SLICES");
  int l = 0;
  if (n_units <= 32)
    l = 1;
  else if (n_units == 64)
    l = 2;
  else if (n_units == 128)
    l = 4;
  const bool ok = !off && n_units % MmaType<T>::kUnits == 0 && l > 0 &&
                  MmaType<T>::kUnits % l == 0 && kHasFixedSlices<T>(l);
  return ok ? l : 0;
}

template <GgmlType T, int kNT, bool kDirect = false>
void launch_tiles(const SliceArgs& a, Stream& stream, int64_t n_tiles = -1) {
  // TEMPO9_CUDA_MMA_SMEM_PAD=N (read once, A/B runs): N more bytes of shared memory per block,
  // to measure a tile at fewer blocks per SM with the same code (the same bits).
  static const int pad = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MMA_SMEM_PAD");
    return e != nullptr ? std::clamp(std::atoi(e), 0, 64 * 1024) : 0;
  }();
  const int smem_bytes = Smem<T, kNT, kDirect>::kBytes + pad;
  constexpr int kBN = Smem<T, kNT>::kBN;
  const auto set_attrs = [smem_bytes](auto kernel) {
    CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    // The whole 228 KB as shared memory: the blocks per SM are then set by registers and
    // smem_bytes.
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
  };
  static const bool attr_set = [&] {
    set_attrs(mma_kernel<T, kNT, kDirect, true>);
    if constexpr (kWholeKernel<T>) set_attrs(mma_kernel<T, kNT, kDirect, false>);
    if constexpr (kHasFixedSlices<T>(1)) set_attrs(mma_kernel<T, kNT, kDirect, false, 1>);
    if constexpr (kHasFixedSlices<T>(2)) set_attrs(mma_kernel<T, kNT, kDirect, false, 2>);
    if constexpr (kHasFixedSlices<T>(4)) set_attrs(mma_kernel<T, kNT, kDirect, false, 4>);
    return true;
  }();
  (void)attr_set;
  // TEMPO9_CUDA_MMA_ONE_KERNEL=1 (read once, A/B runs): the split-capable kernel for whole calls
  // of every type, as before the two were separate. The same bits.
  static const bool one_kernel = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MMA_ONE_KERNEL");
    return e != nullptr && e[0] == '1';
  }();
  const int64_t tiles_t = n_tiles >= 0 ? n_tiles : (a.n_tok + kBN - 1) / kBN;
  T9_CHECK(tiles_t <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  const bool split = a.split_p != nullptr || (a.parts.n > 0 && a.parts.part[0].split_p != nullptr);
  auto kernel = mma_kernel<T, kNT, kDirect, true>;
  if constexpr (kWholeKernel<T>)
    if (!split && !one_kernel) kernel = mma_kernel<T, kNT, kDirect, false>;
  if (!split && !one_kernel) {
    const int l = fixed_slice_units<T>(a.n_in / Unit<T>::kElems);
    if constexpr (kHasFixedSlices<T>(1))
      if (l == 1) kernel = mma_kernel<T, kNT, kDirect, false, 1>;
    if constexpr (kHasFixedSlices<T>(2))
      if (l == 2) kernel = mma_kernel<T, kNT, kDirect, false, 2>;
    if constexpr (kHasFixedSlices<T>(4))
      if (l == 4) kernel = mma_kernel<T, kNT, kDirect, false, 4>;
  }
  T9_CHECK(a.w_tiles == 1 || (a.w_tiles > 1 && kLoopTiles<kNT> && !split),
           "matmul: {} weight tiles per block", a.w_tiles);
  SliceArgs b = a;  // with parts: their blocks (w_tiles tiles of 64 weight rows each) along x
  const int64_t rows_per_block = int64_t{kBM} * a.w_tiles;
  const int64_t tiles_w = b.parts.n > 0 ? part_blocks(b.parts, rows_per_block, INT64_MAX)
                                        : grid_1d(a.n_out, rows_per_block);
  const dim3 grid(static_cast<unsigned>(tiles_w), static_cast<unsigned>(tiles_t), split ? 4 : 1);
  stream.launch(kernel, grid, kThreads, smem_bytes, b);
  if (!split) return;
  int64_t total_blocks = grid_1d(a.n_tok * a.n_out, 256);
  if (b.parts.n > 0) {  // one thread per output of each part
    total_blocks = 0;
    for (int i = 0; i < b.parts.n; ++i) {
      b.parts.block_first[i] = static_cast<int32_t>(total_blocks);
      total_blocks += grid_1d(a.n_tok * b.parts.part[i].n_out, 256);
    }
    b.parts.block_first[b.parts.n] = static_cast<int32_t>(total_blocks);
  }
  stream.launch(split_total_kernel, static_cast<unsigned>(total_blocks), 256, 0, b,
                static_cast<int>(a.n_in / Unit<T>::kElems));
}

// Whether a narrow-tile call takes Q8_0's direct form: every weight row and chunk (272 bytes)
// must start on a 16-byte boundary (the raw rows are read in place, without the decode's skew).
// TEMPO9_CUDA_Q8_DIRECT=0 (read once, measurement): never.
bool direct_ok(const SliceArgs& a) {
  static const bool off = [] {
    const char* e = std::getenv("TEMPO9_CUDA_Q8_DIRECT");
    return e != nullptr && e[0] == '0';
  }();
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (off || a.row_bytes % 16 != 0 || a.expert_bytes % 16 != 0) return false;
  if (a.parts.n == 0) return aligned(a.w);
  for (int i = 0; i < a.parts.n; ++i)
    if (!aligned(a.parts.part[i].w)) return false;
  return true;
}

// Tiles of 16 kNT <= 32 activation rows: Q8_0 in the direct form where it may (same bits).
template <GgmlType T, int kNT>
void launch_narrow(const SliceArgs& a, Stream& stream, int64_t n_tiles = -1) {
  if constexpr (T == GgmlType::Q8_0)
    if (direct_ok(a)) return launch_tiles<T, kNT, true>(a, stream, n_tiles);
  launch_tiles<T, kNT>(a, stream, n_tiles);
}

}  // namespace

// The tile width and the split form change no bits: every output's order is the canonical one.
// Q8_0 in the direct form takes 32-row tiles up to 256 rows and, above, for weights of 2048 rows
// or more: without the decode pass a 64-row tile's wider A reuse no longer pays for half the
// blocks and 2 instead of 3 blocks per SM. One agent's warm turns (~160 rows): 49.3 / 51.3 ->
// 46.7 / 50.3 ms (run 96); 2048 rows: 2048 -> 8192 889.7 -> 779.1 us, 4096 -> 2048 442.2 ->
// 431.3, but 2048 -> 512 78.9 -> 96.3 (8 weight tiles: the 32-row tiles re-read them twice as
// often; run 97). TEMPO9_CUDA_MMA_NT=2 (read once, measurement): 32-row tiles for every type and
// row count.
template <GgmlType T>
void launch_mma(const SliceArgs& a, Stream& stream) {
  static const bool narrow = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MMA_NT");
    return e != nullptr && e[0] == '2';
  }();
  if (a.n_tok <= 32 || narrow) return launch_narrow<T, 2>(a, stream);
  if constexpr (T == GgmlType::Q8_0)
    if ((a.n_tok <= 256 || weight_rows(a) >= 2048) && direct_ok(a))
      return launch_tiles<T, 2, true>(a, stream);
  launch_tiles<T, 4>(a, stream);
}

// Split below one tile per SM: a decode step of 32 sequences on Qwen3-8B has 16 to 192 tiles of
// 64 weight rows per call for 132 SMs (one or two four-warp blocks each, latency-bound: 47 us for
// the 4 MB k projection, run 57). Each of the four launches then walks a quarter of n_in; at
// least one unit per slice (n_units >= 32). The partials cost 32 floats per output written and
// read: at 224 tiles (4096 x 14336, 32 rows) the split took 95 us against 75 (run 60), so wider
// calls stay whole. Up to 256 rows: a warm agent turn's ~160-token suffix on Qwen3.5-35B ran its
// narrow projections (2048 -> 512 and -> 64 at 3 x 8 and 3 x 1 tiles) at 48 us each whole (run
// 64). TEMPO9_CUDA_MMA_SPLIT=0 (read once, measurement): never.
size_t mma_split_bytes(int64_t w_tiles, int64_t n_out, int64_t n_tok, int64_t n_units) {
  static const bool off = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MMA_SPLIT");
    return e != nullptr && e[0] == '0';
  }();
  if (off || n_tok > 256 || n_units < 32) return 0;
  // Activation-row tiles: one of 32 rows, or 64-row tiles (counted as at least two: the wider
  // tile's block does twice the work).
  const int64_t row_tiles = n_tok <= 32 ? 1 : std::max<int64_t>(2, (n_tok + 63) / 64);
  const int64_t tiles = w_tiles * row_tiles;
  if (tiles >= sm_count()) return 0;
  return static_cast<size_t>(32 * n_tok * n_out) * sizeof(float);
}

int64_t mma_weight_tiles(int64_t n_out) {
  return (n_out + kBM - 1) / kBM;
}

// TEMPO9_CUDA_MOE_TILE=16|32|64 (read once, measurement): that tile for every grouped call.
int mma_grouped_tile_rows(int64_t pairs, int64_t n_expert) {
  static const int forced = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MOE_TILE");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v == 16 || v == 32 || v == 64 ? v : 0;
  }();
  if (forced != 0) return forced;
  // 32-row tiles up to a mean of 64 rows per expert: at 64 (8 agents' 2048-row steps, 8 of 256
  // experts per token) a 64-row tile leaves a third of its rows empty on average, and 32-row
  // tiles ran the agents bench 4.9% faster (run 44); above that, 64. 16-row tiles (four blocks
  // per SM, by shared memory, instead of three) up to a mean of 8: a warm agent turn's ~160 tokens
  // (5 per expert) reached its first token in 66-72 ms with them against 74-80 with 32 (run 64).
  if (pairs <= 8 * n_expert) return 16;
  return pairs <= 64 * n_expert ? 32 : 64;
}

// Weight tiles per block of a grouped call. A warm agent turn (~5 pairs per expert, 16-row tiles)
// runs its experts' down projection (2048 x 512 each) at 32 weight tiles x ~260 expert tiles:
// one tile per block is ~10.7k blocks of 16 k-steps each after their set-up (expert search, x
// rows, the first chunk's whole memory latency). Four per block: 238.9 -> 223.7 us, gate/up
// (512 x 2048) 174.1 -> 170.4 (run 82; 8 or 16 no better, and 8 halves the gate/up's blocks to
// fewer than the GPU holds). At 32-row tiles four lost (512 rows: 270.7 -> 344.4 us): one.
// TEMPO9_CUDA_MOE_WLOOP=N (read once, measurement): N for the 16- and 32-row tiles.
int mma_grouped_weight_tiles(int tile_rows) {
  if (tile_rows > 32) return 1;  // kLoopTiles
  static const int forced = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MOE_WLOOP");
    return e != nullptr ? std::max(1, std::atoi(e)) : 0;
  }();
  if (forced != 0) return forced;
  return tile_rows == 16 ? 4 : 1;
}

template <GgmlType T>
void launch_mma_grouped(const SliceArgs& a, int tile_rows, int64_t n_tiles, Stream& stream) {
  SliceArgs b = a;
  b.w_tiles = mma_grouped_weight_tiles(tile_rows);
  if (tile_rows == 16) return launch_narrow<T, 1>(b, stream, n_tiles);
  if (tile_rows == 32) return launch_narrow<T, 2>(b, stream, n_tiles);
  launch_tiles<T, 4>(b, stream, n_tiles);
}

template void launch_mma_grouped<GgmlType::Q4_K>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma_grouped<GgmlType::Q6_K>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma_grouped<GgmlType::Q3_K>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma_grouped<GgmlType::Q5_K>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma_grouped<GgmlType::Q8_0>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma<GgmlType::Q4_K>(const SliceArgs&, Stream&);
template void launch_mma<GgmlType::Q6_K>(const SliceArgs&, Stream&);
template void launch_mma<GgmlType::Q3_K>(const SliceArgs&, Stream&);
template void launch_mma<GgmlType::Q5_K>(const SliceArgs&, Stream&);
template void launch_mma<GgmlType::Q8_0>(const SliceArgs&, Stream&);

}  // namespace t9::cuda
