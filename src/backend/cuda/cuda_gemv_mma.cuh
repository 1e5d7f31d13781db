// Internal to the CUDA backend: the few-row tensor-core GEMV (cuda_gemv_mma.cu).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {

// Whether the few-row tensor-core GEMV takes a sliced call: Q8_0, Q4_K or Q6_K, a plain or fused
// plain matmul (no ids, no split form) of n_tok in [min_rows, max_rows] activation rows (min_rows
// 0: never), weight rows on 16-byte boundaries, its shared memory within bounds. Same bits as the
// sliced GEMV and the tile kernel.
bool mma_rows_fits(const SliceArgs& a, GgmlType t, int64_t min_rows, int64_t max_rows);
void launch_mma_rows(const SliceArgs& a, GgmlType t, Stream& stream);

}  // namespace t9::cuda
