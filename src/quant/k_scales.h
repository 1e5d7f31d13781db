// Packing of the six-bit sub-block scales shared by the k-quant encoders and decoders.
#pragma once

#include <cstdint>

namespace t9 {

// Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits in 12 bytes. Pairs 0..3 are the low 6 bits of
// bytes 0..3 (scale) and 4..7 (min); pairs 4..7 keep their low 4 bits in the nibbles of bytes
// 8..11 (scale low, min high) and their top 2 bits in the top bits of bytes 0..3 (scale) and
// 4..7 (min).
inline void unpack_k_scale_min(const uint8_t s[12], int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
    *min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// Inverse of unpack_k_scale_min for all 8 pairs at once; ls and lm must be < 64.
inline void pack_k_scale_min(const uint8_t ls[8], const uint8_t lm[8], uint8_t s[12]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(ls[j] | (ls[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(lm[j] | (lm[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((ls[j + 4] & 0xF) | (lm[j + 4] & 0xF) << 4);
  }
}

// Q3_K: 16 six-bit scales (stored + 32) in 12 bytes: low 4 bits in the nibbles of bytes 0..7
// (sub-blocks 0..7 low nibbles, 8..15 high nibbles), high 2 bits in byte 8 + j % 4 at bits
// 2 * (j / 4). Returns the signed scale.
inline int unpack_q3_k_scale(const uint8_t s[12], int j) {
  const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | hi << 4) - 32;
}

}  // namespace t9
