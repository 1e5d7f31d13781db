// ggml-compatible block layouts. Each struct is the bytes of one block as stored in a GGUF file;
// sizes are asserted against types.cpp's table. fp16 fields are raw uint16_t bits (quant/half.h).
#pragma once

#include <cstdint>

namespace t9 {

inline constexpr int kQK = 32;     // elements per block of the legacy formats
inline constexpr int kQK_K = 256;  // elements per super-block of the k-quants and most i-quants
inline constexpr int kKScaleBytes = 12;

struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };                  // x = d * (q - 8)
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[kQK / 2]; };               // x = d * q + m
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };   // x = d * (q - 16)
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };                       // x = d * q
struct BlockQ8_1 { uint16_t d, s; int8_t qs[kQK]; };                    // s = d * sum(qs)

// k-quants: 256-element super-blocks of sub-blocks with quantized scales.
struct BlockQ2_K { uint8_t scales[kQK_K / 16]; uint8_t qs[kQK_K / 4]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[kQK_K / 8]; uint8_t qs[kQK_K / 4]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[kKScaleBytes]; uint8_t qs[kQK_K / 2]; };
struct BlockQ5_K {
  uint16_t d, dmin; uint8_t scales[kKScaleBytes]; uint8_t qh[kQK_K / 8]; uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K { uint8_t ql[kQK_K / 2]; uint8_t qh[kQK_K / 4]; int8_t scales[kQK_K / 16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[kQK_K]; int16_t bsums[kQK_K / 16]; };  // activations

// i-quants with non-linear 4-bit codebooks.
struct BlockIQ4_NL { uint16_t d; uint8_t qs[kQK / 2]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[kQK_K / 64]; uint8_t qs[kQK_K / 2]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

}  // namespace t9
