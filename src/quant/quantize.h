// Scalar reference quantization (float32 -> GGUF blocks), following ggml's reference quantizers
// (quantize_row_*_ref, without importance matrix): the same algorithms, rounding and float
// operation order, so results match ggml's scalar build byte for byte where the compiler does not
// fuse multiply-adds. Used to make test fixtures, to quantize activations (Q8_0, Q8_K) in the CPU
// reference backend, and to write GGUF files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "quant/types.h"

namespace t9 {

// True for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
bool can_quantize(GgmlType t);

// Encodes n floats (a row, or rows back to back; blocks never straddle rows because every row
// length is a multiple of the block size) into row_bytes(t, n) bytes at dst.
// Preconditions (CHECKed): can_quantize(t), n a multiple of t's block size. Input must be finite
// (like ggml, NaN/inf in x give unspecified blocks; nothing crashes).
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// Validating form: fails when t is unsupported or n is not a multiple of the block size.
Result<std::vector<uint8_t>> quantize_floats(GgmlType t, const float* src, int64_t n);

// ggml's nearest_int: round half to even via the 1.5 * 2^23 trick. Exact for |x| <= 2^22; for
// larger magnitudes it returns the same wrapped value ggml does (callers clamp afterwards), which
// keeps even degenerate blocks byte-identical to ggml's.
int nearest_int(float x);

}  // namespace t9
