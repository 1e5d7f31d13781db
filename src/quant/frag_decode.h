// How one lane reads its A fragments back from a fragment-ordered block (quant/frag_layout.h):
// the integer half of the CUDA bf16 matmul's dequantization (cuda_bf16_formats.cuh), compiled for
// the device there and for the host in tests/unit/quant/frag_layout_test.cpp, which checks every
// code a lane decodes against the GGUF block it came from.
//
// The mma's A fragment of m16n8k16 (bf16): lane L = 4 g + t holds registers a0..a3, each a pair
// of bf16; a0: row g, k slots 2t, 2t + 1; a1: row g + 8, the same slots; a2: row g, slots
// 2t + 8, 2t + 9; a3: row g + 8, those. The kernels feed B (the activations) for k16 step s of a
// 64-input group from one 16-byte load of inputs 8t .. 8t + 7 (steps 0, 1) or 32 + 8t .. (2, 3):
// b0 = the first 4 bytes of its half, b1 the next, so slot pairs and inputs correspond as
// frag_input says. The dot product only needs A and B to agree on that order.
#pragma once

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#include "core/host_device.h"

namespace t9 {

// The input of a 64-input group (0..63) that element e (0, 1) of A register `slot` (0..3) holds
// in k16 step `step` (0..3) for lane t = L % 4; the row is g + 8 (slot % 2).
T9_HD constexpr int frag_input(int step, int slot, int e, int t) {
  return 32 * (step / 2) + 8 * t + 4 * (step % 2) + 2 * (slot / 2) + e;
}

// (a & b) | c; on the device one LOP3 (the compiler splits two immediates into two instructions).
T9_HD uint32_t frag_and_or(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
#else
  return (a & b) | c;
#endif
}

// The lane's code word of A register `slot` of k16 step `step`, shifted so that bits 0..3 and
// 16..19 are the pair's nibbles: w = the lane's four code words of the group (w0..w3,
// frag_layout.h); steps 0, 1 take the low nibbles of words (w0, w2), (w1, w3), steps 2, 3 the
// high ones.
T9_HD uint32_t frag_nibbles(const uint32_t* w, int step, int slot) {
  return w[step % 2 + 2 * (slot % 2)] >> (4 * (step / 2) + 8 * (slot / 2));
}

// A register `slot` of k16 step `step` as two bf16 of value 128 + code (0x4300 | code: exact for
// codes below 128), element e in bits 16 e .. 16 e + 15. Q4_K: code = the nibble.
T9_HD uint32_t q4k_frag_biased(const uint32_t* w, int step, int slot) {
  return frag_and_or(frag_nibbles(w, step, slot), 0x000F000Fu, 0x43004300u);
}

// Q6_K: code = nibble | high << 4, the nibbles as Q4_K's and h = the lane's high words of the
// group (H(g, j), H(g + 8, j)).
T9_HD uint32_t q6k_frag_biased(const uint32_t* w, const uint32_t* h, int step, int slot) {
  const int m = 2 * step + slot / 2;  // the pair's high bits at 2m, 2m + 16
  const uint32_t hw = h[slot % 2];
  const uint32_t high = m >= 2 ? hw >> (2 * m - 4) : hw << (4 - 2 * m);
  return frag_and_or(frag_nibbles(w, step, slot), 0x000F000Fu,
                     frag_and_or(high, 0x00300030u, 0x43004300u));
}

// Q5_K: code = nibble | high << 4, the nibbles as Q4_K's and h = the lane's high words of the
// group (H5(g, grp / 2), H5(g + 8, grp / 2), frag_layout.h), each already shifted right by
// 8 (grp % 2) (q5k_group_highs).
T9_HD uint32_t q5k_frag_biased(const uint32_t* w, const uint32_t* h, int step, int slot) {
  const int m = 2 * step + slot / 2;  // the pair's high bits at m, m + 16
  const uint32_t hw = h[slot % 2];
  const uint32_t high = m >= 4 ? hw >> (m - 4) : hw << (4 - m);
  return frag_and_or(frag_nibbles(w, step, slot), 0x000F000Fu,
                     frag_and_or(high, 0x00100010u, 0x43004300u));
}
// The high words of group grp from the lane's two words of its group pair.
T9_HD void q5k_group_highs(uint32_t h0, uint32_t h8, int grp, uint32_t* h) {
  h[0] = h0 >> (8 * (grp % 2));
  h[1] = h8 >> (8 * (grp % 2));
}

// Q3_K: code = low | high << 2 (0..7): lo = the lane's low words of the group (L3(g, grp),
// L3(g + 8, grp): Q6_K's high words' arrangement, frag_layout.h), h = its high words of the group
// (H3(g, grp / 2), H3(g + 8, grp / 2), each already shifted right by 8 (grp % 2):
// q5k_group_highs, as Q5_K's). As 0x4300 | code, the kernel subtracts 132 for code - 4.
T9_HD uint32_t q3k_frag_biased(const uint32_t* lo, const uint32_t* h, int step, int slot) {
  const int m = 2 * step + slot / 2;  // the pair's low bits at 2m, 2m + 16; high bits at m, m + 16
  const uint32_t hw = h[slot % 2];
  const uint32_t high = m >= 2 ? hw >> (m - 2) : hw << (2 - m);
  return frag_and_or(lo[slot % 2] >> (2 * m), 0x00030003u,
                     frag_and_or(high, 0x00040004u, 0x43004300u));
}

// Q8_0: which of the lane's eight code words (frag_layout.h: W[4 h + 2 s + r]) holds A register
// `slot` of k16 step `step`; its elements are bytes 2 (slot / 2) and 2 (slot / 2) + 1.
T9_HD constexpr int q80_frag_word(int step, int slot) {
  return 4 * (step / 2) + 2 * (step % 2) + slot % 2;
}

// Byte k (0..3) of a Q8_0 code word, the biased code q + 128, as the fp32 bits 0x4B0000xx:
// 2^23 + q + 128 exactly (one PRMT on the device).
T9_HD uint32_t q80_frag_magic(uint32_t w, int k) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(w, 0x4B000000u, 0x7440u + static_cast<unsigned>(k));
#else
  return ((w >> (8 * k)) & 0xFFu) | 0x4B000000u;
#endif
}

// The code q (-128..127) of element e (0, 1) of A register `slot` in step `step`, exactly, from
// the lane's eight words w of a group: the magic float minus 2^23 + 128.
T9_HD float q80_frag_code(const uint32_t* w, int step, int slot, int e) {
  const uint32_t bits = q80_frag_magic(w[q80_frag_word(step, slot)], 2 * (slot / 2) + e);
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits) - 8388736.0f;
#else
  return std::bit_cast<float>(bits) - 8388736.0f;
#endif
}

// BF16: which of the lane's sixteen words of a group (four 16-byte chunks, one a k16 step:
// frag_layout.h) is A register `slot` of step `step`.
T9_HD constexpr int bf16_frag_word(int step, int slot) {
  return 4 * step + slot;
}

// Which scale of its super-block a lane's step uses: Q4_K the 32-input sub-block (of row g or
// g + 8) 2 grp + step / 2 (Q8_0's d likewise: its block); Q6_K the 16-input one
// 4 grp + 2 (step / 2) + t / 2.
T9_HD constexpr int q4k_frag_sub(int grp, int step) {
  return 2 * grp + step / 2;
}
T9_HD constexpr int q6k_frag_scale(int grp, int step, int t) {
  return 4 * grp + 2 * (step / 2) + t / 2;
}

}  // namespace t9
