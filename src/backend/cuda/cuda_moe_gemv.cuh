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
bool launch_matmul_id_gemv(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out,
                           Scratch& scratch, unsigned* err, Stream& stream,
                           const RoundedX* pre = nullptr);

// matmul_id's rows for larger batches (prefill), no host round trip: a one-block counting sort
// of the pairs by expert on the device, x's rows rounded to int8 once in their own order (or
// `pre`, x already rounded), then one tensor-core launch over every expert's row tiles, reading
// the rows through the sort's x_rows (bits of a plain matmul per row). False for weight types
// without the sliced kernels.
bool launch_matmul_id_grouped(const Tensor& w, const Tensor& x, const Tensor& ids,
                              const Tensor& out, Scratch& scratch, unsigned* err, Stream& stream,
                              const RoundedX* pre = nullptr);

}  // namespace t9::cuda
