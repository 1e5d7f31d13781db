// Scalar reference dequantization, one function per block format. Each decodes `nb` blocks; the
// element order inside a block is ggml's (see the comment on each function for the layout).
#include "quant/dequantize.h"

#include <cstring>

#include "core/check.h"
#include "quant/blocks.h"
#include "quant/codebooks.h"
#include "quant/half.h"
#include "quant/k_scales.h"

// Bit-exactness needs every multiply and add rounded separately: no fused multiply-add. GCC
// never contracts in ISO C++ mode (the build uses -std=c++20); clang needs telling.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace t9 {
namespace {

using DequantFn = void (*)(const void* src, float* dst, int64_t nb);

void dequant_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequant_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, h + 2 * i, 2);
    dst[i] = f16_to_f32(bits);
  }
}

void dequant_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, h + 2 * i, 2);
    dst[i] = bf16_to_f32(bits);
  }
}

// Legacy 32-element formats: byte j holds element j in its low nibble and element j + 16 in its
// high nibble. Q5 keeps the fifth bit of element i in bit i of the little-endian qh word.
uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

void dequant_q4_0(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>((b[i].qs[j] & 0xF) - 8);
      y[j + kQK / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequant_q4_1(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>(b[i].qs[j] & 0xF) + m;
      y[j + kQK / 2] = d * static_cast<float>(b[i].qs[j] >> 4) + m;
    }
  }
}

void dequant_q5_0(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b[i].qs[j] & 0xF) | static_cast<int>((qh >> j) & 1) << 4;
      const int hi = (b[i].qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
      y[j] = d * static_cast<float>(lo - 16);
      y[j + kQK / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void dequant_q5_1(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (b[i].qs[j] & 0xF) | static_cast<int>((qh >> j) & 1) << 4;
      const int hi = (b[i].qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
      y[j] = d * static_cast<float>(lo) + m;
      y[j + kQK / 2] = d * static_cast<float>(hi) + m;
    }
  }
}

void dequant_q8_0(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(b[i].qs[j]);
  }
}

// Q2_K: element e = 128*h + 32*s + l (h < 2, s < 4, l < 32) is bits 2s..2s+1 of qs[32h + l];
// sub-block e / 16 has scale (low nibble, times d) and min (high nibble, times dmin).
void dequant_q2_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int sb = 0; sb < kQK_K / 16; ++sb) {
      const uint8_t sc = b[i].scales[sb];
      const float dl = d * static_cast<float>(sc & 0xF);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const int h = sb / 8, s = (sb % 8) / 2;
      const uint8_t* qs = b[i].qs + 32 * h + 16 * (sb % 2);
      for (int l = 0; l < 16; ++l) {
        const int q = (qs[l] >> (2 * s)) & 3;
        y[16 * sb + l] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Q3_K: element e = 128*h + 32*s + l has low bits 2s..2s+1 of qs[32h + l] and its third bit in
// bit e / 32 of hmask[l]; a CLEAR hmask bit subtracts 4 (q in -4..3).
void dequant_q3_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = f16_to_f32(b[i].d);
    for (int sb = 0; sb < kQK_K / 16; ++sb) {
      const float dl = d * static_cast<float>(unpack_q3_k_scale(b[i].scales, sb));
      const int h = sb / 8, s = (sb % 8) / 2, l0 = 16 * (sb % 2);
      for (int l = l0; l < l0 + 16; ++l) {
        const int lo = (b[i].qs[32 * h + l] >> (2 * s)) & 3;
        const int high_set = (b[i].hmask[l] >> (sb / 2)) & 1;
        y[16 * sb + l - l0] = dl * static_cast<float>(lo - (high_set ? 0 : 4));
      }
    }
  }
}

// Q4_K: element e = 64*c + 32*n + l is nibble n of qs[32c + l]; sub-block e / 32.
void dequant_q4_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int sb = 0; sb < kQK_K / 32; ++sb) {
      int sc, m;
      unpack_k_scale_min(b[i].scales, sb, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      const uint8_t* qs = b[i].qs + 32 * (sb / 2);
      const int shift = 4 * (sb % 2);
      for (int l = 0; l < 32; ++l)
        y[32 * sb + l] = d1 * static_cast<float>((qs[l] >> shift) & 0xF) - m1;
    }
  }
}

// Q5_K: as Q4_K, plus the fifth bit of element e in bit e / 32 of qh[e % 32].
void dequant_q5_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int sb = 0; sb < kQK_K / 32; ++sb) {
      int sc, m;
      unpack_k_scale_min(b[i].scales, sb, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      const uint8_t* qs = b[i].qs + 32 * (sb / 2);
      const int shift = 4 * (sb % 2);
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 0xF) | ((b[i].qh[l] >> sb) & 1) << 4;
        y[32 * sb + l] = d1 * static_cast<float>(q) - m1;
      }
    }
  }
}

// Q6_K: element e = 128*h + 64*n + l' (l' < 64) has its low 4 bits in nibble n of ql[64h + l'],
// and, writing e = 128*h + 32*s + l (l < 32), its high 2 bits in bits 2s..2s+1 of qh[32h + l].
// Values are offset by 32; sub-block e / 16 has a signed 8-bit scale.
void dequant_q6_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = f16_to_f32(b[i].d);
    for (int sb = 0; sb < kQK_K / 16; ++sb) {
      const float dl = d * static_cast<float>(b[i].scales[sb]);
      const int h = sb / 8, r0 = 16 * (sb % 8);  // r0: offset of the sub-block in its half
      const uint8_t* ql = b[i].ql + 64 * h + r0 % 64;
      const uint8_t* qh = b[i].qh + 32 * h + r0 % 32;
      const int ql_shift = 4 * (r0 / 64), qh_shift = 2 * (r0 / 32);
      for (int l = 0; l < 16; ++l) {
        const int q = ((ql[l] >> ql_shift) & 0xF) | ((qh[l] >> qh_shift) & 3) << 4;
        y[16 * sb + l] = dl * static_cast<float>(q - 32);
      }
    }
  }
}

void dequant_q8_k(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) y[j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

void dequant_iq4_nl(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>(kIQ4NLValues[b[i].qs[j] & 0xF]);
      y[j + kQK / 2] = d * static_cast<float>(kIQ4NLValues[b[i].qs[j] >> 4]);
    }
  }
}

// IQ4_XS: 8 sub-blocks of 32, each laid out like an IQ4_NL block (16 bytes of qs), with a
// six-bit scale (offset 32): low 4 bits from nibble sb % 2 of scales_l[sb / 2], high 2 bits from
// bits 2sb..2sb+1 of scales_h.
void dequant_iq4_xs(const void* src, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int sb = 0; sb < kQK_K / 32; ++sb, y += 32) {
      const int ls = ((b[i].scales_l[sb / 2] >> (4 * (sb % 2))) & 0xF) |
                     ((b[i].scales_h >> (2 * sb)) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b[i].qs + 16 * sb;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIQ4NLValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIQ4NLValues[qs[j] >> 4]);
      }
    }
  }
}

DequantFn dequant_fn(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return dequant_f32;
    case GgmlType::F16:
      return dequant_f16;
    case GgmlType::BF16:
      return dequant_bf16;
    case GgmlType::Q4_0:
      return dequant_q4_0;
    case GgmlType::Q4_1:
      return dequant_q4_1;
    case GgmlType::Q5_0:
      return dequant_q5_0;
    case GgmlType::Q5_1:
      return dequant_q5_1;
    case GgmlType::Q8_0:
      return dequant_q8_0;
    case GgmlType::Q2_K:
      return dequant_q2_k;
    case GgmlType::Q3_K:
      return dequant_q3_k;
    case GgmlType::Q4_K:
      return dequant_q4_k;
    case GgmlType::Q5_K:
      return dequant_q5_k;
    case GgmlType::Q6_K:
      return dequant_q6_k;
    case GgmlType::Q8_K:
      return dequant_q8_k;
    case GgmlType::IQ4_NL:
      return dequant_iq4_nl;
    case GgmlType::IQ4_XS:
      return dequant_iq4_xs;
    default:
      return nullptr;
  }
}

}  // namespace

bool can_dequantize(GgmlType t) {
  return dequant_fn(t) != nullptr;
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const DequantFn fn = dequant_fn(t);
  T9_CHECK(fn != nullptr, "dequantize_row: type {} is not supported", traits(t).name);
  const auto& tr = traits(t);
  T9_CHECK(n >= 0 && n % tr.block_elems == 0,
           "dequantize_row: {} elements is not a multiple of "
           "{}'s block of {}",
           n, tr.name, tr.block_elems);
  fn(src, dst, n / tr.block_elems);
}

Result<std::vector<float>> dequantize_bytes(GgmlType t, const void* src, size_t n_bytes) {
  const auto tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (!tr) return error("dequantize: unknown type id {}", static_cast<uint32_t>(t));
  if (!can_dequantize(t)) return error("dequantize: type {} is not supported", tr->name);
  if (n_bytes % tr->block_bytes != 0)
    return error("dequantize: {} bytes is not a whole number of {} blocks of {} bytes", n_bytes,
                 tr->name, tr->block_bytes);
  const int64_t n = static_cast<int64_t>(n_bytes / tr->block_bytes) * tr->block_elems;
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, src, out.data(), n);
  return out;
}

}  // namespace t9
