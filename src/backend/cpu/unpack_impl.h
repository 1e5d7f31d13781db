// Weight unpacking and activation quantization (formats in matmul_kernels.h), written as plain
// loops and included by every ISA's kernel file, where the compiler vectorizes them for that ISA.
// Each includer defines T9_ISA_NS first, so every ISA gets its own copies (one shared inline
// definition would let the linker run AVX-512 code on the scalar path).

#include <cmath>
#include <cstring>
#ifdef __F16C__
#include <immintrin.h>
#endif

#include "quant/blocks.h"
#include "quant/codebooks.h"
#include "quant/half.h"

#ifndef T9_ISA_NS
#error define T9_ISA_NS before including unpack_impl.h
#endif

namespace t9::cpu::T9_ISA_NS {

// GCC vector extensions: portable code that each ISA's compile turns into its own SIMD. The
// scalar build warns that 32-byte vector returns have another ABI without AVX; these helpers are
// per-TU (T9_ISA_NS) and inlined, so no call crosses ISAs.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef uint8_t u8x16 __attribute__((vector_size(16), aligned(1)));
typedef uint8_t u8x32 __attribute__((vector_size(32), aligned(1)));
typedef float f32x4 __attribute__((vector_size(16), aligned(4)));
typedef float f32x8 __attribute__((vector_size(32), aligned(4)));
typedef float f32x16 __attribute__((vector_size(64), aligned(4)));
typedef uint8_t u8x8 __attribute__((vector_size(8), aligned(1)));
typedef int8_t i8x16 __attribute__((vector_size(16), aligned(1)));
typedef int32_t i32x8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t i32x16 __attribute__((vector_size(64), aligned(4)));

template <typename V>
inline V load_v(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
inline void store_v(void* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

// fp16 -> fp32; the hardware conversion where this ISA has one (both are exact).
inline float h2f(uint16_t h) {
#ifdef __F16C__
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// Sets ls/mn for n (a multiple of 16) elements starting at element e.
inline void fill_scales(float* ls, float* mn, int64_t e, int n, float scale, float offset) {
  for (int i = 0; i < n / 16; ++i) {
    ls[e / 16 + i] = scale;
    mn[e / 16 + i] = offset;
  }
}

// The 32 codes of a legacy block: low nibbles are elements 0..15, high nibbles 16..31.
inline u8x32 nibbles32(const uint8_t* qs) {
  const u8x16 v = load_v<u8x16>(qs);
  const u8x16 lo = v & 0xF, hi = v >> 4;
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}

// Q5 codes: bit j of the 32-bit qh adds 16 to element j. Byte j of hb holds byte j / 8 of qh,
// tested against bit j % 8. Built in registers and stored once (storing the nibbles first and
// reloading them would stall on store forwarding).
inline void q5_codes(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
  typedef uint8_t u8x4 __attribute__((vector_size(4), aligned(1)));
  const u8x4 h = load_v<u8x4>(qh);
  const u8x32 hb = __builtin_shufflevector(h, h, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2,
                                           2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const u8x32 bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                     1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const u8x32 set = (u8x32)((hb & bit) != 0);  // 0xFF where the bit is set
  store_v(q, nibbles32(qs) | (set & 16));
}

inline void unpack_legacy(GgmlType type, const uint8_t* src, int64_t n_in, uint8_t* q, float* ls,
                          float* mn) {
  const int64_t nb = n_in / kQK;
  switch (type) {
    case GgmlType::Q4_0:
      for (int64_t i = 0; i < nb; ++i) {
        const auto& b = reinterpret_cast<const BlockQ4_0*>(src)[i];
        const float d = h2f(b.d);
        store_v(q + i * kQK, nibbles32(b.qs));
        fill_scales(ls, mn, i * kQK, kQK, d, -8.0f * d);
      }
      return;
    case GgmlType::Q4_1:
      for (int64_t i = 0; i < nb; ++i) {
        const auto& b = reinterpret_cast<const BlockQ4_1*>(src)[i];
        store_v(q + i * kQK, nibbles32(b.qs));
        fill_scales(ls, mn, i * kQK, kQK, h2f(b.d), h2f(b.m));
      }
      return;
    case GgmlType::Q5_0:
      for (int64_t i = 0; i < nb; ++i) {
        const auto& b = reinterpret_cast<const BlockQ5_0*>(src)[i];
        const float d = h2f(b.d);
        q5_codes(b.qs, b.qh, q + i * kQK);
        fill_scales(ls, mn, i * kQK, kQK, d, -16.0f * d);
      }
      return;
    case GgmlType::Q5_1:
      for (int64_t i = 0; i < nb; ++i) {
        const auto& b = reinterpret_cast<const BlockQ5_1*>(src)[i];
        q5_codes(b.qs, b.qh, q + i * kQK);
        fill_scales(ls, mn, i * kQK, kQK, h2f(b.d), h2f(b.m));
      }
      return;
    case GgmlType::Q8_0:
      for (int64_t i = 0; i < nb; ++i) {
        const auto& b = reinterpret_cast<const BlockQ8_0*>(src)[i];
        std::memcpy(q + i * kQK, b.qs, kQK);
        fill_scales(ls, mn, i * kQK, kQK, h2f(b.d), 0.0f);
      }
      return;
    case GgmlType::IQ4_NL:
      for (int64_t i = 0; i < nb; ++i) {
        const auto& b = reinterpret_cast<const BlockIQ4_NL*>(src)[i];
        for (int j = 0; j < 16; ++j) {
          q[i * kQK + j] = static_cast<uint8_t>(kIQ4NLValues[b.qs[j] & 0xF]);
          q[i * kQK + j + 16] = static_cast<uint8_t>(kIQ4NLValues[b.qs[j] >> 4]);
        }
        fill_scales(ls, mn, i * kQK, kQK, h2f(b.d), 0.0f);
      }
      return;
    default:
      unsupported_weight_type(type);
  }
}

inline void unpack_q2_k(const BlockQ2_K& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = h2f(b.d), dmin = h2f(b.dmin);
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const int is = n * 8 + j * 2 + half;
        const int64_t o = e + n * 128 + j * 32 + half * 16;
        for (int l = 0; l < 16; ++l) q[o + l] = (b.qs[n * 32 + half * 16 + l] >> (2 * j)) & 3;
        fill_scales(ls, mn, o, 16, d * (b.scales[is] & 0xF), -dmin * (b.scales[is] >> 4));
      }
    }
  }
}

// Q3_K's 16 six-bit scales (stored + 32): low 4 bits in the nibbles of bytes 0..7, high 2 bits
// in byte 8 + j % 4 at bit 2 * (j / 4). A local copy of quant/k_scales.h's decoder (see above).
inline int q3_k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | hi << 4) - 32;
}

inline void unpack_q3_k(const BlockQ3_K& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = h2f(b.d);
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      const int bit = n * 4 + j;
      for (int half = 0; half < 2; ++half) {
        const int is = n * 8 + j * 2 + half;
        const int64_t o = e + n * 128 + j * 32 + half * 16;
        for (int l = 0; l < 16; ++l) {
          const int lo = (b.qs[n * 32 + half * 16 + l] >> (2 * j)) & 3;
          const int hi = (b.hmask[half * 16 + l] >> bit) & 1;
          q[o + l] = static_cast<uint8_t>(lo | hi << 2);  // stored level + 4
        }
        const float dl = d * static_cast<float>(q3_k_scale(b.scales, is));
        fill_scales(ls, mn, o, 16, dl, -4.0f * dl);
      }
    }
  }
}

// Q4_K and Q5_K share the scale packing (quant/k_scales.h); qh is null for Q4_K. The 8 six-bit
// (scale, min) pairs are decoded four at a time in 32-bit words, then each pair covers two
// 16-element groups.
inline void unpack_q45_k(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs,
                         const uint8_t* qh, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = h2f(d16), dmin = h2f(dmin16);
  uint32_t a[3];
  std::memcpy(a, scales, 12);
  const uint32_t sc_w[2] = {a[0] & 0x3F3F3F3Fu, (a[2] & 0x0F0F0F0Fu) | ((a[0] >> 2) & 0x30303030u)};
  const uint32_t m_w[2] = {a[1] & 0x3F3F3F3Fu,
                           ((a[2] >> 4) & 0x0F0F0F0Fu) | ((a[1] >> 2) & 0x30303030u)};
  u8x8 sc8, m8;
  std::memcpy(&sc8, sc_w, 8);
  std::memcpy(&m8, m_w, 8);
  const f32x8 scf = __builtin_convertvector(__builtin_convertvector(sc8, i32x8), f32x8) * d;
  const f32x8 mf = __builtin_convertvector(__builtin_convertvector(m8, i32x8), f32x8) * -dmin;
  store_v(ls + e / 16,
          __builtin_shufflevector(scf, scf, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
  store_v(mn + e / 16,
          __builtin_shufflevector(mf, mf, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
  const u8x32 h = qh ? load_v<u8x32>(qh) : u8x32{};
  for (int j = 0; j < 4; ++j) {  // 64 elements: low nibbles of 32 bytes, then high nibbles
    const u8x32 v = load_v<u8x32>(qs + j * 32);
    u8x32 lo = v & 0xF, hi = v >> 4;
    if (qh) {
      lo |= ((h >> (2 * j)) & 1) << 4;
      hi |= ((h >> (2 * j + 1)) & 1) << 4;
    }
    store_v(q + e + j * 64, lo);
    store_v(q + e + j * 64 + 32, hi);
  }
}

inline void unpack_q6_k(const BlockQ6_K& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = h2f(b.d);
  for (int n = 0; n < 2; ++n) {  // stored level + 32, 0..63
    const u8x32 l0 = load_v<u8x32>(b.ql + n * 64), l1 = load_v<u8x32>(b.ql + n * 64 + 32);
    const u8x32 h = load_v<u8x32>(b.qh + n * 32);
    const int64_t o = e + n * 128;
    store_v(q + o, (l0 & 0xF) | (h & 3) << 4);
    store_v(q + o + 32, (l1 & 0xF) | ((h >> 2) & 3) << 4);
    store_v(q + o + 64, (l0 >> 4) | ((h >> 4) & 3) << 4);
    store_v(q + o + 96, (l1 >> 4) | ((h >> 6) & 3) << 4);
  }
  const f32x16 dl =
      __builtin_convertvector(__builtin_convertvector(load_v<i8x16>(b.scales), i32x16), f32x16) * d;
  store_v(ls + e / 16, dl);
  store_v(mn + e / 16, dl * -32.0f);
}

inline void unpack_iq4_xs(const BlockIQ4_XS& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = h2f(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int s = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | ((b.scales_h >> (2 * ib)) & 3)
                                                                       << 4;
    const int64_t o = e + ib * 32;
    for (int j = 0; j < 16; ++j) {
      q[o + j] = static_cast<uint8_t>(kIQ4NLValues[b.qs[ib * 16 + j] & 0xF]);
      q[o + j + 16] = static_cast<uint8_t>(kIQ4NLValues[b.qs[ib * 16 + j] >> 4]);
    }
    fill_scales(ls, mn, o, 32, d * static_cast<float>(s - 32), 0.0f);
  }
}

inline void unpack_row(GgmlType type, const void* row, int64_t n_in, uint8_t* q, float* ls,
                       float* mn) {
  const auto* src = static_cast<const uint8_t*>(row);
  switch (type) {
    case GgmlType::Q2_K:
      for (int64_t e = 0; e < n_in; e += kQK_K)
        unpack_q2_k(reinterpret_cast<const BlockQ2_K*>(src)[e / kQK_K], q, ls, mn, e);
      return;
    case GgmlType::Q3_K:
      for (int64_t e = 0; e < n_in; e += kQK_K)
        unpack_q3_k(reinterpret_cast<const BlockQ3_K*>(src)[e / kQK_K], q, ls, mn, e);
      return;
    case GgmlType::Q4_K:
      for (int64_t e = 0; e < n_in; e += kQK_K) {
        const auto& b = reinterpret_cast<const BlockQ4_K*>(src)[e / kQK_K];
        unpack_q45_k(b.d, b.dmin, b.scales, b.qs, nullptr, q, ls, mn, e);
      }
      return;
    case GgmlType::Q5_K:
      for (int64_t e = 0; e < n_in; e += kQK_K) {
        const auto& b = reinterpret_cast<const BlockQ5_K*>(src)[e / kQK_K];
        unpack_q45_k(b.d, b.dmin, b.scales, b.qs, b.qh, q, ls, mn, e);
      }
      return;
    case GgmlType::Q6_K:
      for (int64_t e = 0; e < n_in; e += kQK_K)
        unpack_q6_k(reinterpret_cast<const BlockQ6_K*>(src)[e / kQK_K], q, ls, mn, e);
      return;
    case GgmlType::IQ4_XS:
      for (int64_t e = 0; e < n_in; e += kQK_K)
        unpack_iq4_xs(reinterpret_cast<const BlockIQ4_XS*>(src)[e / kQK_K], q, ls, mn, e);
      return;
    default:
      unpack_legacy(type, src, n_in, q, ls, mn);
  }
}

// ggml's Q8_0 rule: d = max|x| / 127, q = round(x / d).
inline void quantize_act_row(const float* x, int64_t n_in, int8_t* q, float* d, float* s16) {
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float a = std::fabs(xb[i]);
      amax = a > amax ? a : amax;
    }
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    int sum[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const int v = static_cast<int>(std::nearbyint(xb[i] * id));
      q[b * 32 + i] = static_cast<int8_t>(v);
      sum[i / 16] += v;
    }
    d[b] = db;
    s16[2 * b] = db * static_cast<float>(sum[0]);
    s16[2 * b + 1] = db * static_cast<float>(sum[1]);
  }
}

inline void row_to_f32(GgmlType type, const void* row, int64_t n, float* out) {
  const auto* h = static_cast<const uint16_t*>(row);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, row, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = h2f(h[i]);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t u = static_cast<uint32_t>(h[i]) << 16;
        std::memcpy(&out[i], &u, 4);
      }
      return;
    default:
      unsupported_weight_type(type);
  }
}

}  // namespace t9::cpu::T9_ISA_NS
