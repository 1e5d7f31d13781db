// The word arithmetic of the CUDA int8 units for Q3_K and Q5_K (backend/cuda/cuda_units.cuh): a
// 4-byte word of a block's bytes (little-endian, as the kernels load it) to four unsigned codes,
// one a byte. Compiled for the device there and for the host in
// tests/unit/quant/unit_words_test.cpp, which checks every code of random blocks against GGUF's
// dequantization (quant/dequantize.cpp).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace t9 {

// Q3_K, unit v = 2h + lh (elements 128h + 32s + 16lh + i): qs = the word of qs[32h + 16lh + 4k ..],
// hm_half = the word of hmask[16lh + 4k ..] shifted right by 4h; the codes (0..7, the weight's
// q + 4) of group s (0..3), elements 4k .. 4k + 3 of the group: the low 2 bits at 2s of qs and the
// high bit at s of hm_half, moved to bit 2 of each byte.
T9_HD uint32_t q3k_unit_codes(uint32_t qs, uint32_t hm_half, int s) {
  const uint32_t low = (qs >> (2 * s)) & 0x03030303u;
  const uint32_t high = s <= 2 ? (hm_half << (2 - s)) & 0x04040404u : (hm_half >> 1) & 0x04040404u;
  return low | high;
}

// Q5_K, unit p (elements 64p .. 64p + 63, sub-blocks 2p and 2p + 1): qs = the word of
// qs[32p + 4k ..], qh_unit = the word of qh[4k ..] shifted right by 2p; the codes (0..31) of
// elements 64p + 32n + 4k .. + 3: the nibble n of qs and bit n of qh_unit as the fifth bit.
T9_HD uint32_t q5k_unit_codes(uint32_t qs, uint32_t qh_unit, int n) {
  return ((qs >> (4 * n)) & 0x0F0F0F0Fu) | ((qh_unit << (4 - n)) & 0x10101010u);
}

}  // namespace t9
