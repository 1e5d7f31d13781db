// Internal to the tensor-core attention: the decode row's chunk kernel (cuda_flash_row.cu),
// launched by cuda_flash_attention.cu's launcher for split calls of at most 16 q-head slots.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_flash_attention.cuh"

namespace t9::cuda {

// True when the chunk kernel serves a call of n_rows query rows of `group` q heads a KV head
// (head_dim 128 / 256; the launcher adds: split, no soft-capping, no cohorts).
bool row_chunk_fits(int head_dim, int64_t n_rows, int group);

// One block of 16 warps per (row tile, KV head, 128-key chunk) of `grid` (the split launch's),
// each writing its chunk's partial to `part` as flash_attention_kernel's split form does (the
// same bits); the caller launches the combine unless a.counters is set (then the row's last
// block folds them).
void flash_row_chunk(const FlashArgs& a, int64_t n_rows, int n_chunks, float* part, dim3 grid,
                     Stream& stream);

}  // namespace t9::cuda
