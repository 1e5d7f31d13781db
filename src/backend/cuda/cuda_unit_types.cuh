// Internal to the CUDA backend: the int8-activation weight "units" of cuda_units.cuh, per type
// (Q8_0, Q4_0, Q4_1, Q5_0 and the K-quants Q3_K .. Q6_K): how a lane decodes a unit of a block
// in shared memory to signed int8x4 words and float scales, and the float arithmetic that turns
// the unit's integer sums into its dot (the same functions in the GEMVs and the tensor-core
// kernel: cuda_units.cuh's canonical order). Also ActBlock (a 32-activation block's scale and
// code sum) and the shared-memory and bit helpers the loads use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_quant.cuh"
#include "quant/unit_words.h"

namespace t9::cuda {

// Per 32 activations: the scale and the sum of the int8 codes (for the formats' offsets).
struct ActBlock {
  float d;
  float isum;  // an integer (|sum| <= 32 * 128), exact in float: kernels need no conversion
};

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
// N consecutive 32-bit words at a 2-byte-aligned shared address: N + 1 aligned loads and a
// funnel shift each (instead of 2N 16-byte halves).
template <int N>
__device__ __forceinline__ void lds_words(const uint8_t* p, uint32_t (&w)[N]) {
  // Pointer arithmetic on p (not an integer mask) keeps the shared address space visible to the
  // compiler: LDS instead of generic loads.
  const auto* base = reinterpret_cast<const uint32_t*>(p - (reinterpret_cast<uintptr_t>(p) & 3));
  const unsigned sh = (reinterpret_cast<uintptr_t>(p) & 2) * 8;
  uint32_t v[N + 1];
#pragma unroll
  for (int i = 0; i <= N; ++i) v[i] = base[i];
#pragma unroll
  for (int i = 0; i < N; ++i) w[i] = __funnelshift_r(v[i], v[i + 1], sh);
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
    uint32_t q[8];
    lds_words(b + 2, q);
#pragma unroll
    for (int k = 0; k < 8; ++k) w.q[k] = static_cast<int>(q[k]);
    return w;
  }
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    return dot_at(w, xq + 32 * u, xb + u);
  }
  // The same from the unit's own 32 activations x and ActBlock a (packed copies in the GEMV).
  static constexpr int kXBytes = 32, kActs = 1;
  // (The legacy kernels' order; the sliced kernels use acc below.)
  static __device__ __forceinline__ float dot_at(const W& w, const int8_t* x, const ActBlock* a) {
    return __fmul_rn(__fmul_rn(w.d, a[0].d), sum_at(w, x));
  }
  // The integer sum of the unit's 32 products, as an exact float.
  static __device__ __forceinline__ float sum_at(const W& w, const int8_t* x) {
    return static_cast<float>(dot4(w.q + 4, ldx(x + 16), dot4(w.q, ldx(x), 0)));
  }
  // Copies unit u's activations and ActBlocks (as dot_at reads them) to x, a.
  static __device__ __forceinline__ void pack(const int8_t* xq, const ActBlock* xb, int64_t u,
                                              int8_t* x, ActBlock* a) {
    *reinterpret_cast<int4*>(x) = ldx(xq + 32 * u);
    *reinterpret_cast<int4*>(x + 16) = ldx(xq + 32 * u + 16);
    a[0] = xb[u];
  }
  // The canonical accumulation (top of file) from the unit's integer sum s (an exact float):
  // the dot's last product fused into the slice partial, p = fma(d * a.d, s, p).
  static __device__ __forceinline__ float acc(float p, float d, ActBlock a, float s) {
    return __fmaf_rn(__fmul_rn(d, a.d), s, p);
  }
  static __device__ __forceinline__ float acc(float p, const W& w, const int8_t* xq,
                                              const ActBlock* xb, int64_t u) {
    return acc_at(p, w, xq + 32 * u, xb + u);
  }
  static __device__ __forceinline__ float acc_at(float p, const W& w, const int8_t* x,
                                                 const ActBlock* a) {
    return acc(p, w.d, a[0], sum_at(w, x));
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

// The K-quants with a scale and a min per 32 elements (Q4_K, Q5_K): unit p of a super-block =
// sub-blocks 2p and 2p + 1, elements 64p .. 64p + 64, codes unsigned; each type's load() decodes
// the unit, everything after that is shared.
template <GgmlType T>
struct UnitKMin : UnitShape<T, 64> {
  struct W {
    int q[16];
    float s0, m0, s1, m1;
  };
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    return dot_at(w, xq + 64 * u, xb + 2 * u);
  }
  static constexpr int kXBytes = 64, kActs = 2;
  static __device__ __forceinline__ float dot_at(const W& w, const int8_t* x, const ActBlock* a) {
    const int s0 = dot4(w.q + 4, ldx(x + 16), dot4(w.q, ldx(x), 0));
    const int s1 = dot4(w.q + 12, ldx(x + 48), dot4(w.q + 8, ldx(x + 32), 0));
    return second(first(a[0], inner(w.s0, w.m0, a[0], static_cast<float>(s0))), a[1],
                  inner(w.s1, w.m1, a[1], static_cast<float>(s1)));
  }
  static __device__ __forceinline__ float acc(float p, const W& w, const int8_t* xq,
                                              const ActBlock* xb, int64_t u) {
    return __fadd_rn(p, dot(w, xq, xb, u));
  }
  static __device__ __forceinline__ float acc_at(float p, const W& w, const int8_t* x,
                                                 const ActBlock* a) {
    return __fadd_rn(p, dot_at(w, x, a));
  }
  static __device__ __forceinline__ void pack(const int8_t* xq, const ActBlock* xb, int64_t u,
                                              int8_t* x, ActBlock* a) {
#pragma unroll
    for (int k = 0; k < 4; ++k) *reinterpret_cast<int4*>(x + 16 * k) = ldx(xq + 64 * u + 16 * k);
    a[0] = xb[2 * u], a[1] = xb[2 * u + 1];
  }
  // Q4_K's and Q5_K's header (d, dmin, then 12 scale bytes): the scales and mins of unit p's
  // sub-blocks 2p and 2p + 1 into w.
  static __device__ __forceinline__ void load_scales(const uint8_t* b, int p, W& w) {
    const float d = f16(lds16(b)), dmin = f16(lds16(b + 2));
    int sc, mn;
    k_scale_min(b + 4, 2 * p, &sc, &mn);
    w.s0 = __fmul_rn(d, static_cast<float>(sc));
    w.m0 = __fmul_rn(dmin, static_cast<float>(mn));
    k_scale_min(b + 4, 2 * p + 1, &sc, &mn);
    w.s1 = __fmul_rn(d, static_cast<float>(sc));
    w.m1 = __fmul_rn(dmin, static_cast<float>(mn));
  }
  // One 32-element sub-block from its integer sum s = sum(q x) (an exact float), before the
  // activation scale: sum (sc q - m) x = sc sum(q x) - m sum(x). A unit's dot is
  // second(first(a0, inner0), a1, inner1) = fma(a1.d, inner1, a0.d * inner0).
  static __device__ __forceinline__ float inner(float sc, float m, ActBlock a, float s) {
    return __fmaf_rn(sc, s, -__fmul_rn(m, a.isum));
  }
  static __device__ __forceinline__ float first(ActBlock a, float in) {
    return __fmul_rn(a.d, in);
  }
  static __device__ __forceinline__ float second(float d, ActBlock a, float in) {
    return __fmaf_rn(a.d, in, d);
  }
};

// Q4_K (144 bytes: d, dmin, 12 scale bytes, qs 128): sub-block 2p is the low nibbles of
// qs[32p .. 32p + 32), 2p + 1 the high ones.
template <>
struct Unit<GgmlType::Q4_K> : UnitKMin<GgmlType::Q4_K> {
  static __device__ __forceinline__ W load(const uint8_t* b, int p) {
    W w;
    load_scales(b, p, w);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t v = lds32_a4(b + 16 + 32 * p + 4 * k);
      w.q[k] = static_cast<int>(v & 0x0F0F0F0Fu);
      w.q[k + 8] = static_cast<int>((v >> 4) & 0x0F0F0F0Fu);
    }
    return w;
  }
};

// Q5_K (176 bytes: d, dmin, 12 scale bytes, qh 32, qs 128): Q4_K's nibbles at qs = 48 and a
// fifth bit, element 64p + 32n + l's at bit 2p + n of qh[l] (dequant_q5_k, quant/dequantize.cpp).
template <>
struct Unit<GgmlType::Q5_K> : UnitKMin<GgmlType::Q5_K> {
  static __device__ __forceinline__ W load(const uint8_t* b, int p) {
    W w;
    load_scales(b, p, w);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t v = lds32_a4(b + 48 + 32 * p + 4 * k);
      const uint32_t h = lds32_a4(b + 16 + 4 * k) >> (2 * p);  // bits 2p, 2p + 1 at 0, 1
      w.q[k] = static_cast<int>(q5k_unit_codes(v, h, 0));
      w.q[k + 8] = static_cast<int>(q5k_unit_codes(v, h, 1));
    }
    return w;
  }
};

// The 16-element-scale K-quants (Q6_K, Q3_K): unit v = 2h + lh of a super-block covers elements
// 128h + 32s + 16lh + i (s = 0..3, i = 0..15), group s with its own scale (scales index
// 8h + 2s + lh); each type's load() decodes the unit's 64 codes to signed int8x4 words and the
// four scales as exact floats, and everything after that is shared.
template <GgmlType T>
struct UnitK16 : UnitShape<T, 64> {
  struct W {
    int q[16];  // group s in q[4s .. 4s + 4)
    float sc[4];
  };
  static __device__ __forceinline__ float dot(const W& w, const int8_t* xq, const ActBlock* xb,
                                              int64_t u) {
    const int64_t sb = u / 4, v = u % 4, h = v / 2, lh = v % 2;
    return dot_at<32>(w, xq + 256 * sb + 128 * h + 16 * lh, xb + 8 * sb + 4 * h);
  }
  // Group s's 16 activations at x + kGroupStride * s (32 in x itself, 16 in a packed copy).
  static constexpr int kXBytes = 64, kActs = 4;
  template <int kGroupStride = 16>
  static __device__ __forceinline__ float dot_at(const W& w, const int8_t* x, const ActBlock* a) {
    float r = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s)
      r = group(r, w.sc[s], a[s],
                static_cast<float>(dot4(w.q + 4 * s, ldx(x + kGroupStride * s), 0)));
    return r;
  }
  static __device__ __forceinline__ float acc(float p, const W& w, const int8_t* xq,
                                              const ActBlock* xb, int64_t u) {
    return __fadd_rn(p, dot(w, xq, xb, u));
  }
  template <int kGroupStride = 16>
  static __device__ __forceinline__ float acc_at(float p, const W& w, const int8_t* x,
                                                 const ActBlock* a) {
    return __fadd_rn(p, dot_at<kGroupStride>(w, x, a));
  }
  static __device__ __forceinline__ void pack(const int8_t* xq, const ActBlock* xb, int64_t u,
                                              int8_t* x, ActBlock* a) {
    const int64_t sb = u / 4, v = u % 4, h = v / 2, lh = v % 2;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      *reinterpret_cast<int4*>(x + 16 * s) = ldx(xq + 256 * sb + 128 * h + 16 * lh + 32 * s);
      a[s] = xb[8 * sb + 4 * h + s];
    }
  }
  // Adds group s (16 elements, integer sum si as an exact float) to the unit's running dot r
  // (from 0.0f, s = 0..3): r = fma(a.d, sc * si, r).
  static __device__ __forceinline__ float group(float r, float sc, ActBlock a, float si) {
    return __fmaf_rn(a.d, __fmul_rn(sc, si), r);
  }
};

// Q6_K (210 bytes: ql 128, qh 64, 16 int8 scales, f16 d): element 128h + 32s + 16lh + i has its
// low nibble in ql[64h + 16lh + i] (s = 0 low, s = 2 high nibble) or ql[64h + 32 + 16lh + i]
// (s = 1, 3), its high 2 bits at 2s of qh[32h + 16lh + i]; code - 32.
template <>
struct Unit<GgmlType::Q6_K> : UnitK16<GgmlType::Q6_K> {
  static __device__ __forceinline__ W load(const uint8_t* b, int v) {
    W w;
    const int h = v / 2, lh = v % 2;
    const float d = f16(lds16(b + 208));
    const uint8_t* qa = b + 64 * h + 16 * lh;
    const uint8_t* qhp = b + 128 + 32 * h + 16 * lh;
    uint32_t qla[4], qlb[4], qhb[4];
    lds_words(qa, qla);
    lds_words(qa + 32, qlb);
    lds_words(qhp, qhb);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t la = qla[k], lb = qlb[k], hb = qhb[k];
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
};

// Q3_K (110 bytes: hmask 32, qs 64, 12 scale bytes, f16 d): element 128h + 32s + 16lh + i has
// its low 2 bits at 2s of qs[32h + 16lh + i] and its high bit at 4h + s of hmask[16lh + i]; code
// (0..7) - 4 (GGUF: low - 4 where the high bit is clear). Scale j (0..15) is 6 bits: the low
// nibble of byte j (j < 8) or the high nibble of byte j - 8, and bits 2 (j / 4) of byte 8 + j % 4
// above it; minus 32 (dequant_q3_k, quant/dequantize.cpp).
template <>
struct Unit<GgmlType::Q3_K> : UnitK16<GgmlType::Q3_K> {
  static __device__ __forceinline__ int scale(const uint8_t* scales, int j) {
    const int lo = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    return (lo | ((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
  }
  static __device__ __forceinline__ W load(const uint8_t* b, int v) {
    W w;
    const int h = v / 2, lh = v % 2;
    const float d = f16(lds16(b + 108));
    uint32_t qs[4], hm[4];
    lds_words(b + 32 + 32 * h + 16 * lh, qs);
    lds_words(b + 16 * lh, hm);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t hk = hm[k] >> (4 * h);  // this half's four high bits at bits 0..3 a byte
#pragma unroll
      for (int s = 0; s < 4; ++s) w.q[4 * s + k] = to_signed<4>(q3k_unit_codes(qs[k], hk, s));
    }
#pragma unroll
    for (int s = 0; s < 4; ++s)  // d x (6-bit scale - 32): exact in fp32
      w.sc[s] = __fmul_rn(d, static_cast<float>(scale(b + 96, 8 * h + 2 * s + lh)));
    return w;
  }
};

}  // namespace t9::cuda
