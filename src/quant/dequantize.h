// Scalar reference dequantization: the oracle every backend (CPU SIMD, CUDA) is tested against.
//
// Results are bit-exact with ggml's scalar dequantize_row_* and with gguf-py's gguf.quants
// (tests/py/quant/test_quants.py checks this on fresh random blocks). Exactness depends on the
// order of float operations, e.g. Q4_K is (d * sc) * q - (dmin * m), each step rounded to float;
// the implementation must never fuse multiply-adds: it is portable ISO C++ (GCC does not contract
// there) and turns contraction off for clang. Backends that use FMA will differ in the last bit
// and must compare with a tolerance, or order their operations the same way without fusing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "quant/types.h"

namespace t9 {

// True for the types dequantize_row handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS.
bool can_dequantize(GgmlType t);

// Decodes n elements (a row, or several rows back to back) of type t.
// src: row_bytes(t, n) bytes in GGUF layout; dst: [n] floats.
// Preconditions (CHECKed, they are caller bugs): can_dequantize(t), n a multiple of t's block size.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// Validating form for data from files: fails (naming the type and sizes) when t is unsupported or
// n_bytes is not a whole number of blocks. Returns n_bytes / block_bytes * block_elems floats.
Result<std::vector<float>> dequantize_bytes(GgmlType t, const void* src, size_t n_bytes);

}  // namespace t9
