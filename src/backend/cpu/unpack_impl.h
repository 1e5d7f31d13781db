// Weight unpacking and activation quantization (formats in matmul_kernels.h), written as plain
// loops and included by every ISA's kernel file, where the compiler vectorizes them for that ISA.
// Each includer defines T9_ISA_NS first, so every ISA gets its own copies (one shared inline
// definition would let the linker run AVX-512 code on the scalar path).

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/blocks.h"
#include "quant/codebooks.h"
#include "quant/half.h"
#include "quant/k_scales.h"

#ifndef T9_ISA_NS
#error define T9_ISA_NS before including unpack_impl.h
#endif

namespace t9::cpu::T9_ISA_NS {

// Sets ls/mn for n (a multiple of 16) elements starting at element e.
inline void fill_scales(float* ls, float* mn, int64_t e, int n, float scale, float offset) {
  for (int i = 0; i < n / 4; ++i) ls[e / 4 + i] = scale;
  for (int i = 0; i < n / 16; ++i) mn[e / 16 + i] = offset;
}

inline void split_nibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0xF;
    q[j + 16] = qs[j] >> 4;
  }
}

inline void unpack_legacy(GgmlType type, const uint8_t* src, int64_t n_in, uint8_t* q, float* ls,
                          float* mn) {
  for (int64_t e = 0; e < n_in; e += kQK) {
    switch (type) {
      case GgmlType::Q4_0: {
        const auto* b = reinterpret_cast<const BlockQ4_0*>(src) + e / kQK;
        const float d = f16_to_f32(b->d);
        split_nibbles(b->qs, q + e);
        fill_scales(ls, mn, e, kQK, d, -8.0f * d);
        break;
      }
      case GgmlType::Q4_1: {
        const auto* b = reinterpret_cast<const BlockQ4_1*>(src) + e / kQK;
        split_nibbles(b->qs, q + e);
        fill_scales(ls, mn, e, kQK, f16_to_f32(b->d), f16_to_f32(b->m));
        break;
      }
      case GgmlType::Q5_0:
      case GgmlType::Q5_1: {
        const uint8_t* qh;
        const uint8_t* qs;
        float d, m;
        if (type == GgmlType::Q5_0) {
          const auto* b = reinterpret_cast<const BlockQ5_0*>(src) + e / kQK;
          qh = b->qh, qs = b->qs, d = f16_to_f32(b->d), m = -16.0f * d;
        } else {
          const auto* b = reinterpret_cast<const BlockQ5_1*>(src) + e / kQK;
          qh = b->qh, qs = b->qs, d = f16_to_f32(b->d), m = f16_to_f32(b->m);
        }
        uint32_t h;
        std::memcpy(&h, qh, 4);
        for (int j = 0; j < 16; ++j) {
          q[e + j] = static_cast<uint8_t>((qs[j] & 0xF) | ((h >> j) & 1) << 4);
          q[e + j + 16] = static_cast<uint8_t>((qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4);
        }
        fill_scales(ls, mn, e, kQK, d, m);
        break;
      }
      case GgmlType::Q8_0: {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(src) + e / kQK;
        std::memcpy(q + e, b->qs, kQK);
        fill_scales(ls, mn, e, kQK, f16_to_f32(b->d), 0.0f);
        break;
      }
      case GgmlType::IQ4_NL: {
        const auto* b = reinterpret_cast<const BlockIQ4_NL*>(src) + e / kQK;
        for (int j = 0; j < 16; ++j) {
          q[e + j] = static_cast<uint8_t>(kIQ4NLValues[b->qs[j] & 0xF]);
          q[e + j + 16] = static_cast<uint8_t>(kIQ4NLValues[b->qs[j] >> 4]);
        }
        fill_scales(ls, mn, e, kQK, f16_to_f32(b->d), 0.0f);
        break;
      }
      default:
        T9_CHECK(false, "unpack: unsupported type {}", type_name(type));
    }
  }
}

inline void unpack_q2_k(const BlockQ2_K& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
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

inline void unpack_q3_k(const BlockQ3_K& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = f16_to_f32(b.d);
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
        const float dl = d * static_cast<float>(unpack_q3_k_scale(b.scales, is));
        fill_scales(ls, mn, o, 16, dl, -4.0f * dl);
      }
    }
  }
}

// Q4_K and Q5_K share the scale packing; qh is null for Q4_K.
inline void unpack_q45_k(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs,
                         const uint8_t* qh, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  for (int j = 0; j < 4; ++j) {  // 64 elements: low nibbles of 32 bytes, then high nibbles
    for (int half = 0; half < 2; ++half) {
      int sc, m;
      unpack_k_scale_min(scales, 2 * j + half, &sc, &m);
      const int64_t o = e + j * 64 + half * 32;
      for (int l = 0; l < 32; ++l) {
        int v = half ? qs[j * 32 + l] >> 4 : qs[j * 32 + l] & 0xF;
        if (qh) v |= ((qh[l] >> (2 * j + half)) & 1) << 4;
        q[o + l] = static_cast<uint8_t>(v);
      }
      fill_scales(ls, mn, o, 32, d * static_cast<float>(sc), -dmin * static_cast<float>(m));
    }
  }
}

inline void unpack_q6_k(const BlockQ6_K& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = f16_to_f32(b.d);
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + n * 64;
    const uint8_t* qh = b.qh + n * 32;
    const int64_t o = e + n * 128;
    for (int l = 0; l < 32; ++l) {  // stored level + 32, 0..63
      q[o + l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4);
      q[o + l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4);
      q[o + l + 64] = static_cast<uint8_t>((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
      q[o + l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
    }
    for (int g = 0; g < 8; ++g) {
      const float dl = d * static_cast<float>(b.scales[n * 8 + g]);
      fill_scales(ls, mn, o + g * 16, 16, dl, -32.0f * dl);
    }
  }
}

inline void unpack_iq4_xs(const BlockIQ4_XS& b, uint8_t* q, float* ls, float* mn, int64_t e) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int s = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | ((b.scales_h >> (2 * ib)) & 3) << 4;
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
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
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
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(h[i]);
      return;
    default:
      T9_CHECK(false, "row_to_f32: unsupported type {}", type_name(type));
  }
}

}  // namespace t9::cpu::T9_ISA_NS
