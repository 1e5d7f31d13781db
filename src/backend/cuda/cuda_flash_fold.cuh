// Internal to the tensor-core attention (cuda_flash_attention.cu, cuda_flash_combine.cu): the
// split form's partials, the left fold over 128-key chunks that the attention kernel's blocks and
// the combine kernel both run (the same operations in the same order: the same bits), and the
// combine kernel's launcher.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_flash_attention.cuh"

namespace t9::cuda {

// Keys per fold unit (absolute positions: a multiple of tiles). It trades a decode block's serial
// chain of tiles (2 or 4 tiles at 128 keys) against the prefill fold's read-modify-write of `out`
// (once per chunk) and the split partials' size.
// 256 (run 87): prefill attention 1.3-1.6x faster (2048 rows over 12k: 9.75 -> 6.04 ms; fold's
// read-modify-write of `out` and the split partials halve), 8 agents 35.8k -> 38.6k effective
// tok/s, but one decode row at 640 keys 23.4 -> 34.9 us and 35B single decode 273 -> 258 tok/s.
constexpr int kChunkKeys = 128;

// ---- the split form's partials ----

// Floats per (row, head, chunk) partial: head_dim accumulators, m, l, and two unused, so that
// every partial starts on a 16-byte boundary.
__host__ __device__ constexpr int part_stride(int head_dim) {
  return head_dim + 4;
}
// Where dim d of a partial's accumulator sits: the kernel writes each lane's two n-tiles (dims
// 16j + 2q, +1 and 16j + 8 + 2q, +1 for lane q = lane % 4) as one float4 at 16j + 4q (half the
// store instructions of one float2 per n-tile: the partial stores throttled the 160-row split
// calls, ncu run 97); the combine reads dim d from here.
__device__ __forceinline__ int part_pos(int d) {
  const int w = d % 16;
  return d - w + 4 * ((w % 8) / 2) + 2 * (w / 8) + w % 2;
}

// ---- the fold (shared by the block-local path and the combine kernel: same bits) ----

// Merges a chunk's (m, l) into the running (M, L); fa and fb scale the running and the chunk's
// accumulators. A chunk with no visible key (m = -inf) must be skipped by the caller.
__device__ __forceinline__ void fold_chunk(float& M, float& L, float m, float l, float& fa,
                                           float& fb) {
  const float mn = fmaxf(M, m);
  fa = M == -INFINITY ? 0.0f : expf(__fsub_rn(M, mn));
  fb = expf(__fsub_rn(m, mn));
  L = __fadd_rn(__fmul_rn(L, fa), __fmul_rn(l, fb));
  M = mn;
}
__device__ __forceinline__ float fold_acc(float A, float a, float fa, float fb) {
  return __fadd_rn(__fmul_rn(A, fa), __fmul_rn(a, fb));
}

// Output row `row` = q row * n_head + head of out ([rows, n_head, head_dim], the launcher checks
// three dimensions): one 32-bit division where TensorDesc::row(int64_t) would take 64-bit ones.
__device__ __forceinline__ float* out_row(const FlashArgs& a, int row) {
  const unsigned q_row = static_cast<unsigned>(row) / static_cast<unsigned>(a.n_head);
  const unsigned head = static_cast<unsigned>(row) - q_row * static_cast<unsigned>(a.n_head);
  return reinterpret_cast<float*>(a.out.row(head, q_row));
}

// The gate row of output row `row` (FlashArgs::gate), as out_row.
__device__ __forceinline__ const float* gate_row(const FlashArgs& a, int row) {
  const unsigned q_row = static_cast<unsigned>(row) / static_cast<unsigned>(a.n_head);
  const unsigned head = static_cast<unsigned>(row) - q_row * static_cast<unsigned>(a.n_head);
  return reinterpret_cast<const float*>(a.gate.row(head, q_row));
}

// mul_sigmoid_kernel's expression: the attention's float times the gate's sigmoid.
__device__ __forceinline__ float gated(float v, float g) {
  return v * sigmoid(g);
}

// out = the fold of each row's chunk partials in `part` (n_chunks a (row, head)) divided by its
// sum, gated and rounded as FlashArgs asks: one block per (row, head) (cuda_flash_combine.cu).
void flash_combine(const float* part, const FlashArgs& a, int64_t n_rows, int n_chunks,
                   Stream& stream);

}  // namespace t9::cuda
