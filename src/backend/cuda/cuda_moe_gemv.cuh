// Internal to the CUDA backend: matmul_id's device routes (cuda_moe_gemv.cu), used by
// CudaBackend::matmul_id (cuda_moe.cu) for the sliced types' expert tensors.
#pragma once

#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_route.cuh"

namespace t9::cuda {

// Calls f(std::integral_constant<GgmlType, T>) for the sliced types (is_sliced_type) with
// 2-byte-aligned weights unless TEMPO9_CUDA_LEGACY_GEMV is set; false when it does not.
template <typename F>
bool with_sliced_type(const Tensor& w, F&& f) {
  static const bool legacy = std::getenv("TEMPO9_CUDA_LEGACY_GEMV") != nullptr;
  if (legacy || reinterpret_cast<uintptr_t>(base_ptr(w)) % 2 != 0) return false;
  return SlicedTypes::visit(w.type, f);
}

// matmul_id's rows (backend.h) in one launch, no host round trip: each (token, rank) pair is a
// one-row sliced GEMV with its expert's matrix, the expert read from ids on the device (bits of a
// plain one-row matmul with that expert). False for weight types without the sliced kernels (the
// caller groups on the host then). An out-of-range id sets kErrMoeId in *err. `pre`: x already
// rounded (round_x of these rows: matmul_shared_x), or null.
// With several parts (matmul_shared_x: gate and up over the same ids; id_parts_fuse), one
// launch computes them all (SliceParts), each with the bits of its own call. `plain` (empty, or
// one per part: id_plain_part_fits): plain[i].y = x_p @ plain[i].w^T in the same launch
// (SliceParts' plain rows: the MoE shared expert's gate and up, or its down projection), with the
// bits of a plain matmul. x_p is x when x has one row per token; with x per rank, `pre` must hold
// the pairs' rows and then one row per token (launch_moe_glu_codes), and x_p is those rows.
// `route` (logits set; see RouteArgs): the launch computes ids itself, with moe_route's
// bits, and stores them and their weights. `plain_early`: the plain matrices are model weights
// (CudaBackend::reads_early), so their blocks copy their first rows before the dependent-launch
// wait (stages_early); the pairs' blocks always wait first (their expert comes from ids).
bool launch_matmul_id_gemv(std::span<const FusedPart> parts, const Tensor& x, const Tensor& ids,
                           Scratch& scratch, unsigned* err, Stream& stream,
                           const RoundedX* pre = nullptr, std::span<const FusedPart> plain = {},
                           const RouteArgs& route = {}, bool plain_early = false);
// True when two expert tensors can share one launch: one type, shape, layout and alignment.
bool id_parts_fuse(const Tensor& a, const Tensor& b);
// True when the 2-D weight w can ride as plain rows beside the expert tensor `experts` (one
// type, n_in, n_out, row bytes and alignment).
bool id_plain_part_fits(const Tensor& experts, const Tensor& w);

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
  int32_t* tile_expert = nullptr;   // [max_tiles]: each launch tile's expert, -1 past the last
  int64_t max_tiles = 0;            // grouped launch tiles: ceil(pairs / tile_rows) + n_expert
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

// Backend::moe_down (backend.h) in two launches for decode-sized calls (cuda_moe_down.cu): one
// GLU over the routed and the shared rows that writes only their int8 codes, then one kernel per
// (block of output rows, token) that multiplies each of the token's k experts (and the shared
// expert) by its codes in the canonical order and combines them as moe_combine(_shared) does:
// `out` gets the composed ops' bits; eg, sg, ed and so are left untouched. False (nothing
// enqueued) unless the call takes it: at most 2 tokens (TEMPO9_CUDA_MOE_DOWN_TOKENS; past about
// one wave of the kernel the composed route is faster, cuda_moe_down.cu), down matrices of one
// sliced type with at most 16 units per row (gemv_short's rows), contiguous F32 operands, a per-row
// or per-element gate, k + 1 <= kMoeDownTerms; TEMPO9_CUDA_FUSE_MOE_DOWN=0 (read once) turns it
// off. `shared_early`: the shared expert's weights are read-only (uploaded), so the kernel stages
// them before its dependent-launch wait. `split` (1-4): warps per row group, each taking that
// share of a token's terms (CudaBackendConfig::moe_down_split; the same bits for every split).
constexpr int kMoeDownTerms = 17;
bool launch_moe_down(const Backend::MoeDown& m, Scratch& scratch, unsigned* err, Stream& stream,
                     bool shared_early, int split);

// The first launch of moe_down's fused route on its own: the int8 codes of glu(eg, eu) (the
// routed pairs' rows, [n k, Fe]) followed by those of glu(sg, su) (one row per token, Fs = Fe),
// with the separate GLU's bits, in scratch; eg and sg are not written. For the by-pair route with
// the shared expert's down projection as plain rows (launch_matmul_id_gemv's `pre`). False
// (nothing enqueued) unless eg, eu, sg and su are contiguous F32 of those shapes, Fe % 32 == 0.
bool launch_moe_glu_codes(const Backend::MoeDown& m, Scratch& scratch, Stream& stream,
                          RoundedX& codes);

}  // namespace t9::cuda
