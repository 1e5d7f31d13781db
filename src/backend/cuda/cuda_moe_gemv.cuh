// Internal to the CUDA backend: matmul_id's device routes (cuda_moe_gemv.cu), used by
// CudaBackend::matmul_id (cuda_moe.cu) for Q4_K / Q6_K / Q8_0 expert tensors.
#pragma once

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_gemv.cuh"

namespace t9::cuda {

// matmul_id's rows (backend.h) in one launch, no host round trip: each (token, rank) pair is a
// one-row sliced GEMV with its expert's matrix, the expert read from ids on the device (bits of a
// plain one-row matmul with that expert). False for weight types without the sliced kernels (the
// caller groups on the host then). An out-of-range id sets kErrMoeId in *err. `pre`: x already
// rounded (round_x of these rows: matmul_shared_x), or null.
// With several parts (matmul_shared_x: gate and up over the same ids; id_parts_fuse), one
// launch computes them all (SliceParts), each with the bits of its own call.
bool launch_matmul_id_gemv(std::span<const FusedPart> parts, const Tensor& x, const Tensor& ids,
                           Scratch& scratch, unsigned* err, Stream& stream,
                           const RoundedX* pre = nullptr);
// True when two expert tensors can share one launch: one type, shape, layout and alignment.
bool id_parts_fuse(const Tensor& a, const Tensor& b);

// matmul_id's rows for larger batches (prefill), no host round trip: the pairs sorted by expert
// on the device (launch_expert_sort; one sort serves every matmul_id over the same ids), x's rows
// rounded to int8 once in their own order (or `pre`, x already rounded), then one tensor-core
// launch over every expert's row tiles, reading the rows through the sort (bits of a plain matmul
// per row).

// The (token, rank) pairs of ids [n, k] sorted by expert, stably: device arrays in scratch.
struct ExpertSort {
  int64_t pairs = 0, n_expert = 0, k = 0;  // k: ranks per token (x_rows = pair / k)
  int tile_rows = 0;                // launch tile of the grouped kernel (mma_grouped_tile_rows)
  int32_t* expert_first = nullptr;  // [n_expert + 1]: expert e's sorted pairs start here
  int32_t* tile_first = nullptr;    // [n_expert + 1]: and its launch tiles here
  int32_t* x_rows = nullptr;        // [pairs]: the token of each sorted pair (x shared by ranks)
  int32_t* y_rows = nullptr;        // [pairs]: the pair itself (its out row; its x row per rank)
};
// True when w's type has the grouped kernel (else the caller groups on the host).
bool matmul_id_groups(const Tensor& w);
// One block; an id outside [0, n_expert) sets kErrMoeId in *err and its pair is left out.
ExpertSort launch_expert_sort(const Tensor& ids, int64_t n_expert, Scratch& scratch, unsigned* err,
                              Stream& stream);
void launch_matmul_id_grouped(std::span<const FusedPart> parts, const Tensor& x, const Tensor& ids,
                              const ExpertSort& sort, Scratch& scratch, Stream& stream,
                              const RoundedX* pre = nullptr);

}  // namespace t9::cuda
