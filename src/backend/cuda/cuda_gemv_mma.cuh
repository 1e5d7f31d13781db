// Internal to the CUDA backend: the few-row tensor-core GEMV (cuda_gemv_mma.cu).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {

// Whether the few-row tensor-core GEMV can take a sliced call (the row range is the caller's:
// MatmulOpts::few_rows): Q8_0, Q4_K or Q6_K, a plain or fused plain matmul (no ids, no split
// form), weight rows on 16-byte boundaries, its shared memory within bounds. Same bits as the
// sliced GEMV and the tile kernel.
bool mma_rows_fits(const SliceArgs& a, GgmlType t);
void launch_mma_rows(const SliceArgs& a, GgmlType t, Stream& stream);

}  // namespace t9::cuda
