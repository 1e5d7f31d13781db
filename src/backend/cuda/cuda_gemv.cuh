// Internal to the CUDA backend: the stage-2 matmul kernels (cuda_gemv.cu), used by
// CudaBackend::matmul for every row count when they take the weight type and layout.
//
//   - Quantized weights (Q4_0, Q4_1, Q5_0, Q8_0, Q3_K, Q4_K, Q5_K, Q6_K): activations are first
//     rounded to int8 per 32-element block exactly as the CPU backend does (d = amax / 127, q =
//     rint(x * (1 / d))), then each lane takes a fixed set of weight "units" (one 32-element
//     block, or 64 elements of a 256-element super-block) from a copy of the weight bytes that
//     the warp staged in shared memory with coalesced 16-byte cp.async loads, and dots them with
//     dp4a.
//   - Float weights (F16, BF16, F32) with 16-byte-aligned rows: F32 activations, 16-byte weight
//     loads straight from global memory, fmaf in a fixed order.
//   - The sliced types (is_sliced_type: Q3_K, Q4_K, Q5_K, Q6_K, Q8_0) sum in the "sliced"
//     canonical order of cuda_units.cuh (32 contiguous slices of units per output, partials added
//     in slice order): the sliced GEMVs (cuda_gemv_slice.cu) below 16 activation rows, the int8
//     tensor-core kernel (cuda_mma.cu) from 16 rows; both give the same bits.
//     TEMPO9_CUDA_LEGACY_GEMV=1 puts these types back on the per-lane-strided kernels of
//     cuda_gemv.cu for every row count (measurement).
// In all of them the sum order of an output depends only on n_in (token rows never mix), so a
// row's result does not depend on the other rows of the call.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace t9::cuda {

// The types with sliced kernels (above), the experts' device route and grouped GEMM
// (cuda_moe_gemv.cuh) and moe_down: Q3_K and Q5_K since session 45 (the Q3_K_M files). One list
// for the test and the dispatch, so a kernel family cannot miss a type (stage 49: the experts'
// route lacked Q5_K).
template <GgmlType... Ts>
struct GgmlTypeList {
  static constexpr bool has(GgmlType t) { return ((t == Ts) || ...); }
  // f(std::integral_constant<GgmlType, t>{}) when t is listed; false when it is not.
  template <typename F>
  static bool visit(GgmlType t, F&& f) {
    return ((t == Ts ? (f(std::integral_constant<GgmlType, Ts>{}), true) : false) || ...);
  }
};
using SlicedTypes =
    GgmlTypeList<GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0>;
constexpr bool is_sliced_type(GgmlType t) {
  return SlicedTypes::has(t);
}

// x rounded to int8 per 32 elements (the int8-activation kernels' input): x.n_rows() rows of
// n_in codes, then n_rows * n_in / 32 ActBlocks. matmul_shared_x makes it once for several
// weights.
struct ActBlock;  // cuda_unit_types.cuh

struct RoundedX {
  const int8_t* xq = nullptr;
  const ActBlock* xb = nullptr;
};
RoundedX round_x(const Tensor& x, Scratch& scratch, Stream& stream);
// The scratch bytes round_x takes for n_rows rows of n_in (a multiple of 256).
size_t round_x_bytes(int64_t n_in, int64_t n_rows);
// The same rounding for n_rows rows into caller memory: output row r is x row rows[r] (rows
// null: row r).
void launch_round_rows(const Tensor& x, const int32_t* rows, int64_t n_rows, int8_t* xq,
                       ActBlock* xb, Stream& stream);

// How a matmul call may run (the backend's settings and what it knows of w).
struct MatmulOpts {
  // w is read-only to every kernel (uploaded weights), so the kernels may start reading it before
  // their dependent-launch wait (prefetch_l2, cuda_common.cuh); false for a w that a kernel may
  // have just written.
  bool w_early = false;
  // Q8_0 / Q4_K / Q6_K calls of mma_rows_min .. mma_rows_max activation rows take the few-row
  // tensor-core GEMV (cuda_gemv_mma.cuh; min 0: never), ahead of the tile kernel.
  // CudaBackendConfig::mma_rows_min, mma_rows_max.
  int64_t mma_rows_min = 0;
  int64_t mma_rows_max = 15;
  // F16/BF16/F32 split-order calls (few weight rows) of at least this many activation rows run
  // on the prompt-step tile kernel (cuda_gemv_float.cu; 0: never). CudaBackendConfig's.
  int64_t float_tile_min_rows = 0;
  // Whether a call of n_tok rows is in that range (checked before anything else: a cheap test on
  // every matmul's host path).
  bool few_rows(int64_t n_tok) const {
    return mma_rows_min > 0 && n_tok >= mma_rows_min && n_tok <= mma_rows_max;
  }
};

// True when y = x @ w^T was enqueued by a stage-2 kernel; false when the type or the alignment
// of w / x needs the stage-1 kernel (cuda_matmul.cu). Shapes are checked by the caller. `pre`:
// x already rounded (round_x of this x), or null.
bool launch_fast_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                        Scratch& scratch, Stream& stream, const RoundedX* pre,
                        const MatmulOpts& opts);

// Several matmuls of one x in one launch (matmul_shared_x; SliceParts in cuda_units.cuh): every
// y_i = x @ w_i^T (+ bias_i) gets the bits of its own launch_fast_matmul. False (nothing
// enqueued) unless there are 2..4 parts, all of one sliced type (is_sliced_type), one n_in and
// one alignment of their rows. Shapes are checked by the caller; x is `pre`.
constexpr int kMaxParts = 4;
struct FusedPart {
  const Tensor* w;
  const Tensor* bias;  // null or !valid(): none
  const Tensor* y;
};
bool launch_fused_matmul(std::span<const FusedPart> parts, const Tensor& x, Scratch& scratch,
                         Stream& stream, const RoundedX& pre, const MatmulOpts& opts);

// Calls of 2..8 activation rows (F16/BF16/F32; the sliced types up to 2 rows,
// cuda_gemv_slice.cu) whose weights take at most this many bytes (they stay in L2) run one
// activation row per launch-grid row, each re-reading the weights from L2, instead of tiles of 4
// or 8 rows that read them once: the float tiles' serial chains cost more than the re-reads
// there (8 agents' decode steps on Qwen3.5-35B: the F32 router at 8 rows took 3x its one-row
// time). The order per output is the same either way. TEMPO9_CUDA_TOK1_BYTES overrides (read
// once; 0: never).
int64_t tok1_max_weight_bytes();

// The F16/BF16/F32 part (cuda_gemv_float.cu): false when rows or x are not 16-byte aligned.
bool launch_float_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                         Stream& stream, const MatmulOpts& opts = {});
// Several F16/BF16/F32 matmuls of one x in one launch, each output the bits of its own
// launch_float_matmul: false (nothing enqueued) unless there are 2..4 parts of one type, n_in,
// alignment and launch configuration (the row tile and split choice their shapes give).
bool launch_fused_float_matmul(std::span<const FusedPart> parts, const Tensor& x, Stream& stream,
                               const MatmulOpts& opts);

struct ActBlock;  // cuda_units.cuh

// One row's add_rms_norm and F16 / BF16 / F32 matmuls of the normed row in one launch
// (Backend::add_rms_norm_matmul; norm_gemv_f_kernel): sum = a + b, out = rms_norm(sum) * weight
// with rms_norm_codes_kernel's bits (and its int8 codes of out when xq is set), and each part's
// y = out @ w^T (+ bias) with launch_float_matmul's bits. norm_float_matmul_fits says whether the
// launch takes the call: the row 256 k <= 4096 elements (the caller checks the norm's own
// conditions, codes_norm_fits), 1..kMaxParts parts of one float type and row size that
// launch_float_matmul would run as split one-row calls (gemv_f_kernel<T, 1, true>), rows and
// outputs 16-byte aligned.
struct NormRow {
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  const Tensor* sum = nullptr;
  const Tensor* out = nullptr;
  const float* weight = nullptr;  // null: none
  float eps = 0.0f, weight_bias = 0.0f;
  int8_t* xq = nullptr;  // out's codes (DerivedCache::produce), or null
  ActBlock* xb = nullptr;
  bool weight_early = false;  // weight is a model weight (read before the dependent-launch wait)
};
bool norm_float_matmul_fits(const Tensor& out, std::span<const FusedPart> parts);
void launch_norm_float_matmul(const NormRow& n, std::span<const FusedPart> parts, Stream& stream,
                              const MatmulOpts& opts);

}  // namespace t9::cuda
