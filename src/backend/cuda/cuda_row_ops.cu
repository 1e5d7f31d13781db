// The CUDA backend's row-wise ops: get_rows and take_tokens, the norms (with their matmul's codes
// where the next op reads them), elementwise ops and GLUs, the sampling helpers (top_k, softmax)
// and copy. The backend's memory and stream are cuda_backend.cu's.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <initializer_list>
#include <span>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_norm.cuh"
#include "backend/cuda/cuda_profile.cuh"

namespace t9 {
namespace cuda {
namespace {

enum class EwOp { kAdd, kMul, kSwiGLU, kGeGLU, kScale, kSilu, kGelu, kSoftcap };

// ---- kernels ----

// y = op(x, b) for one element (b unused by the unary ops): both elementwise kernels' arithmetic,
// so a call gives the same bits whichever of them runs it.
__device__ __forceinline__ float ew_apply(EwOp op, float x, float bv, float param) {
  switch (op) {
    case EwOp::kAdd:
      return x + bv;
    case EwOp::kMul:
      return x * bv;
    case EwOp::kSwiGLU:
      return glu_value(GluKind::kSwiGLU, x, bv);
    case EwOp::kGeGLU:
      return glu_value(GluKind::kGeGLU, x, bv);
    case EwOp::kScale:
      return x * param;
    case EwOp::kSilu:
      return silu(x);
    case EwOp::kGelu:
      return gelu_tanh(x);
    default:  // kSoftcap
      return param * tanhf(x / param);
  }
}
__device__ __forceinline__ bool ew_binary(EwOp op) {
  return op == EwOp::kAdd || op == EwOp::kMul || op == EwOp::kSwiGLU || op == EwOp::kGeGLU;
}

// out[r, i] = op(a[r, i], b[b_bcast ? 0 : r, i]) (b unused by the unary ops). One thread per
// element; a and out may alias (each element is read before its own write).
// xq non-null (DerivedCache: out contiguous, n a multiple of 32, so every warp holds one whole
// 32-element block): out's codes too.
__global__ void elementwise_kernel(EwOp op, TensorDesc a, TensorDesc b, bool b_bcast, float param,
                                   TensorDesc out, int64_t n, int8_t* __restrict__ xq,
                                   ActBlock* __restrict__ xb) {
  pdl_enter();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int64_t r, i;
  div_mod(e, a.ne0, r, i);
  const float x = reinterpret_cast<const float*>(a.row(r))[i];
  const float bv = ew_binary(op) ? reinterpret_cast<const float*>(b.row(b_bcast ? 0 : r))[i] : 0.0f;
  const float y = ew_apply(op, x, bv, param);
  reinterpret_cast<float*>(out.row(r))[i] = y;
  if (xq != nullptr) quantize_value(y, threadIdx.x % 32, xq + (e & ~int64_t{31}), xb + e / 32);
}

// The same ops where a, b (not broadcast) and out are contiguous, 16-byte aligned and n is a
// multiple of 4: thread i takes elements 4i .. 4i + 3 with one 16-byte load per input and one
// store, and no index arithmetic (elementwise_kernel's 64-bit div_mod per element made the
// 2048-token MoE GLU, 8.4M elements, take 97 us: ~1 TB/s, run 150). With xq (n a multiple of
// 32) each octet of lanes holds one 32-element block and rounds it (quantize_octet).
__global__ void elementwise4_kernel(EwOp op, const float4* a, const float4* b, float param,
                                    float4* out, int64_t n4, int8_t* __restrict__ xq,
                                    ActBlock* __restrict__ xb) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n4) return;  // with xq: whole octets (n4 is a multiple of 8)
  const float4 x = a[i];
  const float4 bv = ew_binary(op) ? b[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float y[4] = {ew_apply(op, x.x, bv.x, param), ew_apply(op, x.y, bv.y, param),
                      ew_apply(op, x.z, bv.z, param), ew_apply(op, x.w, bv.w, param)};
  out[i] = make_float4(y[0], y[1], y[2], y[3]);
  if (xq != nullptr) quantize_octet(y, threadIdx.x % 32, xq + 32 * (i / 8), xb + i / 8);
}

constexpr int kThreads = kNormThreads;  // the row kernels' block (cuda_norm.cuh)

// One block per row. kAdd: the sum is written to `sum` (which may alias a: every read of the row
// precedes the block_sum barriers, every write of it follows).
template <bool kAdd>
__global__ void rms_norm_kernel(TensorDesc x, TensorDesc b, TensorDesc sum,
                                const float* __restrict__ w, float eps, float weight_bias,
                                TensorDesc out) {
  pdl_enter();
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x, n = x.ne0, step = blockDim.x;
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  const float* br = kAdd ? reinterpret_cast<const float*>(b.row(r)) : nullptr;
  float* sr = kAdd ? reinterpret_cast<float*>(sum.row(r)) : nullptr;
  float* yr = reinterpret_cast<float*>(out.row(r));
  float xv[kNormCache], wv[kNormCache];
  double ss = norm_head<kAdd>(xr, br, w, weight_bias, n, xv, wv);
  if constexpr (kAdd) {
#pragma unroll
    for (int c = 0; c < kNormCache; ++c) {
      const int64_t i = threadIdx.x + c * step;
      if (i < n) sr[i] = xv[c];
    }
  }
  for (int64_t i = threadIdx.x + kNormCache * step; i < n; i += step) {
    float v = xr[i];
    if constexpr (kAdd) {
      v = v + br[i];
      sr[i] = v;
    }
    ss += static_cast<double>(v) * v;
  }
  ss = block_sum(ss, scratch);  // its barriers also order every read of x before the writes
  const float inv = norm_inv(ss, n, eps);
  const float* vr = kAdd ? sr : xr;  // the tail re-reads what this thread read or stored
  for (int64_t i = threadIdx.x + kNormCache * step; i < n; i += step)
    yr[i] = vr[i] * inv * norm_weight_at(w, weight_bias, i);
#pragma unroll
  for (int c = 0; c < kNormCache; ++c) {
    const int64_t i = threadIdx.x + c * step;
    if (i < n) yr[i] = xv[c] * inv * wv[c];
  }
}

// The same rows, and the int8 codes of the output (cuda_derived.cuh: the next matmul's rounded
// x, quantize_value's bits), for a few rows of n = 256 k <= kNormCache * 256 elements (decode):
// grid (k, rows). Every block of a row computes the whole row's sum of squares as
// rms_norm_kernel's block does (the same loads and order: the same bits), then writes only
// its own 256 elements (c = blockIdx.x), their codes (one 32-element block per warp) and, when
// kAdd, their sum. That makes the norm and the rounding one launch whose blocks each do one
// rounding step (rms_norm_kernel's one block would do 16 one after another: ~6-9% slower decode,
// sessions 10 and 19), at the price of k reads of the row from L2. `sum` and `out` must not
// overlap a or b (another block may still be reading them). `w_early` (reads_early): w is a model
// weight (never written after its upload), so its element is loaded before the dependent-launch
// wait, while the predecessor finishes (in a decode step the norm weights are not in L2: ~4 GB of
// weights stream through it per step).
template <bool kAdd>
__global__ void __launch_bounds__(kThreads)
    rms_norm_codes_kernel(TensorDesc x, TensorDesc b, TensorDesc sum, const float* __restrict__ w,
                          bool w_early, float eps, float weight_bias, TensorDesc out,
                          int8_t* __restrict__ xq, ActBlock* __restrict__ xb) {
  const int g = static_cast<int>(blockIdx.x);
  const int64_t r = blockIdx.y, n = x.ne0;
  const int64_t i = threadIdx.x + static_cast<int64_t>(g) * kThreads;
  float wg = w_early ? norm_weight_at(w, weight_bias, i) : 0.0f;
  pdl_enter();
  if (!w_early) wg = norm_weight_at(w, weight_bias, i);
  __shared__ double scratch[32];
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  const float* br = kAdd ? reinterpret_cast<const float*>(b.row(r)) : nullptr;
  float xv[kNormCache], unused[kNormCache];  // this block's weight is wg
  const double ss = block_sum(norm_head<kAdd>(xr, br, nullptr, 0.0f, n, xv, unused), scratch);
  const float inv = norm_inv(ss, n, eps);
  float v = 0.0f;
#pragma unroll
  for (int c = 0; c < kNormCache; ++c)  // constant indices: xv stays in registers
    if (c == g) v = xv[c];
  if constexpr (kAdd) reinterpret_cast<float*>(sum.row(r))[i] = v;
  const float y = v * inv * wg;
  reinterpret_cast<float*>(out.row(r))[i] = y;
  const int64_t e = r * n + i;  // the codes follow the output's memory order (contiguous rows)
  quantize_value(y, threadIdx.x % 32, xq + (e & ~int64_t{31}), xb + e / 32);
}

// Rows of at most kWarpRowMax elements (the per-head norms: Gated DeltaNet's gated norm over 128,
// q/k norms over 128 or 256): one warp per row, 8 rows per block, the sum of squares in double
// (lanes strided, then the warp's tree). One block per row left most of its 256 threads idle and
// paid a block-wide reduction per row: 546 us for a 2048-token chunk's 65536 rows of 128 (session
// 10, run 3). Which kernel runs depends only on the row length, so a row's bits do not depend on
// the batch. (kWarpRowMax: cuda_common.cuh.)

__global__ void rms_norm_warp_kernel(TensorDesc x, const float* __restrict__ w, float eps,
                                     float weight_bias, TensorDesc out) {
  pdl_enter();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= x.n_rows()) return;  // uniform per warp
  const int lane = threadIdx.x % 32;
  const int64_t n = x.ne0;
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  float* yr = reinterpret_cast<float*>(out.row(r));
  constexpr int kPer = kWarpRowMax / 32;
  float xv[kPer];
  const float inv = warp_row_inv_rms(xr, n, lane, eps, xv);
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const int64_t i = lane + 32 * c;
    if (i < n) yr[i] = rms_scaled(xv[c], inv, w, i, weight_bias);
  }
}

__global__ void softmax_kernel(TensorDesc x, TensorDesc out) {
  pdl_enter();
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  float* yr = reinterpret_cast<float*>(out.row(r));
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x) mx = fmaxf(mx, xr[i]);
  mx = block_max(mx, fscratch);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x) sum += expf(xr[i] - mx);
  sum = block_sum(sum, dscratch);
  const float inv = static_cast<float>(1.0 / sum);
  __syncthreads();  // every read of x above happens before any write when out aliases x
  for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x) yr[i] = expf(xr[i] - mx) * inv;
}

// Candidate (v, i) ranks before (bv, bi): larger value, then lower index.
__device__ __forceinline__ bool ranks_before(float v, int64_t i, float bv, int64_t bi) {
  return v > bv || (v == bv && i < bi);
}

// Block-wide best (v, i) under ranks_before; every thread gets it.
__device__ void block_best(float* v, int64_t* i, float* sv, int64_t* si) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, *v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, *i, o);
    if (ranks_before(ov, oi, *v, *i)) *v = ov, *i = oi;
  }
  __syncthreads();
  if (lane == 0) sv[warp] = *v, si[warp] = *i;
  __syncthreads();
  *v = -INFINITY;
  *i = INT64_MAX;
  for (int w = 0; w < n_warps; ++w)
    if (ranks_before(sv[w], si[w], *v, *i)) *v = sv[w], *i = si[w];
}

// One block per row; k passes, each taking the best element ranked after the previous pick.
// O(k * n) reads per row: fine for sampling's small k (stage 1).
__global__ void top_k_kernel(TensorDesc x, int k, TensorDesc ids, TensorDesc values) {
  pdl_enter();
  __shared__ float sv[32];
  __shared__ int64_t si[32];
  const int64_t r = blockIdx.x;
  const float* xr = reinterpret_cast<const float*>(x.row(r));
  auto* io = reinterpret_cast<int32_t*>(ids.row(r));
  auto* vo = reinterpret_cast<float*>(values.row(r));
  float pv = INFINITY;
  int64_t pi = -1;
  for (int it = 0; it < k; ++it) {
    float bv = -INFINITY;
    int64_t bi = INT64_MAX;
    for (int64_t i = threadIdx.x; i < x.ne0; i += blockDim.x) {
      const float v = xr[i];
      if (ranks_before(pv, pi, v, i) && ranks_before(v, i, bv, bi)) bv = v, bi = i;
    }
    block_best(&bv, &bi, sv, si);
    if (bi == INT64_MAX) bi = 0;  // only when fewer than k orderable values remain
    if (threadIdx.x == 0) {
      io[it] = static_cast<int32_t>(bi);
      vo[it] = xr[bi];
    }
    pv = bv;
    pi = bi;
  }
}

// One thread per (id, 32-element chunk). Out-of-range ids flag kErrGetRowsId and leave the row.
template <GgmlType T>
__global__ void get_rows_kernel(TensorDesc table, const int32_t* __restrict__ ids, int64_t n_ids,
                                TensorDesc out, unsigned* err) {
  pdl_enter();
  const int64_t n_chunks = (table.ne0 + 31) / 32;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_ids * n_chunks) return;
  int64_t i, c;
  div_mod(e, n_chunks, i, c);
  const int32_t id = ids[i];
  if (id < 0 || id >= table.ne1) {
    atomicOr(err, kErrGetRowsId);
    return;
  }
  float v[32];
  dequant_chunk<T>(reinterpret_cast<const uint8_t*>(table.base + id * table.nb1), c, table.ne0, v);
  float* yr = reinterpret_cast<float*>(out.row(i)) + 32 * c;
  const int64_t lim = min64(32, table.ne0 - 32 * c);
#pragma unroll
  for (int j = 0; j < 32; ++j)
    if (j < lim) yr[j] = v[j];
}

// ids[i] < 0 becomes prev[-1 - ids[i]] (Backend::take_tokens); a row past prev flags
// kErrGetRowsId and leaves the id (get_rows then flags it too).
__global__ void take_tokens_kernel(const int32_t* __restrict__ prev, int64_t n_prev,
                                   int32_t* __restrict__ ids, int64_t n, unsigned* err) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n || ids[i] >= 0) return;
  const int64_t r = -1 - static_cast<int64_t>(ids[i]);
  if (r >= n_prev) {
    atomicOr(err, kErrGetRowsId);
    return;
  }
  ids[i] = prev[r];
}

__device__ __forceinline__ float load_any(GgmlType t, const char* row, int64_t i) {
  if (t == GgmlType::F16) return f16_load(row + 2 * i);
  if (t == GgmlType::BF16) return bf16_load(row + 2 * i);
  return reinterpret_cast<const float*>(row)[i];
}

__global__ void copy_kernel(TensorDesc x, GgmlType xt, TensorDesc out, GgmlType ot, int64_t n) {
  pdl_enter();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int64_t r, i;
  div_mod(e, x.ne0, r, i);
  const float v = load_any(xt, x.row(r), i);
  char* dst = out.row(r);
  if (ot == GgmlType::F16)
    reinterpret_cast<__half*>(dst)[i] = __float2half_rn(v);
  else if (ot == GgmlType::BF16)
    reinterpret_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(v);
  else
    reinterpret_cast<float*>(dst)[i] = v;
}

// ---- launchers ----

// rms_norm_codes_kernel takes rows of 256 k <= kNormCache * kThreads elements, up to this many
// (decode steps: each row is read k times from L2; prefill chunks keep one block per row and the
// matmul's own rounding).
constexpr int64_t kCodesNormRows = 64;

// True when a norm of x into `dst` (out, or add_rms_norm's sum) can run as rms_norm_codes_kernel:
// the row shape above, and dst overlapping none of `reads` (its blocks write while others read);
// TEMPO9_CUDA_NORM_CODES=0 keeps the one-block kernel (same bits).
bool codes_norm_fits(const Tensor& x, const Tensor& dst,
                     std::initializer_list<const Tensor*> reads) {
  static const bool off = env_off("TEMPO9_CUDA_NORM_CODES");  // A/B runs; read once
  if (off || x.ne[0] % kThreads != 0 || x.ne[0] > kNormCache * kThreads ||
      x.n_rows() > kCodesNormRows)
    return false;
  const ByteSpan d = byte_span(dst);
  for (const Tensor* t : reads)
    if (d.overlaps(byte_span(*t))) return false;
  return true;
}
dim3 codes_norm_grid(const Tensor& x) {
  return dim3(static_cast<unsigned>(x.ne[0] / kThreads), static_cast<unsigned>(x.n_rows()));
}

void launch_elementwise(EwOp op, const Tensor& a, const Tensor* b, float param, const Tensor& out,
                        Stream& stream, RoundedOut ro = {}) {
  const int64_t n = a.n_elements();
  if (n == 0) return;
  const bool bcast = b != nullptr && b->n_rows() == 1 && a.n_rows() > 1;
  // The vector kernel from kEw4MinElements on (prompt steps: the 2048-token MoE GLU 97.6 -> 26.1
  // us, run 152; 8 agents 50.4k -> 51.3k effective tok/s, run 153). Decode-size calls keep the
  // per-element kernel: they are latency-bound, and with the vector kernel on every call the 35B
  // single decode measured 354-355 tok/s (run 153) against run 151's 360-362 without it (not an
  // A/B in one run). TEMPO9_CUDA_EW4=0 (read once, A/B runs): never (the same bits either way).
  constexpr int64_t kEw4MinElements = int64_t{1} << 16;
  static const bool ew4_off = env_off("TEMPO9_CUDA_EW4");
  const auto vec_ok = [](const Tensor& t) {
    return t.is_contiguous() && reinterpret_cast<uintptr_t>(base_ptr(t)) % 16 == 0;
  };
  if (!ew4_off && n >= kEw4MinElements && n % 4 == 0 && !bcast && vec_ok(a) && vec_ok(out) &&
      (b == nullptr || vec_ok(*b))) {
    const int64_t n4 = n / 4;
    const auto* bp = reinterpret_cast<const float4*>(base_ptr(b != nullptr ? *b : a));
    stream.launch(elementwise4_kernel, grid_1d(n4, kThreads), kThreads, 0, op,
                  reinterpret_cast<const float4*>(base_ptr(a)), bp, param,
                  reinterpret_cast<float4*>(base_ptr(out)), n4, ro.xq, ro.xb);
    return;
  }
  stream.launch(elementwise_kernel, grid_1d(n, kThreads), kThreads, 0, op, desc(a),
                b != nullptr ? desc(*b) : desc(a), bcast, param, desc(out), n, ro.xq, ro.xb);
}

void check_binary(const Tensor& a, const Tensor& b, const Tensor& out, const char* what) {
  check_f32_rows(a, what);
  check_f32_rows(b, what);
  check_f32_rows(out, what);
  check_same_shape(a, out, what);
  T9_CHECK(b.ne[0] == a.ne[0] && (b.n_rows() == 1 || b.ne == a.ne),
           "{}: b must be a's shape or one row", what);
}

void check_unary(const Tensor& x, const Tensor& out, const char* what) {
  check_f32_rows(x, what);
  check_f32_rows(out, what);
  check_same_shape(x, out, what);
}

// add_rms_norm's argument checks, shared by add_rms_norm_matmul.
void check_add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& out) {
  check_unary(a, out, "add_rms_norm");
  check_unary(a, sum, "add_rms_norm sum");
  check_binary(a, b, sum, "add_rms_norm");
  T9_CHECK(b.ne == a.ne, "add_rms_norm: b must have a's shape");
}
// True when add_rms_norm's norm can run as rms_norm_codes_kernel<true> (norm_gemv_f_kernel
// takes the same condition): sum and out overlap nothing its blocks read.
bool add_norm_codes_fit(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& out) {
  return codes_norm_fits(a, out, {&a, &b, &sum}) && codes_norm_fits(a, sum, {&a, &b});
}

unsigned row_grid(const Tensor& t) {
  T9_CHECK(t.n_rows() <= 0x7fffffff, "{} rows exceed the launch grid", t.n_rows());
  return static_cast<unsigned>(t.n_rows());
}

}  // namespace
}  // namespace cuda

using cuda::EwOp;

// ---- row ops ----

void CudaBackend::get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) {
  T9_CUDA_PROF("get_rows");
  T9_CHECK(ids.type == GgmlType::I32 && ids.nb[0] == 4 && ids.is_contiguous(),
           "get_rows: ids must be contiguous I32");
  cuda::check_f32_rows(out, "get_rows out");
  T9_CHECK(out.ne[0] == table.ne[0] && out.n_rows() == ids.n_elements(), "get_rows: shapes");
  T9_CHECK(table.ne[2] == 1 && table.ne[3] == 1, "get_rows: table must be 2-D");
  T9_CHECK(table.buf->layout == WeightLayout::kGguf,
           "get_rows: the table is stored for matmuls only (upload_matmul_weights)");
  derived_->wrote(out);
  const int64_t n_ids = ids.n_elements(), n_chunks = (table.ne[0] + 31) / 32;
  if (n_ids == 0) return;
  const auto* id = reinterpret_cast<const int32_t*>(cuda::base_ptr(ids));
  cuda::dispatch_weight_type(table.type, [&](auto tag) {
    constexpr GgmlType T = decltype(tag)::value;
    stream_->launch(cuda::get_rows_kernel<T>, cuda::grid_1d(n_ids * n_chunks, 128), 128, 0,
                    cuda::desc(table), id, n_ids, cuda::desc(out), err_word_);
  });
}

void CudaBackend::take_tokens(const Tensor& prev, const Tensor& ids) {
  T9_CUDA_PROF("take_tokens");
  T9_CHECK(prev.type == GgmlType::I32 && prev.is_contiguous() && ids.type == GgmlType::I32 &&
               ids.is_contiguous(),
           "take_tokens: prev and ids must be contiguous I32");
  const int64_t n = ids.n_elements();
  if (n == 0) return;
  derived_->wrote(ids);
  stream_->launch(cuda::take_tokens_kernel, cuda::grid_1d(n, 128), 128, 0,
                  reinterpret_cast<const int32_t*>(cuda::base_ptr(prev)), prev.n_elements(),
                  reinterpret_cast<int32_t*>(cuda::base_ptr(ids)), n, err_word_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, float weight_bias,
                           const Tensor& out) {
  T9_CUDA_PROF("rms_norm");
  cuda::check_unary(x, out, "rms_norm");
  const float* w = cuda::norm_weight(weight, x);
  if (x.n_rows() == 0) return;
  derived_->wrote(out);
  if (x.ne[0] <= cuda::kWarpRowMax) {
    constexpr int kRowsPerBlock = cuda::kThreads / 32;
    stream_->launch(cuda::rms_norm_warp_kernel, cuda::grid_1d(x.n_rows(), kRowsPerBlock),
                    cuda::kThreads, 0, cuda::desc(x), w, eps, weight_bias, cuda::desc(out));
    return;
  }
  if (cuda::codes_norm_fits(x, out, {&x})) {
    if (const cuda::RoundedOut ro = derived_->produce(out, codes_scratch_, *stream_); ro.xq) {
      stream_->launch(cuda::rms_norm_codes_kernel<false>, cuda::codes_norm_grid(x), cuda::kThreads,
                      0, cuda::desc(x), cuda::desc(x), cuda::desc(x), w, reads_early(weight), eps,
                      weight_bias, cuda::desc(out), ro.xq, ro.xb);
      return;
    }
  }
  stream_->launch(cuda::rms_norm_kernel<false>, cuda::row_grid(x), cuda::kThreads, 0, cuda::desc(x),
                  cuda::desc(x), cuda::desc(x), w, eps, weight_bias, cuda::desc(out));
}

void CudaBackend::add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& weight, float eps,
                               float weight_bias, const Tensor& sum, const Tensor& out) {
  T9_CUDA_PROF("add_rms_norm");
  cuda::check_add_rms_norm(a, b, sum, out);
  const float* w = cuda::norm_weight(weight, a);
  if (a.n_rows() == 0) return;
  derived_->wrote(sum);
  if (cuda::add_norm_codes_fit(a, b, sum, out)) {
    if (const cuda::RoundedOut ro = derived_->produce(out, codes_scratch_, *stream_); ro.xq) {
      stream_->launch(cuda::rms_norm_codes_kernel<true>, cuda::codes_norm_grid(a), cuda::kThreads,
                      0, cuda::desc(a), cuda::desc(b), cuda::desc(sum), w, reads_early(weight), eps,
                      weight_bias, cuda::desc(out), ro.xq, ro.xb);
      return;
    }
  }
  derived_->wrote(out);
  stream_->launch(cuda::rms_norm_kernel<true>, cuda::row_grid(a), cuda::kThreads, 0, cuda::desc(a),
                  cuda::desc(b), cuda::desc(sum), w, eps, weight_bias, cuda::desc(out));
}

void CudaBackend::add_rms_norm_matmul(const AddRmsNorm& n, std::span<const MatmulOut> outs) {
  // One launch for a decode row's norm and the float matmuls of its output (the MoE router and
  // shared-expert gate): CudaBackendConfig::norm_gemv.
  if (!norm_gemv_) return Backend::add_rms_norm_matmul(n, outs);
  const Tensor& a = n.a;
  cuda::check_add_rms_norm(a, n.b, n.sum, n.out);
  std::vector<cuda::FusedPart> parts;
  bool fits = fuse_parts_ && a.n_rows() == 1 && !outs.empty();
  bool w_early = true;
  for (const MatmulOut& o : outs) {
    if (!fits) break;
    fits = !o.ids.valid() && o.w.valid();
    // Each output is written while other blocks read a, b, sum and out.
    const cuda::ByteSpan y = cuda::byte_span(o.y);
    for (const Tensor* t : {&n.a, &n.b, &n.sum, &n.out})
      fits = fits && !y.overlaps(cuda::byte_span(*t));
    parts.push_back({&o.w, &o.bias, &o.y});
    w_early = w_early && reads_early(o.w);
  }
  fits = fits && cuda::add_norm_codes_fit(a, n.b, n.sum, n.out) &&
         cuda::norm_float_matmul_fits(n.out, parts);
  if (!fits) return Backend::add_rms_norm_matmul(n, outs);
  T9_CUDA_PROF("add_rms_norm_matmul");
  for (const MatmulOut& o : outs) check_matmul(o.w, n.out, o.bias, o.y);
  derived_->wrote(n.sum);
  const cuda::RoundedOut ro = derived_->produce(n.out, codes_scratch_, *stream_);
  for (const MatmulOut& o : outs) derived_->wrote(o.y);
  cuda::NormRow nr;
  nr.a = &a, nr.b = &n.b, nr.sum = &n.sum, nr.out = &n.out;
  nr.weight = cuda::norm_weight(n.weight, a);
  nr.eps = n.eps, nr.weight_bias = n.weight_bias;
  nr.xq = ro.xq, nr.xb = ro.xb;
  nr.weight_early = reads_early(n.weight);
  cuda::launch_norm_float_matmul(nr, parts, *stream_, {.w_early = w_early});
  ++fused_norm_matmuls_;
}

void CudaBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  T9_CUDA_PROF("add");
  cuda::check_binary(a, b, out, "add");
  derived_->wrote(out);
  cuda::launch_elementwise(EwOp::kAdd, a, &b, 0.0f, out, *stream_);
}

void CudaBackend::mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  T9_CUDA_PROF("mul");
  cuda::check_binary(a, b, out, "mul");
  derived_->wrote(out);
  cuda::launch_elementwise(EwOp::kMul, a, &b, 0.0f, out, *stream_);
}

void CudaBackend::scale(const Tensor& x, float s, const Tensor& out) {
  T9_CUDA_PROF("scale");
  cuda::check_unary(x, out, "scale");
  derived_->wrote(out);
  cuda::launch_elementwise(EwOp::kScale, x, nullptr, s, out, *stream_);
}

void CudaBackend::unary(const Tensor& x, UnaryKind kind, const Tensor& out) {
  T9_CUDA_PROF("unary");
  cuda::check_unary(x, out, "unary");
  derived_->wrote(out);
  cuda::launch_elementwise(kind == UnaryKind::kSilu ? EwOp::kSilu : EwOp::kGelu, x, nullptr, 0.0f,
                           out, *stream_);
}

void CudaBackend::softcap(const Tensor& x, float c, const Tensor& out) {
  T9_CUDA_PROF("softcap");
  T9_CHECK(c > 0.0f, "softcap {} must be positive", c);
  cuda::check_unary(x, out, "softcap");
  derived_->wrote(out);
  cuda::launch_elementwise(EwOp::kSoftcap, x, nullptr, c, out, *stream_);
}

void CudaBackend::glu(const Tensor& gate, const Tensor& up, GluKind kind, const Tensor& out) {
  T9_CUDA_PROF("glu");
  T9_CHECK(up.ne == gate.ne, "glu: gate and up shapes differ");
  cuda::check_binary(gate, up, out, "glu");
  cuda::launch_elementwise(kind == GluKind::kSwiGLU ? EwOp::kSwiGLU : EwOp::kGeGLU, gate, &up, 0.0f,
                           out, *stream_, derived_->produce(out, codes_scratch_, *stream_));
}

// ---- sampling helpers ----

void CudaBackend::top_k(const Tensor& logits, int k, const Tensor& ids, const Tensor& values) {
  T9_CUDA_PROF("top_k");
  cuda::check_f32_rows(logits, "top_k logits");
  cuda::check_f32_rows(values, "top_k values");
  T9_CHECK(k > 0 && k <= logits.ne[0], "top_k: k {} of {}", k, logits.ne[0]);
  T9_CHECK(ids.type == GgmlType::I32 && ids.ne[0] == k && ids.n_rows() == logits.n_rows() &&
               values.ne[0] == k && values.n_rows() == logits.n_rows(),
           "top_k: out shapes");
  derived_->wrote(ids);
  derived_->wrote(values);
  if (logits.n_rows() == 0) return;
  stream_->launch(cuda::top_k_kernel, cuda::row_grid(logits), 1024, 0, cuda::desc(logits), k,
                  cuda::desc(ids), cuda::desc(values));
}

void CudaBackend::softmax(const Tensor& x, const Tensor& out) {
  T9_CUDA_PROF("softmax");
  cuda::check_unary(x, out, "softmax");
  derived_->wrote(out);
  if (x.n_rows() == 0) return;
  stream_->launch(cuda::softmax_kernel, cuda::row_grid(x), 1024, 0, cuda::desc(x), cuda::desc(out));
}

void CudaBackend::copy(const Tensor& x, const Tensor& out) {
  T9_CUDA_PROF("copy");
  T9_CHECK(x.n_elements() == out.n_elements() && x.ne[0] == out.ne[0], "copy: shapes differ");
  auto ok = [](GgmlType t) {
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
  };
  T9_CHECK(ok(x.type) && ok(out.type), "copy {} -> {}", type_name(x.type), type_name(out.type));
  derived_->wrote(out);
  const int64_t n = x.n_elements();
  if (n == 0) return;
  stream_->launch(cuda::copy_kernel, cuda::grid_1d(n, cuda::kThreads), cuda::kThreads, 0,
                  cuda::desc(x), x.type, cuda::desc(out), out.type, n);
}

}  // namespace t9
