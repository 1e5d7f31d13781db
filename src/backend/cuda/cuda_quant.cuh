// Device dequantization of one 32-element chunk of a weight row, for every weight type
// backend_supports_weight_type() accepts. Chunk c holds elements [32c, 32c + 32) of the row; for
// the 256-element formats it is sub-block c % 8 of super-block c / 8. Layouts follow
// quant/dequantize.cpp (the scalar oracle), element for element.
#pragma once

#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "quant/blocks.h"

namespace t9::cuda {

static __constant__ int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

template <GgmlType T>
struct QTraits;
#define T9_QTRAITS(type, blk_elems, blk_bytes)    \
  template <>                                     \
  struct QTraits<GgmlType::type> {                \
    static constexpr int kBlockElems = blk_elems; \
    static constexpr int kBlockBytes = blk_bytes; \
  }
T9_QTRAITS(F32, 1, 4);
T9_QTRAITS(F16, 1, 2);
T9_QTRAITS(BF16, 1, 2);
T9_QTRAITS(Q4_0, 32, 18);
T9_QTRAITS(Q4_1, 32, 20);
T9_QTRAITS(Q5_0, 32, 22);
T9_QTRAITS(Q5_1, 32, 24);
T9_QTRAITS(Q8_0, 32, 34);
T9_QTRAITS(IQ4_NL, 32, 18);
T9_QTRAITS(Q2_K, 256, 84);
T9_QTRAITS(Q3_K, 256, 110);
T9_QTRAITS(Q4_K, 256, 144);
T9_QTRAITS(Q5_K, 256, 176);
T9_QTRAITS(Q6_K, 256, 210);
T9_QTRAITS(IQ4_XS, 256, 136);
#undef T9_QTRAITS

template <GgmlType T>
inline constexpr bool kIsFloat = T == GgmlType::F32 || T == GgmlType::F16 || T == GgmlType::BF16;

__device__ __forceinline__ uint32_t qh_word(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

// Q4_K / Q5_K 6-bit (scale, min) of sub-block j (quant/k_scales.h).
__device__ __forceinline__ void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

__device__ __forceinline__ int q3k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | hi << 4) - 32;
}

// v[0..31] = elements [32c, 32c + 32) of `row`. Float types: elements at or past n (a row length
// that is not a multiple of 32) read as 0.
template <GgmlType T>
__device__ __forceinline__ void dequant_chunk(const uint8_t* row, int64_t c, int64_t n, float* v) {
  if constexpr (kIsFloat<T>) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int64_t e = 32 * c + j;
      float x = 0.0f;
      if (e < n) {
        if constexpr (T == GgmlType::F32) x = reinterpret_cast<const float*>(row)[e];
        if constexpr (T == GgmlType::F16) x = f16_load(row + 2 * e);
        if constexpr (T == GgmlType::BF16) x = bf16_load(row + 2 * e);
      }
      v[j] = x;
    }
  } else if constexpr (QTraits<T>::kBlockElems == 32) {
    const uint8_t* b = row + c * QTraits<T>::kBlockBytes;
    const float d = f16_bits(u16_load(b));
    if constexpr (T == GgmlType::Q8_0) {
#pragma unroll
      for (int j = 0; j < 32; ++j) v[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
    } else {
      // Byte j: element j in the low nibble, j + 16 in the high one.
      constexpr int kQs = T == GgmlType::Q4_0 || T == GgmlType::IQ4_NL ? 2
                          : T == GgmlType::Q4_1                        ? 4
                          : T == GgmlType::Q5_0                        ? 6
                                                                       : 8;
      const uint8_t* qs = b + kQs;
      [[maybe_unused]] float m = 0.0f;
      [[maybe_unused]] uint32_t qh = 0;
      if constexpr (T == GgmlType::Q4_1 || T == GgmlType::Q5_1) m = f16_bits(u16_load(b + 2));
      if constexpr (T == GgmlType::Q5_0) qh = qh_word(b + 2);
      if constexpr (T == GgmlType::Q5_1) qh = qh_word(b + 4);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        int lo = qs[j] & 0xF, hi = qs[j] >> 4;
        if constexpr (T == GgmlType::Q5_0 || T == GgmlType::Q5_1) {
          lo |= static_cast<int>((qh >> j) & 1) << 4;
          hi |= static_cast<int>((qh >> (j + 16)) & 1) << 4;
        }
        if constexpr (T == GgmlType::Q4_0) {
          v[j] = d * static_cast<float>(lo - 8);
          v[j + 16] = d * static_cast<float>(hi - 8);
        } else if constexpr (T == GgmlType::Q5_0) {
          v[j] = d * static_cast<float>(lo - 16);
          v[j + 16] = d * static_cast<float>(hi - 16);
        } else if constexpr (T == GgmlType::IQ4_NL) {
          v[j] = d * static_cast<float>(kIq4nl[lo]);
          v[j + 16] = d * static_cast<float>(kIq4nl[hi]);
        } else {  // Q4_1, Q5_1
          v[j] = __fadd_rn(__fmul_rn(d, static_cast<float>(lo)), m);
          v[j + 16] = __fadd_rn(__fmul_rn(d, static_cast<float>(hi)), m);
        }
      }
    }
  } else {
    const uint8_t* b = row + (c / 8) * QTraits<T>::kBlockBytes;
    const int sb = static_cast<int>(c % 8);  // 32-element sub-block
    if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
      const float d = f16_bits(u16_load(b)), dmin = f16_bits(u16_load(b + 2));
      int sc, mn;
      k_scale_min(b + 4, sb, &sc, &mn);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
      constexpr int kQs = T == GgmlType::Q4_K ? 16 : 48;
      const uint8_t* qs = b + kQs + 32 * (sb / 2);
      const int shift = 4 * (sb % 2);
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        int q = (qs[l] >> shift) & 0xF;
        if constexpr (T == GgmlType::Q5_K) q |= ((b[16 + l] >> sb) & 1) << 4;
        v[l] = __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
      }
    } else if constexpr (T == GgmlType::Q6_K) {
      // e = 128h + 32s + l: low nibble (32s + l) / 64 of ql[64h + (32s + l) % 64], high 2 bits
      // at 2s of qh[32h + l]; scale of e / 16.
      const uint8_t* ql = b;
      const uint8_t* qhp = b + 128;
      const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_bits(u16_load(b + 208));
      const int h = sb / 4, s = sb % 4;
      const int lq = 64 * h + (32 * s) % 64, lshift = 4 * ((32 * s) / 64);
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        const int q = ((ql[lq + l] >> lshift) & 0xF) | ((qhp[32 * h + l] >> (2 * s)) & 3) << 4;
        const float dl = d * static_cast<float>(scales[2 * sb + l / 16]);
        v[l] = dl * static_cast<float>(q - 32);
      }
    } else if constexpr (T == GgmlType::Q2_K) {
      const uint8_t* scales = b;
      const uint8_t* qs = b + 16;
      const float d = f16_bits(u16_load(b + 80)), dmin = f16_bits(u16_load(b + 82));
      const int h = sb / 4, s = sb % 4;
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        const uint8_t sc = scales[2 * sb + l / 16];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        const int q = (qs[32 * h + l] >> (2 * s)) & 3;
        v[l] = __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
      }
    } else if constexpr (T == GgmlType::Q3_K) {
      const uint8_t* hmask = b;
      const uint8_t* qs = b + 32;
      const uint8_t* scales = b + 96;
      const float d = f16_bits(u16_load(b + 108));
      const int h = sb / 4, s = sb % 4;
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        const float dl = d * static_cast<float>(q3k_scale(scales, 2 * sb + l / 16));
        const int lo = (qs[32 * h + l] >> (2 * s)) & 3;
        const int high_set = (hmask[l] >> sb) & 1;
        v[l] = dl * static_cast<float>(lo - (high_set ? 0 : 4));
      }
    } else if constexpr (T == GgmlType::IQ4_XS) {
      const float d = f16_bits(u16_load(b));
      const uint16_t scales_h = u16_load(b + 2);
      const int ls = ((b[4 + sb / 2] >> (4 * (sb % 2))) & 0xF) | ((scales_h >> (2 * sb)) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b + 8 + 16 * sb;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        v[j] = dl * static_cast<float>(kIq4nl[qs[j] & 0xF]);
        v[j + 16] = dl * static_cast<float>(kIq4nl[qs[j] >> 4]);
      }
    }
  }
}

// Calls fn(std::integral_constant<GgmlType, T>{}) for the runtime type t; CHECKs support.
template <typename Fn>
void dispatch_weight_type(GgmlType t, Fn&& fn) {
  switch (t) {
#define T9_CASE(type)                                       \
  case GgmlType::type:                                      \
    fn(std::integral_constant<GgmlType, GgmlType::type>{}); \
    return;
    T9_CASE(F32)
    T9_CASE(F16)
    T9_CASE(BF16)
    T9_CASE(Q4_0)
    T9_CASE(Q4_1)
    T9_CASE(Q5_0)
    T9_CASE(Q5_1)
    T9_CASE(Q8_0)
    T9_CASE(IQ4_NL)
    T9_CASE(Q2_K)
    T9_CASE(Q3_K)
    T9_CASE(Q4_K)
    T9_CASE(Q5_K)
    T9_CASE(Q6_K)
    T9_CASE(IQ4_XS)
#undef T9_CASE
    default:
      T9_CHECK(false, "cuda: weight type {} is not supported", type_name(t));
  }
}

}  // namespace t9::cuda
