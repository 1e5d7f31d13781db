// Reference k-quant encoders (ggml's quantize_row_q{2,3,4,5,6,8}_K_ref algorithms). Each encodes nb
// super-blocks: x is [nb * 256] floats, dst receives nb blocks of the format. Prefer the
// type-dispatched quantize_row() in quant/quantize.h.
#pragma once

#include <cstdint>

namespace t9 {

void quantize_blocks_q2_k(const float* x, void* dst, int64_t nb);
void quantize_blocks_q3_k(const float* x, void* dst, int64_t nb);
void quantize_blocks_q4_k(const float* x, void* dst, int64_t nb);
void quantize_blocks_q5_k(const float* x, void* dst, int64_t nb);
void quantize_blocks_q6_k(const float* x, void* dst, int64_t nb);
void quantize_blocks_q8_k(const float* x, void* dst, int64_t nb);

}  // namespace t9
