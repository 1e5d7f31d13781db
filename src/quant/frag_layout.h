// Quantized matrices in mma-fragment order: the weight layouts of the CUDA bf16 tensor-core matmul
// (src/backend/cuda/cuda_bf16_matmul.cu; prototype and measurements: dev/kernels/cuda_bf16_q4k.cu,
// docs/CUDA.md stages 42-46). The same bytes as GGUF's Q4_K / Q6_K / Q8_0 / BF16 rows, reordered
// at load so that one lane's 16-byte load (two for Q8_0, four for BF16) is its A fragments for 64
// inputs of an m16n8k16 mma. How a lane reads
// them back is quant/frag_decode.h (shared by the kernels and the CPU tests).
//
// A [n_out, n_in] matrix (n_out a multiple of 16, n_in of 256) is cut into 16-row tiles T and
// 256-input super-blocks b; block (T, b) takes 16 x sizeof(block) bytes at
// (T * n_in / 256 + b) * (that size). Lane L = 4 g + t of a warp owns rows g and g + 8 of the tile
// and, of each 64-input group j (inputs 64 j .. 64 j + 63 of the super-block), inputs
// 8t .. 8t + 7 and 32 + 8t .. 32 + 8t + 7 (frag_input, frag_decode.h).
//
// Q4_K (kQ4KFragBlockBytes = 2304):
//   [0, 256)     the 16 rows' headers (f16 d, f16 dmin, 12 scale bytes), row r at 16 r;
//   [256, 2304)  the codes: group j and lane L at 256 + 16 (32 j + L), four 4-byte words:
//                w0 = row g, code bytes 8t .. 8t + 3;  w1 = row g, bytes 8t + 4 .. 8t + 7;
//                w2, w3 = the same of row g + 8;
//                each word's bytes stored as (c0, c2, c1, c3), so that (w >> 4n) & 0x000F000F
//                holds the nibbles of two adjacent inputs (n = 0: low nibbles of c0, c1; 1: high
//                nibbles of c0, c1; 2, 3: the same of c2, c3). Code byte c of group j holds
//                inputs 64 j + c (low nibble) and 64 j + c + 32 (high), as in GGUF.
// Q6_K (kQ6KFragBlockBytes = 3360): a 6-bit code q (weight d * scale * (q - 32)) as its low
// nibble and its high 2 bits:
//   [0, 256)     the 16 rows' 16 int8 scales (one per 16 inputs), row r at 16 r;
//   [256, 288)   the 16 rows' f16 d, row r at 256 + 2 r;
//   [288, 2336)  the low nibbles, arranged exactly as Q4_K's codes (above), "code byte" c of group
//                j being nibble(64 j + c) | nibble(64 j + c + 32) << 4;
//   [2336, 3360) the high bits: groups 2h, 2h + 1 and lane L at 2336 + 16 (32 h + L), four words
//                H(g, 2h), H(g + 8, 2h), H(g, 2h + 1), H(g + 8, 2h + 1); word H(r, j) holds the
//                high bits of the input of k16 step s, A register pair p (0: slots 2t, 2t + 1;
//                1: 2t + 8, 2t + 9) and element e at bits 2m + 16 e (m = 2 s + p), so that a shift
//                by 2m - 4 and the mask 0x00300030 puts them above the pair's nibbles.
// Q8_0 (kQ80FragBlockBytes = 4352, the 16 rows' eight 32-input blocks): a code q (weight d * q)
// stored biased, as the byte q + 128:
//   [0, 256)     the 16 rows' eight f16 d's, row r's block k (inputs 32 k .. 32 k + 31) at
//                16 r + 2 k;
//   [256, 4352)  the codes: group j, its 32-input block h (k16 steps 2 h, 2 h + 1) and lane L
//                at 256 + 16 (64 j + 32 h + L) (a warp's 16-byte loads of one block are
//                consecutive: no bank conflict), four 4-byte words W[4 h + 2 s + r]
//                (s = step % 2; r: row g + 8 r), each four consecutive codes of that row:
//                inputs 64 j + 32 h + 8 t + 4 s .. + 3, in order. A register `slot` of a step is
//                bytes 2 (slot / 2), 2 (slot / 2) + 1 of the word of row slot % 2.
// Q5_K (kQ5KFragBlockBytes = 2816): a 5-bit code q (weight d * sc * q - dmin * m) as its low
// nibble and its high bit:
//   [0, 256)     the 16 rows' headers, as Q4_K's;
//   [256, 2304)  the low nibbles, arranged exactly as Q4_K's codes (GGUF's qs bytes);
//   [2304, 2816) the high bits: lane L at 2304 + 16 L, four words H5(g, 0), H5(g + 8, 0),
//                H5(g, 1), H5(g + 8, 1); word H5(r, h) holds groups 2 h and 2 h + 1: the high
//                bit of the input of k16 step s, A register pair p and element e of group
//                2 h + o at bit m + 8 o + 16 e (m = 2 s + p), so that the word shifted right by
//                8 o, then by m - 4, and masked with 0x00100010 puts them above the pair's
//                nibbles.
// Q3_K (kQ3KFragBlockBytes = 1760, the 16 rows' 110-byte blocks): a 3-bit code q (weight
// d * sc * (q - 4), sc the 16-input sub-block's signed 6-bit scale) as its low 2 bits and its
// high bit (GGUF's hmask bit: set means no -4):
//   [0, 192)     the 16 rows' 12 scale bytes (GGUF's packing of the sixteen scales), row r at 12 r;
//   [192, 224)   the 16 rows' f16 d, row r at 192 + 2 r;
//   [224, 1248)  the low bits: groups 2h, 2h + 1 and lane L at 224 + 16 (32 h + L), four words
//                L3(g, 2h), L3(g + 8, 2h), L3(g, 2h + 1), L3(g + 8, 2h + 1); word L3(r, j) holds
//                the low bits of group j's input of k16 step s, A register pair p and element e
//                at bits 2m + 16 e (m = 2 s + p): Q6_K's high words' arrangement, so a shift by
//                2m and the mask 0x00030003 give the pair's two;
//   [1248, 1760) the high bits: lane L at 1248 + 16 L, four words H3(g, 0), H3(g + 8, 0),
//                H3(g, 1), H3(g + 8, 1); word H3(r, h) holds groups 2h and 2h + 1: the high bit
//                of (s, p, e) of group 2h + o at bit m + 8 o + 16 e: Q5_K's high words'
//                arrangement.
//   A lane's bytes of a super-block are thus three 16-byte loads (two of low bits, one of high
//   bits) against Q4_K's four: the codes of a group are 12 of its bytes, not 16.
// BF16 (kBf16FragBlockBytes = 8192, the 16 rows' 256 weights, no scales): the A fragments
// themselves. Group j, k16 step s and lane L at 16 (32 (4 j + s) + L): four 4-byte words, word
// `slot` = A register `slot` of step s: row g + 8 (slot % 2), the two weights of the inputs
// 64 j + frag_input(s, slot, e, t) (e = 0 in the low half).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace t9 {

constexpr int kFragTileRows = 16;
constexpr int kQ4KFragBlockBytes = kFragTileRows * static_cast<int>(sizeof(BlockQ4_K));  // 2304
constexpr int kQ4KFragCodesAt = 256;
constexpr int kQ6KFragBlockBytes = kFragTileRows * static_cast<int>(sizeof(BlockQ6_K));  // 3360
constexpr int kQ6KFragDAt = 256;
constexpr int kQ6KFragNibblesAt = 288;
constexpr int kQ6KFragHighsAt = kQ6KFragNibblesAt + 4 * 32 * 16;                             // 2336
constexpr int kQ80FragBlockBytes = kFragTileRows * 8 * static_cast<int>(sizeof(BlockQ8_0));  // 4352
constexpr int kQ80FragCodesAt = 256;
constexpr int kQ5KFragBlockBytes = kFragTileRows * static_cast<int>(sizeof(BlockQ5_K));  // 2816
constexpr int kQ5KFragCodesAt = 256;
constexpr int kQ5KFragHighsAt = kQ5KFragCodesAt + 4 * 32 * 16;                           // 2304
constexpr int kBf16FragBlockBytes = kFragTileRows * 256 * 2;                             // 8192
constexpr int kQ3KFragBlockBytes = kFragTileRows * static_cast<int>(sizeof(BlockQ3_K));  // 1760
constexpr int kQ3KFragDAt = 192;
constexpr int kQ3KFragLowsAt = 224;
constexpr int kQ3KFragHighsAt = kQ3KFragLowsAt + 2 * 32 * 16;  // 1248
static_assert(kQ4KFragBlockBytes == 2304 && kQ6KFragBlockBytes == 3360 &&
              kQ6KFragHighsAt + 2 * 32 * 16 == kQ6KFragBlockBytes &&
              kQ80FragCodesAt + 4 * 32 * 32 == kQ80FragBlockBytes &&
              kQ5KFragHighsAt + 32 * 16 == kQ5KFragBlockBytes && kQ3KFragBlockBytes == 1760 &&
              kQ3KFragDAt == kFragTileRows * 12 &&
              kQ3KFragLowsAt == kQ3KFragDAt + 2 * kFragTileRows &&
              kQ3KFragHighsAt + 32 * 16 == kQ3KFragBlockBytes);

// The shapes the layouts cover: n_out a multiple of 16 and n_in of 256 (one row of super-blocks).
inline bool frag_shape_ok(int64_t n_in, int64_t n_out) {
  return n_in > 0 && n_out > 0 && n_in % 256 == 0 && n_out % kFragTileRows == 0;
}

// GGUF Q4_K rows (n_out rows of n_in / 256 blocks) to fragment order; dst has the same size
// (n_out * n_in / 256 * 144 bytes) and must not overlap src. Precondition: frag_shape_ok.
void q4k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);
// Row `row`'s super-block `b` back in GGUF layout (the inverse of q4k_to_frag, one block).
BlockQ4_K q4k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b);

// The same for Q5_K (176 bytes a block).
void q5k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);
BlockQ5_K q5k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b);

// The same for Q6_K (210 bytes a block).
void q6k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);
BlockQ6_K q6k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b);

// The same for Q8_0 (34 bytes a 32-input block); q80_frag_block gives row `row`'s block `b`
// (inputs 32 b .. 32 b + 31).
void q80_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);
BlockQ8_0 q80_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b);

// The same for Q3_K (110 bytes a block; the CUDA bf16 matmul reads it when bf16_q3_k is on).
void q3k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);
BlockQ3_K q3k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b);

// The same for BF16 (2 bytes a weight); bf16_frag_weight gives row `row`'s weight of input `k`
// (its bf16 bits).
void bf16_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);
uint16_t bf16_frag_weight(const void* frag, int64_t n_in, int64_t row, int64_t k);

// Element i's (0..255) 3-bit code of a Q3_K block, 0..7 (its weight: d * sc * (code - 4), sc =
// unpack_q3_k_scale(scales, i / 16)).
int q3k_code(const BlockQ3_K& b, int i);
// Element i's (0..255) 5-bit code of a Q5_K block, 0..31.
int q5k_code(const BlockQ5_K& b, int i);
// Element i's (0..255) 6-bit code of a Q6_K block, 0..63 (its weight: d * scales[i / 16] *
// (code - 32)).
int q6k_code(const BlockQ6_K& b, int i);

// The weight the tensor-core path multiplies for element i (0..255) of block b, in bf16:
//   Q4_K: bf16(q * bf16(d * sc) - bf16(dmin * m)), the sum exact before its one rounding;
//   Q6_K: bf16((q - 32) * bf16(d * scale)), one rounding of the exact product;
// each rounding to nearest even (d * sc, dmin * m and d * scale are exact in fp32). GGUF's
// dequantization (the products in fp32) differs from it by the bf16 roundings. Q8_0 has no such
// rule: its codes are exact in bf16 and the kernels apply d to each 32-input block's fp32 sum,
// so its weights are GGUF's.
float q4k_bf16_weight(const BlockQ4_K& b, int i);
float q5k_bf16_weight(const BlockQ5_K& b, int i);  // Q4_K's rule, q of 5 bits
float q6k_bf16_weight(const BlockQ6_K& b, int i);
float q3k_bf16_weight(const BlockQ3_K& b, int i);  // Q6_K's rule: bf16((q - 4) * bf16(d * sc))

}  // namespace t9
