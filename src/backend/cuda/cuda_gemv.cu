// Stage-2 matmul kernels (contract in cuda_gemv.cuh; design and numbers in docs/CUDA.md).
//
// Quantized path. A warp owns kRows consecutive weight rows at a time (grid-stride over row
// groups, so a warp keeps working and prefetching across groups) and walks each row in segments
// of kSegUnits units (two per lane). A segment's bytes are contiguous in the row: the warp copies
// them to shared memory with 16-byte cp.async loads (the row may start anywhere on a 2-byte
// boundary: the copy starts at the 16-byte boundary below and the data sits `skew` bytes in),
// double-buffered so the next segment is in flight while this one is computed. Each lane then
// decodes its units from shared memory into signed int8x4 words and dots them with the int8
// activations (dp4a), one float scale per 16 or 32 elements.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_quant.cuh"

namespace t9::cuda {

void* Scratch::reserve(size_t n, cudaStream_t stream) {
  if (n <= bytes) return ptr;
  // Stream-ordered: kernels already queued on `stream` finish with the old block first.
  if (ptr != nullptr) CUDA_CHECK(cudaFreeAsync(ptr, stream));
  const size_t want = std::max(n, bytes * 2);
  CUDA_CHECK(cudaMallocAsync(&ptr, want, stream));
  bytes = want;
  return ptr;
}

namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 2;   // weight rows per warp: two independent copies in flight

// Per 32 activations: the scale and the sum of the int8 codes (for the formats' offsets).
struct ActBlock {
  float d;
  int isum;
};

// ---- activation quantization ----

// One 32-element block, lane = element; the CPU backend's quantize_act_row rounding: d = amax /
// 127, q = rint(x * (1 / d)) (both IEEE-rounded, no contraction). The separate kernel and the
// fused decode path both call this, so their codes are the same bits.
__device__ __forceinline__ void quantize_block(const float* x, int lane, int8_t* xq, ActBlock* xb) {
  const float v = x[lane];
  const float amax = warp_max(fabsf(v));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const int q = max(-128, min(127, __float2int_rn(__fmul_rn(v, id))));
  xq[lane] = static_cast<int8_t>(q);
  const int s = __reduce_add_sync(0xffffffffu, q);
  if (lane == 0) *xb = ActBlock{d, s};
}

// One warp per 32-element block of every row.
__global__ void quantize_act_kernel(TensorDesc x, int64_t n_in, int64_t n_blocks,
                                    int8_t* __restrict__ xq, ActBlock* __restrict__ xb) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (g >= n_blocks) return;  // uniform per warp
  const int64_t per_row = n_in / 32, r = g / per_row, b = g % per_row;
  quantize_block(reinterpret_cast<const float*>(x.row(r)) + 32 * b, threadIdx.x % 32,
                 xq + r * n_in + 32 * b, xb + g);
}

// ---- shared-memory and bit helpers ----

__device__ __forceinline__ uint16_t lds16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
// A 32-bit word at a 2-byte-aligned shared address.
__device__ __forceinline__ uint32_t lds32(const uint8_t* p) {
  return static_cast<uint32_t>(lds16(p)) | static_cast<uint32_t>(lds16(p + 2)) << 16;
}
// The same word with one 32-bit access where p is 4-byte aligned (uniform across a warp for
// formats whose block size is a multiple of 4: Q4_1, Q4_K).
__device__ __forceinline__ uint32_t lds32_a4(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) return *reinterpret_cast<const uint32_t*>(p);
  return lds32(p);
}
__device__ __forceinline__ float f16(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
// Bytes of unsigned codes 0..(bias*2-1) to signed (q - bias): (q + 128 - bias) ^ 0x80 per byte
// (no carries: every byte stays below 256 before the xor).
template <uint32_t kBias>
__device__ __forceinline__ int to_signed(uint32_t q) {
  constexpr uint32_t kAdd = (128u - kBias) * 0x01010101u;
  return static_cast<int>((q + kAdd) ^ 0x80808080u);
}
// Bits 0..3 of b to bit 0 of bytes 0..3.
__device__ __forceinline__ uint32_t spread4(uint32_t b) {
  return ((b & 0xFu) * 0x00204081u) & 0x01010101u;
}
__device__ __forceinline__ int dot4(const int* w, int4 x, int acc) {
  acc = __dp4a(w[0], x.x, acc);
  acc = __dp4a(w[1], x.y, acc);
  acc = __dp4a(w[2], x.z, acc);
  return __dp4a(w[3], x.w, acc);
}
// Generic load: x is in global memory, or in shared memory on the fused decode path.
__device__ __forceinline__ int4 ldx(const int8_t* p) {
  return *reinterpret_cast<const int4*>(p);
}

// ---- per-type units ----
// Unit<T>: kElems elements per unit, kPerBlock units per weight block, kSegUnits units per
// segment (two per lane), kSegBytes their bytes (a multiple of 16), kLoads 16-byte copies per
// lane and row (the segment plus up to 15 bytes of skew). W is a decoded unit, load() builds it
// from the block in shared memory, dot() multiplies it by activation row (xq, xb).

template <GgmlType T>
struct UnitBase {
  static constexpr int kBlockElems = QTraits<T>::kBlockElems;
  static constexpr int kBlockBytes = QTraits<T>::kBlockBytes;
};

template <GgmlType T, int kElemsPerUnit>
struct UnitShape : UnitBase<T> {
  static constexpr int kElems = kElemsPerUnit;
  static constexpr int kPerBlock = UnitBase<T>::kBlockElems / kElems;
  static constexpr int kSegUnits = 64;
  static constexpr int kSegBytes = kSegUnits / kPerBlock * UnitBase<T>::kBlockBytes;
  static constexpr int kLoads = (kSegBytes + 16 + 511) / 512;
  static_assert(kSegBytes % 16 == 0);
};

template <GgmlType T>
struct Unit;

// 32-element blocks: w[0..7] are elements 0..31 as signed int8x4 (or unsigned for Q4_1).
template <>
struct Unit<GgmlType::Q8_0> : UnitShape<GgmlType::Q8_0, 32> {
  struct W {
    int q[8];
    float d;
  };
  static __device__ __forceinline__ W load(const uint8_t* b, int) {
    W w;
    w.d = f16(lds16(b));
#pragma unroll
    for (int k = 0; k < 8; ++k) w.q[k] = static_cast<int>(lds32(b + 2 + 4 * k));
    return w;
  }
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    const int s = dot4(w.q + 4, ldx(xq + 32 * u + 16), dot4(w.q, ldx(xq + 32 * u), 0));
    return __fmul_rn(__fmul_rn(w.d, xb[u].d), static_cast<float>(s));
  }
};

// Q4_0 / Q4_1 / Q5_0: byte j of qs holds element j (low nibble) and j + 16 (high nibble).
template <GgmlType T>
struct UnitNibble : UnitShape<T, 32> {
  static constexpr int kQs = T == GgmlType::Q4_0 ? 2 : T == GgmlType::Q4_1 ? 4 : 6;
  struct W {
    int q[8];
    float d, m;
  };
  static __device__ __forceinline__ W load(const uint8_t* b, int) {
    W w;
    w.d = f16(lds16(b));
    w.m = T == GgmlType::Q4_1 ? f16(lds16(b + 2)) : 0.0f;
    [[maybe_unused]] const uint32_t qh = T == GgmlType::Q5_0 ? lds32(b + 2) : 0u;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t v = T == GgmlType::Q4_1 ? lds32_a4(b + kQs + 4 * k) : lds32(b + kQs + 4 * k);
      uint32_t lo = v & 0x0F0F0F0Fu, hi = (v >> 4) & 0x0F0F0F0Fu;
      if constexpr (T == GgmlType::Q5_0) {
        lo |= spread4(qh >> (4 * k)) << 4;
        hi |= spread4(qh >> (16 + 4 * k)) << 4;
        w.q[k] = to_signed<16>(lo);
        w.q[k + 4] = to_signed<16>(hi);
      } else if constexpr (T == GgmlType::Q4_0) {
        w.q[k] = to_signed<8>(lo);
        w.q[k + 4] = to_signed<8>(hi);
      } else {
        w.q[k] = static_cast<int>(lo);
        w.q[k + 4] = static_cast<int>(hi);
      }
    }
    return w;
  }
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    const int s = dot4(w.q + 4, ldx(xq + 32 * u + 16), dot4(w.q, ldx(xq + 32 * u), 0));
    const ActBlock a = xb[u];
    if constexpr (T == GgmlType::Q4_1)  // sum (d q + m) x = d sum(q x) + m sum(x)
      return __fmul_rn(
          a.d, __fmaf_rn(w.d, static_cast<float>(s), __fmul_rn(w.m, static_cast<float>(a.isum))));
    return __fmul_rn(__fmul_rn(w.d, a.d), static_cast<float>(s));
  }
};
template <>
struct Unit<GgmlType::Q4_0> : UnitNibble<GgmlType::Q4_0> {};
template <>
struct Unit<GgmlType::Q4_1> : UnitNibble<GgmlType::Q4_1> {};
template <>
struct Unit<GgmlType::Q5_0> : UnitNibble<GgmlType::Q5_0> {};

// Q4_K: unit p of a super-block = sub-blocks 2p (low nibbles of qs[32p..32p+32)) and 2p + 1
// (high nibbles): elements 64p .. 64p + 64.
template <>
struct Unit<GgmlType::Q4_K> : UnitShape<GgmlType::Q4_K, 64> {
  struct W {
    int q[16];
    float s0, m0, s1, m1;
  };
  static __device__ __forceinline__ W load(const uint8_t* b, int p) {
    W w;
    const float d = f16(lds16(b)), dmin = f16(lds16(b + 2));
    int sc, mn;
    k_scale_min(b + 4, 2 * p, &sc, &mn);
    w.s0 = __fmul_rn(d, static_cast<float>(sc));
    w.m0 = __fmul_rn(dmin, static_cast<float>(mn));
    k_scale_min(b + 4, 2 * p + 1, &sc, &mn);
    w.s1 = __fmul_rn(d, static_cast<float>(sc));
    w.m1 = __fmul_rn(dmin, static_cast<float>(mn));
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t v = lds32_a4(b + 16 + 32 * p + 4 * k);
      w.q[k] = static_cast<int>(v & 0x0F0F0F0Fu);
      w.q[k + 8] = static_cast<int>((v >> 4) & 0x0F0F0F0Fu);
    }
    return w;
  }
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    const int8_t* x = xq + 64 * u;
    const int s0 = dot4(w.q + 4, ldx(x + 16), dot4(w.q, ldx(x), 0));
    const int s1 = dot4(w.q + 12, ldx(x + 48), dot4(w.q + 8, ldx(x + 32), 0));
    const ActBlock a0 = xb[2 * u], a1 = xb[2 * u + 1];
    // sum (s q - m) x = s sum(q x) - m sum(x), per 32-element sub-block
    const float r0 = __fmul_rn(a0.d, __fmaf_rn(w.s0, static_cast<float>(s0),
                                               -__fmul_rn(w.m0, static_cast<float>(a0.isum))));
    const float r1 = __fmul_rn(a1.d, __fmaf_rn(w.s1, static_cast<float>(s1),
                                               -__fmul_rn(w.m1, static_cast<float>(a1.isum))));
    return __fadd_rn(r0, r1);
  }
};

// Q6_K: unit v = 2h + lh of a super-block covers elements 128h + 32s + 16lh + i (s = 0..3,
// i = 0..15): ql[64h + 16lh + i] (s = 0 low, s = 2 high nibble), ql[64h + 32 + 16lh + i] (s = 1,
// 3), qh[32h + 16lh + i] bits 2s; group s has scale scales[8h + 2s + lh].
template <>
struct Unit<GgmlType::Q6_K> : UnitShape<GgmlType::Q6_K, 64> {
  struct W {
    int q[16];  // group s in q[4s .. 4s + 4)
    float sc[4];
  };
  static __device__ __forceinline__ W load(const uint8_t* b, int v) {
    W w;
    const int h = v / 2, lh = v % 2;
    const float d = f16(lds16(b + 208));
    const uint8_t* qa = b + 64 * h + 16 * lh;
    const uint8_t* qhp = b + 128 + 32 * h + 16 * lh;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t la = lds32(qa + 4 * k), lb = lds32(qa + 32 + 4 * k), hb = lds32(qhp + 4 * k);
      w.q[k] = to_signed<32>((la & 0x0F0F0F0Fu) | ((hb << 4) & 0x30303030u));
      w.q[4 + k] = to_signed<32>((lb & 0x0F0F0F0Fu) | ((hb << 2) & 0x30303030u));
      w.q[8 + k] = to_signed<32>(((la >> 4) & 0x0F0F0F0Fu) | (hb & 0x30303030u));
      w.q[12 + k] = to_signed<32>(((lb >> 4) & 0x0F0F0F0Fu) | ((hb >> 2) & 0x30303030u));
    }
#pragma unroll
    for (int s = 0; s < 4; ++s)
      w.sc[s] = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(b[192 + 8 * h + 2 * s + lh])));
    return w;
  }
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    const int64_t sb = u / 4, v = u % 4, h = v / 2, lh = v % 2;
    const int8_t* x = xq + 256 * sb + 128 * h + 16 * lh;
    const ActBlock* a = xb + 8 * sb + 4 * h;
    float r = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int si = dot4(w.q + 4 * s, ldx(x + 32 * s), 0);
      r = __fadd_rn(r, __fmul_rn(a[s].d, __fmul_rn(w.sc[s], static_cast<float>(si))));
    }
    return r;
  }
};

// ---- the quantized kernel ----

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

template <typename U>
struct QArgs {
  const uint8_t* w;
  int64_t row_bytes, n_out, n_units, n_in, n_tok;
  const int8_t* xq;  // null: fused decode (kTok == 1), the block quantizes row 0 of x itself
  const ActBlock* xb;
  TensorDesc x;
  TensorDesc y;
  const float* bias;
};

// Copies segment `seg` of rows g*kRows.. into buf (kRows slots of kLoads * 512 bytes).
template <typename U>
__device__ __forceinline__ void stage(const QArgs<U>& a, int64_t g, int64_t seg, uint8_t* buf,
                                      int lane) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t o = g * kRows + r;
    if (o >= a.n_out) break;
    const uint8_t* src = a.w + o * a.row_bytes + seg * U::kSegBytes;
    const int64_t len = min64(U::kSegBytes, a.row_bytes - seg * U::kSegBytes);
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    const uint8_t* a0 = src - skew;
    const int n16 = static_cast<int>((skew + len + 15) / 16);
#pragma unroll
    for (int i = 0; i < U::kLoads; ++i) {
      const int idx = lane + 32 * i;
      if (idx < n16) cp_async16(buf + r * U::kLoads * 512 + 16 * idx, a0 + 16 * idx);
    }
  }
}

template <GgmlType T, int kTok>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_kernel(QArgs<Unit<T>> a) {
  using U = Unit<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kWeightSmem = kWarps * 2 * kRows * U::kLoads * 512;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* bufs = smem + warp * 2 * kRows * U::kLoads * 512;
  const int64_t n_groups = (a.n_out + kRows - 1) / kRows;
  const int64_t n_seg = (a.n_units + U::kSegUnits - 1) / U::kSegUnits;
  const int64_t g0 = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTok;
  const int nt = static_cast<int>(min64(kTok, a.n_tok - t0));

  if (g0 < n_groups) {
    stage(a, g0, 0, bufs, lane);  // the first weights are in flight while x is quantized
    cp_async_commit();
  }
  const int8_t* xq_all = a.xq;
  const ActBlock* xb_all = a.xb;
  if (kTok == 1 && a.xq == nullptr) {
    // Fused decode: x (one row) rounded to int8 into shared memory behind the weight buffers.
    auto* xq_s = reinterpret_cast<int8_t*>(smem + kWeightSmem);
    auto* xb_s = reinterpret_cast<ActBlock*>(smem + kWeightSmem + ((a.n_in + 15) & ~int64_t{15}));
    const float* xr = reinterpret_cast<const float*>(a.x.row(0));
    for (int64_t b = warp; b < a.n_in / 32; b += kWarps)
      quantize_block(xr + 32 * b, lane, xq_s + 32 * b, xb_s + b);
    __syncthreads();
    xq_all = xq_s;
    xb_all = xb_s;
  }
  if (g0 >= n_groups) return;  // uniform per warp (after the block barrier above)
  const int64_t n_items = ((n_groups - 1 - g0) / stride + 1) * n_seg;
  float acc[kRows][kTok];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTok; ++t) acc[r][t] = 0.0f;

  for (int64_t it = 0; it < n_items; ++it) {
    const int64_t g = g0 + (it / n_seg) * stride, seg = it % n_seg;
    uint8_t* buf = bufs + (it & 1) * kRows * U::kLoads * 512;
    if (it + 1 < n_items) {
      const int64_t gn = g0 + ((it + 1) / n_seg) * stride, sn = (it + 1) % n_seg;
      stage(a, gn, sn, bufs + ((it + 1) & 1) * kRows * U::kLoads * 512, lane);
    }
    cp_async_commit();
    cp_async_wait_1();
    __syncwarp();
#pragma unroll
    for (int j = 0; j < U::kSegUnits / 32; ++j) {
      const int lu = lane + 32 * j;  // unit within the segment
      const int64_t u = seg * U::kSegUnits + lu;
      if (u >= a.n_units) break;
      typename U::W wu[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t o = g * kRows + r;
        const int skew =
            static_cast<int>(reinterpret_cast<uintptr_t>(a.w + min64(o, a.n_out - 1) * a.row_bytes +
                                                         seg * U::kSegBytes) &
                             15);
        wu[r] = U::load(buf + r * U::kLoads * 512 + skew + (lu / U::kPerBlock) * U::kBlockBytes,
                        lu % U::kPerBlock);
      }
#pragma unroll
      for (int t = 0; t < kTok; ++t) {
        if (t >= nt) break;
        const int8_t* xq = xq_all + (t0 + t) * a.n_in;
        const ActBlock* xb = xb_all + (t0 + t) * (a.n_in / 32);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] = __fadd_rn(acc[r][t], U::dot(wu[r], xq, xb, u));
      }
    }
    __syncwarp();  // every lane is done with buf before the next iteration refills it
    if (seg == n_seg - 1) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t o = g * kRows + r;
#pragma unroll
        for (int t = 0; t < kTok; ++t) {
          const float s = warp_sum(acc[r][t]);
          acc[r][t] = 0.0f;
          if (lane == 0 && t < nt && o < a.n_out) {
            float* yr = reinterpret_cast<float*>(a.y.row(t0 + t));
            yr[o] = a.bias != nullptr ? __fadd_rn(s, a.bias[o]) : s;
          }
        }
      }
    }
  }
}

// ---- Q4_K straight from global memory ----
// 144-byte super-blocks keep 16-byte alignment, so a lane loads its unit with three 16-byte
// loads (header, two halves of qs; the four lanes of a super-block read 144 contiguous bytes)
// and no shared-memory staging limits the warps in flight. Lane l takes units l, l + 32, ...
// in the order the staged kernel does, and decodes and dots them with the same arithmetic, so
// both kernels give the same bits.

// Byte i (0..11) of the scales held in words s0..s2, without indexing a register array.
__device__ __forceinline__ int scale_byte(uint32_t s0, uint32_t s1, uint32_t s2, int i) {
  const uint32_t w = i < 4 ? s0 : i < 8 ? s1 : s2;
  return static_cast<int>((w >> (8 * (i & 3))) & 0xFFu);
}

__device__ __forceinline__ Unit<GgmlType::Q4_K>::W load_q4k_global(const uint8_t* blk, int p) {
  Unit<GgmlType::Q4_K>::W w;
  const uint4 h = __ldg(reinterpret_cast<const uint4*>(blk));
  const uint4 qa = __ldg(reinterpret_cast<const uint4*>(blk + 16 + 32 * p));
  const uint4 qb = __ldg(reinterpret_cast<const uint4*>(blk + 32 + 32 * p));
  const float d = f16(static_cast<uint16_t>(h.x & 0xFFFFu));
  const float dmin = f16(static_cast<uint16_t>(h.x >> 16));
  float sv[2], mv[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {  // k_scale_min (quant/k_scales.h) for sub-block j = 2p + k
    const int j = 2 * p + k;
    int sc, mn;
    if (j < 4) {
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
  const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    w.q[k] = static_cast<int>(q[k] & 0x0F0F0F0Fu);
    w.q[k + 8] = static_cast<int>((q[k] >> 4) & 0x0F0F0F0Fu);
  }
  return w;
}

// kR weight rows per warp; kMinBlocks caps registers so that many blocks fit on an SM.
template <int kTok, int kR = kRows, int kMinBlocks = 1>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    gemv_q4k_direct_kernel(QArgs<Unit<GgmlType::Q4_K>> a) {
  constexpr int kRows = kR;  // shadows the file-wide default
  using U = Unit<GgmlType::Q4_K>;
  const int lane = threadIdx.x % 32;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTok;
  const int nt = static_cast<int>(min64(kTok, a.n_tok - t0));
  if (g * kRows >= a.n_out) return;  // uniform per warp
  float acc[kRows][kTok];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTok; ++t) acc[r][t] = 0.0f;
#pragma unroll 2
  for (int64_t u = lane; u < a.n_units; u += 32) {
    U::W wu[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t o = min64(g * kRows + r, a.n_out - 1);
      wu[r] = load_q4k_global(a.w + o * a.row_bytes + (u / 4) * U::kBlockBytes,
                              static_cast<int>(u % 4));
    }
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      if (t >= nt) break;
      const int8_t* xq = a.xq + (t0 + t) * a.n_in;
      const ActBlock* xb = a.xb + (t0 + t) * (a.n_in / 32);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][t] = __fadd_rn(acc[r][t], U::dot(wu[r], xq, xb, u));
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t o = g * kRows + r;
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      const float s = warp_sum(acc[r][t]);
      if (lane == 0 && t < nt && o < a.n_out) {
        float* yr = reinterpret_cast<float*>(a.y.row(t0 + t));
        yr[o] = a.bias != nullptr ? __fadd_rn(s, a.bias[o]) : s;
      }
    }
  }
}

// ---- launchers ----

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

int tok_tile(int64_t n_tok) {
  return n_tok == 1 ? 1 : n_tok <= 4 ? 4 : 8;
}

// Bytes of shared memory for x on the fused decode path (0 when x is quantized separately).
int64_t fused_x_smem(int64_t n_in) {
  return ((n_in + 15) & ~int64_t{15}) + (n_in / 32) * static_cast<int64_t>(sizeof(ActBlock));
}
constexpr int64_t kMaxFusedXSmem = 96 << 10;  // n_in up to ~85k: every model we load

template <GgmlType T, int kTok>
void launch_q(const QArgs<Unit<T>>& a, cudaStream_t stream) {
  using U = Unit<T>;
  constexpr int kWeightSmem = kWarps * 2 * kRows * U::kLoads * 512;
  const int64_t x_smem = a.xq == nullptr ? fused_x_smem(a.n_in) : 0;
  const int smem = static_cast<int>(kWeightSmem + x_smem);
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemv_q_kernel<T, kTok>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kWeightSmem + kMaxFusedXSmem)));
    return true;
  }();
  (void)attr_set;
  // Resident blocks for this shared-memory size (cached: n_in repeats across a model's calls).
  static thread_local int cached_smem = -1, cached_blocks = 1;
  if (smem != cached_smem) {
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemv_q_kernel<T, kTok>,
                                                             kWarps * 32, smem));
    cached_smem = smem;
    cached_blocks = std::max(n, 1);
  }
  const int64_t n_groups = (a.n_out + kRows - 1) / kRows;
  const int64_t blocks = std::min<int64_t>((n_groups + kWarps - 1) / kWarps,
                                           static_cast<int64_t>(cached_blocks) * sm_count());
  const int64_t tok_groups = (a.n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  gemv_q_kernel<T, kTok><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(tok_groups)),
                           kWarps * 32, smem, stream>>>(a);
  CUDA_CHECK_LAUNCH();
}

template <int kTok, int kR = kRows, int kMinBlocks = 1>
void launch_q4k_direct(const QArgs<Unit<GgmlType::Q4_K>>& a, cudaStream_t stream) {
  const int64_t tok_groups = (a.n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  const dim3 grid(grid_1d((a.n_out + kR - 1) / kR, kWarps), static_cast<unsigned>(tok_groups));
  gemv_q4k_direct_kernel<kTok, kR, kMinBlocks><<<grid, kWarps * 32, 0, stream>>>(a);
  CUDA_CHECK_LAUNCH();
}

// One-row Q4_K variants for measurement (TEMPO9_CUDA_Q4K=r2b8|r1b8|r4b4; default: 2 rows per
// warp, no register cap). Same unit order and arithmetic: same bits.
void launch_q4k_decode(const QArgs<Unit<GgmlType::Q4_K>>& a, cudaStream_t stream) {
  static const std::string v = [] {
    const char* e = std::getenv("TEMPO9_CUDA_Q4K");
    return std::string(e != nullptr ? e : "");
  }();
  if (v == "r2b8") return launch_q4k_direct<1, 2, 8>(a, stream);
  if (v == "r1b8") return launch_q4k_direct<1, 1, 8>(a, stream);
  if (v == "r4b4") return launch_q4k_direct<1, 4, 4>(a, stream);
  launch_q4k_direct<1>(a, stream);
}

template <GgmlType T>
void run_q(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y, Scratch& scratch,
           cudaStream_t stream) {
  const int64_t n_in = w.ne[0], n_tok = x.n_rows();
  QArgs<Unit<T>> a{reinterpret_cast<const uint8_t*>(base_ptr(w)),
                   static_cast<int64_t>(w.nb[1]),
                   w.ne[1],
                   n_in / Unit<T>::kElems,
                   n_in,
                   n_tok,
                   nullptr,
                   nullptr,
                   desc(x),
                   desc(y),
                   bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr};
  // Q4_K rows on 16-byte boundaries: the direct kernel (TEMPO9_CUDA_STAGED=1: the staged one).
  static const bool staged = std::getenv("TEMPO9_CUDA_STAGED") != nullptr;
  const bool direct = T == GgmlType::Q4_K && !staged && a.row_bytes % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
  // TEMPO9_CUDA_FUSED=1 (read once): one-row calls quantize x inside the staged GEMV, one
  // launch. Measured slower (every block re-quantizes all of x before its first weights: Q4_K
  // 14336 -> 4096 took 66 us fused vs 24 us with the separate quantizer), so off by default.
  static const bool fused = std::getenv("TEMPO9_CUDA_FUSED") != nullptr;
  if (n_tok == 1 && fused && !direct && fused_x_smem(n_in) <= kMaxFusedXSmem)
    return launch_q<T, 1>(a, stream);
  const size_t q_bytes = (static_cast<size_t>(n_in * n_tok) + 255) & ~size_t{255};
  const int64_t n_blocks = n_tok * (n_in / 32);
  auto* base = static_cast<uint8_t*>(
      scratch.reserve(q_bytes + static_cast<size_t>(n_blocks) * sizeof(ActBlock), stream));
  a.xq = reinterpret_cast<int8_t*>(base);
  a.xb = reinterpret_cast<ActBlock*>(base + q_bytes);
  quantize_act_kernel<<<grid_1d(n_blocks, 8), 256, 0, stream>>>(
      desc(x), n_in, n_blocks, const_cast<int8_t*>(a.xq), const_cast<ActBlock*>(a.xb));
  CUDA_CHECK_LAUNCH();
  if constexpr (T == GgmlType::Q4_K) {
    if (direct) {
      switch (tok_tile(n_tok)) {
        case 1:
          return launch_q4k_decode(a, stream);
        case 4:
          return launch_q4k_direct<4>(a, stream);
        default:
          return launch_q4k_direct<8>(a, stream);
      }
    }
  }
  switch (tok_tile(n_tok)) {
    case 1:
      return launch_q<T, 1>(a, stream);
    case 4:
      return launch_q<T, 4>(a, stream);
    default:
      return launch_q<T, 8>(a, stream);
  }
}

}  // namespace

bool launch_fast_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                        Scratch& scratch, cudaStream_t stream) {
  // Every weight row starts on a 2-byte boundary (all block sizes are even) in these formats.
  const bool w2 = reinterpret_cast<uintptr_t>(base_ptr(w)) % 2 == 0;
  switch (w.type) {
    case GgmlType::Q4_0:
      if (!w2) return false;
      run_q<GgmlType::Q4_0>(w, x, bias, y, scratch, stream);
      return true;
    case GgmlType::Q4_1:
      if (!w2) return false;
      run_q<GgmlType::Q4_1>(w, x, bias, y, scratch, stream);
      return true;
    case GgmlType::Q5_0:
      if (!w2) return false;
      run_q<GgmlType::Q5_0>(w, x, bias, y, scratch, stream);
      return true;
    case GgmlType::Q8_0:
      if (!w2) return false;
      run_q<GgmlType::Q8_0>(w, x, bias, y, scratch, stream);
      return true;
    case GgmlType::Q4_K:
      if (!w2) return false;
      run_q<GgmlType::Q4_K>(w, x, bias, y, scratch, stream);
      return true;
    case GgmlType::Q6_K:
      if (!w2) return false;
      run_q<GgmlType::Q6_K>(w, x, bias, y, scratch, stream);
      return true;
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::F32:
      return launch_float_matmul(w, x, bias, y, stream);
    default:
      return false;
  }
}

}  // namespace t9::cuda

namespace t9 {

bool cuda_matmul_int8_activations(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q8_0 ||
         t == GgmlType::Q4_K || t == GgmlType::Q6_K;
}

}  // namespace t9
