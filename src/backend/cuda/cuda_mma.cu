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
//      float arithmetic (Unit<T>::sub / finish / group, shared with the GEMV) turns into the
//      unit's dot; each output keeps the running slice partial p and the total y, flushed at
//      slice ends (SliceWalk), so y is the canonical order of cuda_units.cuh.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <cstdlib>

#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

constexpr int kBM = 64;               // weight rows per block
constexpr int kChunk = 256;           // elements per k-step
constexpr int kStride = kChunk + 16;  // bytes per row of decoded weights / activations (banks)
constexpr int kThreads = 128;

// Per type: units per chunk; floats per row of the chunk's scales sc and mins mn (one more than
// used, so that the 8 rows a warp reads at once fall in different banks); the decoded unit's
// store.
template <GgmlType T>
struct MmaType;

template <>
struct MmaType<GgmlType::Q4_K> {
  static constexpr int kUnits = 4, kSc = 9, kMn = 9;
  using U = Unit<GgmlType::Q4_K>;
  static __device__ __forceinline__ void store(const U::W& w, int lu, uint8_t* dec, float* sc,
                                               float* mn) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      *reinterpret_cast<int4*>(dec + 64 * lu + 16 * k) =
          make_int4(w.q[4 * k], w.q[4 * k + 1], w.q[4 * k + 2], w.q[4 * k + 3]);
    sc[2 * lu] = w.s0, sc[2 * lu + 1] = w.s1, mn[2 * lu] = w.m0, mn[2 * lu + 1] = w.m1;
  }
};

template <>
struct MmaType<GgmlType::Q8_0> {
  static constexpr int kUnits = 8, kSc = 9, kMn = 1;
  using U = Unit<GgmlType::Q8_0>;
  static __device__ __forceinline__ void store(const U::W& w, int lu, uint8_t* dec, float* sc,
                                               float*) {
#pragma unroll
    for (int k = 0; k < 2; ++k)
      *reinterpret_cast<int4*>(dec + 32 * lu + 16 * k) =
          make_int4(w.q[4 * k], w.q[4 * k + 1], w.q[4 * k + 2], w.q[4 * k + 3]);
    sc[lu] = w.d;
  }
};

// Q6_K unit v = 2h + lh: group s (16 elements) sits at element 128h + 32s + 16lh, scale 4v + s.
template <>
struct MmaType<GgmlType::Q6_K> {
  static constexpr int kUnits = 4, kSc = 17, kMn = 1;
  using U = Unit<GgmlType::Q6_K>;
  static __device__ __forceinline__ void store(const U::W& w, int v, uint8_t* dec, float* sc,
                                               float*) {
    const int h = v / 2, lh = v % 2;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      *reinterpret_cast<int4*>(dec + 128 * h + 32 * s + 16 * lh) =
          make_int4(w.q[4 * s], w.q[4 * s + 1], w.q[4 * s + 2], w.q[4 * s + 3]);
      sc[4 * v + s] = w.sc[s];
    }
  }
};

// Shared-memory layout of one block (bytes).
template <GgmlType T, int kNT>
struct Smem {
  using U = Unit<T>;
  static constexpr int kBN = 16 * kNT;  // activation rows per block
  static constexpr int kChunkBytes = MmaType<T>::kUnits / U::kPerBlock * U::kBlockBytes;
  static constexpr int kRawStride = (kChunkBytes + 15 + 15) / 16 * 16;
  static constexpr int kRaw = kBM * kRawStride;            // raw weight chunk
  static constexpr int kAct = 2 * kBN * kStride;           // int8 activations, 2 buffers
  static constexpr int kAb = 2 * kBN * (kChunk / 32) * 8;  // ActBlocks, 2 buffers
  static constexpr int kDec = kBM * kStride;               // decoded weights
  static constexpr int kScales = kBM * (MmaType<T>::kSc + MmaType<T>::kMn) * 4;
  static constexpr int kBytes = kRaw + kAct + kAb + kDec + kScales;
};

__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src));
}
__device__ __forceinline__ uint32_t ld_s32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// The accumulators start at the bits of 1.5 * 2^23 (kBiasBits) instead of 0: an integer sum s
// with |s| < 2^22 then reads as the float 1.5 * 2^23 + s, and one subtraction gives float(s)
// exactly (no int-to-float conversion, a quarter-rate instruction). Every sum here is below
// 32 * 128 * 128 = 2^19 in magnitude.
constexpr int kBiasBits = 0x4B400000;
constexpr float kBias = 12582912.0f;  // 1.5 * 2^23
__device__ __forceinline__ float unbias(int c) {
  return __fsub_rn(__int_as_float(c), kBias);
}

__device__ __forceinline__ void mma_k32(int (&c)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(kBiasBits));
}
__device__ __forceinline__ void mma_k16(int (&c)[4], const uint32_t (&a)[2], uint32_t b) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%7,%7,%7};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b), "r"(kBiasBits));
}

// A warp's view of the shared tiles: rows wm*32 + mt*16 + g (+8), activation rows
// wn*32 + nt*8 + g (B fragments) and wn*32 + nt*8 + 2t (+1) (accumulators); g = lane / 4,
// t = lane % 4.
struct WarpTile {
  const uint8_t* dec;  // decoded weights of row wm*32 + g, column 4t
  const uint8_t* act;  // activations of row wn*32 + g, column 4t
  int row0, tok0;      // wm*32 + g, wn*32 + 2t
};

// Integer sums of the 32 elements at column k0 for the warp's 2 x 4 sub-tiles.
template <int kNT>
__device__ __forceinline__ void sums_k32(const WarpTile& w, int k0, int (&c)[2][kNT][4]) {
  uint32_t a[2][4], b[kNT][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const uint8_t* p = w.dec + mt * 16 * kStride + k0;
    a[mt][0] = ld_s32(p), a[mt][1] = ld_s32(p + 8 * kStride);
    a[mt][2] = ld_s32(p + 16), a[mt][3] = ld_s32(p + 8 * kStride + 16);
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const uint8_t* p = w.act + nt * 8 * kStride + k0;
    b[nt][0] = ld_s32(p), b[nt][1] = ld_s32(p + 16);
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mma_k32(c[mt][nt], a[mt], b[nt]);
}

// The same for the 16 elements at column k0.
template <int kNT>
__device__ __forceinline__ void sums_k16(const WarpTile& w, int k0, int (&c)[2][kNT][4]) {
  uint32_t a[2][2], b[kNT];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const uint8_t* p = w.dec + mt * 16 * kStride + k0;
    a[mt][0] = ld_s32(p), a[mt][1] = ld_s32(p + 8 * kStride);
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) b[nt] = ld_s32(w.act + nt * 8 * kStride + k0);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mma_k16(c[mt][nt], a[mt], b[nt]);
}

// Accumulator element i of sub-tile (mt, nt): weight row row0 + mt*16 + 8*(i/2), activation row
// tok0 + nt*8 + i%2.
#define T9_FOR_ACC(...)                                   \
  _Pragma("unroll") for (int mt = 0; mt < 2; ++mt)        \
      _Pragma("unroll") for (int nt = 0; nt < kNT; ++nt)  \
          _Pragma("unroll") for (int i = 0; i < 4; ++i) { \
    __VA_ARGS__;                                          \
  }

// The unit's dot for every accumulator of the warp into d (same arithmetic as Unit<T>::dot).
template <GgmlType T, int kNT>
__device__ __forceinline__ void unit_dots(const WarpTile& w, int lu, const float* sc,
                                          const float* mn, const ActBlock* ab,
                                          float (&d)[2][kNT][4]) {
  using U = Unit<T>;
  constexpr int kS = MmaType<T>::kSc;
  int c[2][kNT][4];
  if constexpr (T == GgmlType::Q4_K) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int j = 2 * lu + k;  // sub-block
      sums_k32<kNT>(w, 32 * j, c);
      T9_FOR_ACC({
        const int r = w.row0 + mt * 16 + 8 * (i / 2), t = w.tok0 + nt * 8 + i % 2;
        const float v = U::sub(sc[r * kS + j], mn[r * kS + j], ab[t * 8 + j], unbias(c[mt][nt][i]));
        d[mt][nt][i] = k == 0 ? v : __fadd_rn(d[mt][nt][i], v);
      })
    }
  } else if constexpr (T == GgmlType::Q8_0) {
    sums_k32<kNT>(w, 32 * lu, c);
    T9_FOR_ACC({
      const int r = w.row0 + mt * 16 + 8 * (i / 2), t = w.tok0 + nt * 8 + i % 2;
      d[mt][nt][i] = U::finish(sc[r * kS + lu], ab[t * 8 + lu], unbias(c[mt][nt][i]));
    })
  } else {  // Q6_K: unit v = lu = 2h + lh, groups s = 0..3
    const int h = lu / 2, lh = lu % 2;
    T9_FOR_ACC(d[mt][nt][i] = 0.0f)
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      sums_k16<kNT>(w, 128 * h + 32 * s + 16 * lh, c);
      T9_FOR_ACC({
        const int r = w.row0 + mt * 16 + 8 * (i / 2), t = w.tok0 + nt * 8 + i % 2;
        d[mt][nt][i] = U::group(d[mt][nt][i], sc[r * kS + 4 * lu + s], ab[t * 8 + 4 * h + s],
                                unbias(c[mt][nt][i]));
      })
    }
  }
}

template <GgmlType T, int kNT>
struct MmaKernel {
  using U = Unit<T>;
  using M = MmaType<T>;
  using L = Smem<T, kNT>;
  static constexpr int kBN = L::kBN;

  // Copies chunk c of the block's weight rows (raw, one buffer: decode empties it early).
  static __device__ __forceinline__ void issue_w(const SliceArgs& a, int64_t o0, int64_t c,
                                                 int n_units, uint8_t* smem) {
    const int units = min(M::kUnits, n_units - static_cast<int>(c) * M::kUnits);
    const int bytes = units / U::kPerBlock * U::kBlockBytes;
    uint8_t* raw = smem;
    constexpr int kG = L::kRawStride / 16;  // granules per raw row
    for (int idx = threadIdx.x; idx < kBM * kG; idx += kThreads) {
      const int r = idx / kG, i = idx % kG;
      const uint8_t* src = a.w + min64(o0 + r, a.n_out - 1) * a.row_bytes + c * L::kChunkBytes;
      const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
      if (16 * i < skew + bytes) cp_async16(raw + r * L::kRawStride + 16 * i, src - skew + 16 * i);
    }
  }
  // Copies chunk c of the block's activation rows and their ActBlocks into buffer `buf`; tile row
  // r is x row x_row[r] (shared memory, -1 past the rows).
  static __device__ __forceinline__ void issue_x(const SliceArgs& a, const int64_t* x_row,
                                                 int64_t c, int n_units, int buf, uint8_t* smem) {
    const int units = min(M::kUnits, n_units - static_cast<int>(c) * M::kUnits);
    uint8_t* act = smem + L::kRaw + buf * kBN * kStride;
    auto* ab = reinterpret_cast<ActBlock*>(smem + L::kRaw + L::kAct) + buf * kBN * 8;
    const int elems = units * U::kElems;
    for (int idx = threadIdx.x; idx < kBN * 16; idx += kThreads) {
      const int r = idx / 16, i = idx % 16;
      if (x_row[r] >= 0 && 16 * i < elems)
        cp_async16(
            act + r * kStride + 16 * i,
            reinterpret_cast<const uint8_t*>(a.xq + x_row[r] * a.n_in + c * kChunk) + 16 * i);
    }
    for (int idx = threadIdx.x; idx < kBN * 8; idx += kThreads) {
      const int r = idx / 8, i = idx % 8;
      if (x_row[r] >= 0 && 32 * i < elems)
        cp_async8(ab + r * 8 + i, a.xb + x_row[r] * (a.n_in / 32) + c * (kChunk / 32) + i);
    }
  }

  static __device__ __forceinline__ void decode(const SliceArgs& a, int64_t o0, int64_t c,
                                                int n_units, uint8_t* smem) {
    const int units = min(M::kUnits, n_units - static_cast<int>(c) * M::kUnits);
    const uint8_t* raw = smem;
    uint8_t* dec = smem + L::kRaw + L::kAct + L::kAb;
    auto* sc = reinterpret_cast<float*>(dec + L::kDec);
    float* mn = sc + kBM * M::kSc;
    for (int idx = threadIdx.x; idx < kBM * M::kUnits; idx += kThreads) {
      const int r = idx / M::kUnits, lu = idx % M::kUnits;
      if (lu >= units) continue;
      const uint8_t* src = a.w + min64(o0 + r, a.n_out - 1) * a.row_bytes + c * L::kChunkBytes;
      const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
      const typename U::W w = U::load(
          raw + r * L::kRawStride + skew + (lu / U::kPerBlock) * U::kBlockBytes, lu % U::kPerBlock);
      M::store(w, lu, dec + r * kStride, sc + r * M::kSc, mn + r * M::kMn);
    }
  }
};

template <GgmlType T, int kNT>
__global__ void __launch_bounds__(kThreads, kNT <= 2 ? 4 : 2) mma_kernel(SliceArgs a) {
  pdl_enter();
  using K = MmaKernel<T, kNT>;
  using M = MmaType<T>;
  using L = Smem<T, kNT>;
  constexpr int kBN = L::kBN, kWN = kBN / 2;  // activation rows per block, per warp
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 2, wn = warp % 2, g = lane / 4, tq = lane % 4;
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * kBM;
  int64_t t0 = static_cast<int64_t>(blockIdx.y) * kBN;
  if (a.tile_first != nullptr && !select_expert(a, kBN, t0)) return;  // grouped matmul_id
  const int n_units = static_cast<int>(a.n_in / Unit<T>::kElems);
  const int64_t n_chunks = (n_units + M::kUnits - 1) / M::kUnits;
  uint8_t* dec = smem + L::kRaw + L::kAct + L::kAb;
  const auto* sc = reinterpret_cast<const float*>(dec + L::kDec);
  const float* mn = sc + kBM * M::kSc;

  // Each tile row's x row, once (grouped matmul_id: through the sort's x_rows).
  __shared__ int64_t x_row[kBN];
  for (int r = threadIdx.x; r < kBN; r += kThreads)
    x_row[r] = t0 + r >= a.n_tok ? -1 : a.x_rows != nullptr ? a.x_rows[t0 + r] : t0 + r;
  __syncthreads();

  SliceWalk slices(n_units);
  float p[2][kNT][4], y[2][kNT][4], d[2][kNT][4];
  T9_FOR_ACC(p[mt][nt][i] = 0.0f; y[mt][nt][i] = 0.0f)

  K::issue_w(a, o0, 0, n_units, smem);
  K::issue_x(a, x_row, 0, n_units, 0, smem);
  cp_async_commit();
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int buf = static_cast<int>(c & 1);
    cp_async_wait_0();
    __syncthreads();  // chunk c landed for every thread; every warp is done with chunk c - 1
    if (c + 1 < n_chunks) K::issue_x(a, x_row, c + 1, n_units, buf ^ 1, smem);
    K::decode(a, o0, c, n_units, smem);
    __syncthreads();  // decoded; the raw buffer is free
    if (c + 1 < n_chunks) K::issue_w(a, o0, c + 1, n_units, smem);
    cp_async_commit();  // weights and activations of chunk c + 1 land while chunk c is multiplied
    const WarpTile w{dec + (wm * 32 + g) * kStride + 4 * tq,
                     smem + L::kRaw + buf * kBN * kStride + (wn * kWN + g) * kStride + 4 * tq,
                     wm * 32 + g, wn * kWN + 2 * tq};
    const auto* ab = reinterpret_cast<const ActBlock*>(smem + L::kRaw + L::kAct) + buf * kBN * 8;
    const int units = min(M::kUnits, n_units - static_cast<int>(c) * M::kUnits);
#pragma unroll
    for (int lu = 0; lu < M::kUnits; ++lu) {
      if (lu >= units) break;
      unit_dots<T, kNT>(w, lu, sc, mn, ab, d);
      T9_FOR_ACC(p[mt][nt][i] = __fadd_rn(p[mt][nt][i], d[mt][nt][i]))
      if (slices.ends_at(static_cast<int>(c) * M::kUnits + lu)) {  // uniform across the block
        T9_FOR_ACC(y[mt][nt][i] = __fadd_rn(y[mt][nt][i], p[mt][nt][i]); p[mt][nt][i] = 0.0f)
      }
    }
  }
  T9_FOR_ACC({
    const int64_t o = o0 + wm * 32 + mt * 16 + g + 8 * (i / 2);
    const int64_t t = t0 + wn * kWN + nt * 8 + 2 * tq + i % 2;
    if (o < a.n_out && t < a.n_tok) {
      float* yr = reinterpret_cast<float*>(a.y.row(a.y_rows != nullptr ? a.y_rows[t] : t));
      yr[o] = a.bias != nullptr ? __fadd_rn(y[mt][nt][i], a.bias[o]) : y[mt][nt][i];
    }
  })
}

#undef T9_FOR_ACC

template <GgmlType T, int kNT>
void launch_tiles(const SliceArgs& a, Stream& stream, int64_t n_tiles = -1) {
  constexpr int kSmem = Smem<T, kNT>::kBytes, kBN = Smem<T, kNT>::kBN;
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(mma_kernel<T, kNT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kSmem));
    return true;
  }();
  (void)attr_set;
  const int64_t tiles_t = n_tiles >= 0 ? n_tiles : (a.n_tok + kBN - 1) / kBN;
  T9_CHECK(tiles_t <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  const dim3 grid(grid_1d(a.n_out, kBM), static_cast<unsigned>(tiles_t));
  stream.launch(mma_kernel<T, kNT>, grid, kThreads, kSmem, a);
}

}  // namespace

// The tile width changes no bits: every output's order is the canonical one.
// TEMPO9_CUDA_MMA_NT=2 (read once, measurement): 32-row tiles for every row count.
template <GgmlType T>
void launch_mma(const SliceArgs& a, Stream& stream) {
  static const bool narrow = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MMA_NT");
    return e != nullptr && e[0] == '2';
  }();
  if (a.n_tok <= 32 || narrow) return launch_tiles<T, 2>(a, stream);
  launch_tiles<T, 4>(a, stream);
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
  // tiles ran the agents bench 4.9% faster (run 44); above that, 64.
  return pairs <= 64 * n_expert ? 32 : 64;
}

template <GgmlType T>
void launch_mma_grouped(const SliceArgs& a, int tile_rows, int64_t n_tiles, Stream& stream) {
  if (tile_rows == 16) return launch_tiles<T, 1>(a, stream, n_tiles);
  if (tile_rows == 32) return launch_tiles<T, 2>(a, stream, n_tiles);
  launch_tiles<T, 4>(a, stream, n_tiles);
}

template void launch_mma_grouped<GgmlType::Q4_K>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma_grouped<GgmlType::Q6_K>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma_grouped<GgmlType::Q8_0>(const SliceArgs&, int, int64_t, Stream&);
template void launch_mma<GgmlType::Q4_K>(const SliceArgs&, Stream&);
template void launch_mma<GgmlType::Q6_K>(const SliceArgs&, Stream&);
template void launch_mma<GgmlType::Q8_0>(const SliceArgs&, Stream&);

}  // namespace t9::cuda
