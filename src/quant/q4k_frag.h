// Q4_K matrices in mma-fragment order: the weight layout of the CUDA bf16 tensor-core matmul
// (src/backend/cuda/cuda_bf16_q4k.cu; prototype and measurements: dev/kernels/cuda_bf16_q4k.cu,
// docs/CUDA.md stage 42). The same bytes as GGUF's Q4_K rows, reordered at load so that one lane's
// 16-byte load is its A fragments for 64 inputs of an m16n8k16 mma.
//
// A [n_out, n_in] matrix (n_out a multiple of 16, n_in of 256) is cut into 16-row tiles T and
// 256-input super-blocks b; block (T, b) takes kQ4KFragBlockBytes = 16 x 144 bytes at
// (T * n_in / 256 + b) * kQ4KFragBlockBytes:
//   [0, 256)     the 16 rows' headers (f16 d, f16 dmin, 12 scale bytes), row r at 16 r;
//   [256, 2304)  the codes: group j (inputs 64 j .. 64 j + 63 of the super-block, 32 code bytes a
//                row) and lane L = 4 g + t at 256 + 16 (32 j + L), four 4-byte words:
//                w0 = row g, code bytes 8t .. 8t + 3;  w1 = row g, bytes 8t + 4 .. 8t + 7;
//                w2, w3 = the same of row g + 8;
//                each word's bytes stored as (c0, c2, c1, c3), so that (w >> 4n) & 0x000F000F
//                holds the nibbles of two adjacent inputs (n = 0: low nibbles of c0, c1; 1: high
//                nibbles of c0, c1; 2, 3: the same of c2, c3).
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace t9 {

constexpr int kQ4KFragTileRows = 16;
constexpr int kQ4KFragBlockBytes = kQ4KFragTileRows * static_cast<int>(sizeof(BlockQ4_K));  // 2304

// The shapes the layout covers: n_out a multiple of 16 and n_in of 256 (one row of super-blocks).
inline bool q4k_frag_shape_ok(int64_t n_in, int64_t n_out) {
  return n_in > 0 && n_out > 0 && n_in % 256 == 0 && n_out % kQ4KFragTileRows == 0;
}

// GGUF Q4_K rows (n_out rows of n_in / 256 blocks) to fragment order; dst has the same size
// (n_out * n_in / 256 * 144 bytes) and must not overlap src. Precondition: q4k_frag_shape_ok.
void q4k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst);

// Row `row`'s super-block `b` back in GGUF layout (the inverse of q4k_to_frag, one block).
BlockQ4_K q4k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b);

// The weight the tensor-core path multiplies for element i (0..255) of block b: the dequantized
// value in bf16, bf16(q * bf16(d * sc) - bf16(dmin * m)), each rounding to nearest even and the
// sum exact before its rounding (d * sc and dmin * m are exact in fp32). GGUF's dequantization
// ((d * sc) * q - (dmin * m) in fp32) differs from it by the bf16 roundings.
float q4k_bf16_weight(const BlockQ4_K& b, int i);

}  // namespace t9
