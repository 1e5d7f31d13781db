// CUDA mixture-of-experts ops: routing (softmax + top-k), grouped expert matmul, the weighted
// combination, and the sigmoid gate of gated attention and the shared expert. Same contracts and
// per-row arithmetic order as backend/cpu/cpu_moe.cpp.
//
// matmul_id has three routes with the same bits (each row equals a plain matmul of that row with
// its expert's matrix; matmul is batch-invariant, rule 7):
//   - up to moe_device_pairs() (token, rank) pairs of an expert tensor of a sliced type
//     (decode and small batches): one launch of the one-row sliced GEMV over (row block, pair),
//     each block reading its expert id on the device (cuda_moe_gemv.cuh). No host round trip.
//   - more pairs of those types (prefill): a one-block counting sort by expert on the device,
//     then one tensor-core launch over every expert's row tiles (cuda_moe_gemv.cuh). No round trip.
//   - other types: the rows are grouped by expert on the host: ids are
//     downloaded (one stream synchronisation per call), the rows gathered into expert order by one
//     kernel, the ordinary CudaBackend::matmul (tensor cores from 16 rows) run once per used
//     expert on its contiguous slice, and the results scattered back by one kernel.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_moe_gemv.cuh"
#include "backend/cuda/cuda_profile.cuh"
#include "backend/cuda/cuda_route.cuh"

namespace t9 {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// One warp per row of logits [n, n_expert]; p (n_expert floats) in dynamic shared memory.
// softmax as the CPU: max, exp(x - max) stored as float, their sum in double, one float
// reciprocal; then k passes of argmax over the untaken p (taken ones set to -inf, below any p);
// weights divided by their float sum in rank order when `normalize`.
__global__ void moe_route_kernel(TensorDesc logits, int k, bool normalize, TensorDesc ids,
                                 TensorDesc weights) {
  pdl_enter();
  extern __shared__ float p[];
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x, n = static_cast<int>(logits.ne0);
  const float* x = reinterpret_cast<const float*>(logits.row(r));
  float mx = -INFINITY;
  for (int e = lane; e < n; e += 32) mx = fmaxf(mx, x[e]);
  mx = warp_max(mx);
  double sum = 0.0;
  for (int e = lane; e < n; e += 32) {
    const float pe = expf(x[e] - mx);
    p[e] = pe;
    sum += pe;
  }
  sum = warp_sum(sum);
  const float inv = static_cast<float>(1.0 / sum);
  for (int e = lane; e < n; e += 32) p[e] *= inv;
  __syncwarp();
  auto* id = reinterpret_cast<int32_t*>(ids.row(r));
  auto* w = reinterpret_cast<float*>(weights.row(r));
  float picked = 0.0f;
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int e = lane; e < n; e += 32)
      if (route_ranks_before(p[e], e, bv, bi)) bv = p[e], bi = e;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (route_ranks_before(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    // A row whose p are all NaN leaves bi unset; take expert 0 so ids stay in range.
    if (bi == 0x7fffffff) bi = 0;
    __syncwarp();  // every lane has read p before lane 0 marks the pick
    if (lane == 0) {
      id[j] = bi;
      w[j] = p[bi];
      picked += p[bi];
      p[bi] = -INFINITY;
    }
    __syncwarp();
  }
  if (lane == 0 && normalize)
    for (int j = 0; j < k; ++j) w[j] /= picked;
}

// moe_route_kernel's results for rows of at most 32 kRegs experts and k <= 32 (every model we
// load: 64-512 experts, top 8-10): route_row_regs (cuda_route.cuh), one warp per row.
constexpr int kRouteRegsMax = 16;

template <int kRegs>
__global__ void moe_route_regs_kernel(TensorDesc logits, int k, bool normalize, TensorDesc ids,
                                      TensorDesc weights) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  route_row_regs<kRegs>(reinterpret_cast<const float*>(logits.row(r)), static_cast<int>(logits.ne0),
                        k, normalize, static_cast<int>(threadIdx.x),
                        reinterpret_cast<int32_t*>(ids.row(r)) + threadIdx.x,
                        reinterpret_cast<float*>(weights.row(r)) + threadIdx.x, k);
}

// Row copy through an index list: dst row pairs[2i + 1] (or i) <- src row pairs[2i] (or i).
// `gather`: x rows -> packed buffer rows i; otherwise packed rows i -> out rows. One block per
// row, threads over the row's elements.
__global__ void moe_rows_kernel(TensorDesc src, TensorDesc dst, const int32_t* __restrict__ pairs,
                                bool gather) {
  pdl_enter();
  const int64_t i = blockIdx.x;
  const int64_t s = gather ? pairs[2 * i] : i, d = gather ? i : pairs[2 * i + 1];
  const float* from = reinterpret_cast<const float*>(src.row(s));
  float* to = reinterpret_cast<float*>(dst.row(d));
  for (int64_t e = threadIdx.x; e < src.ne0; e += blockDim.x) to[e] = from[e];
}

// out[t, i] = sum_j w[t, j] * y[t, j, i], j = 0 .. k-1 in order (one fused multiply-add each).
// Element i of token t's routed sum: w_0 y_0, then + w_j y_j fused, in rank order. The loads go
// kRoutedBatch at a time ahead of the chain (a rolled loop waited for one L2 round trip per
// expert: moe_combine_shared at one token 6.6 -> 4.4 us, ncu runs 103 / 107); y is [n, k, d],
// so its row (j, t) needs no division.
constexpr int kRoutedBatch = 8;
__device__ __forceinline__ float routed_sum(const TensorDesc& y, const TensorDesc& weights,
                                            int64_t k, int64_t t, int64_t i) {
  const float* w = reinterpret_cast<const float*>(weights.row(t));
  float o = 0.0f;
  for (int64_t j0 = 0; j0 < k; j0 += kRoutedBatch) {
    float wv[kRoutedBatch], yv[kRoutedBatch];
#pragma unroll
    for (int b = 0; b < kRoutedBatch; ++b) {
      const int64_t j = j0 + b;
      wv[b] = j < k ? w[j] : 0.0f;
      yv[b] = j < k ? reinterpret_cast<const float*>(y.row(j, t))[i] : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kRoutedBatch; ++b) {
      if (j0 + b >= k) break;
      o = j0 + b == 0 ? wv[0] * yv[0] : fmaf(wv[b], yv[b], o);
    }
  }
  return o;
}

__global__ void moe_combine_kernel(TensorDesc y, TensorDesc weights, TensorDesc out, int64_t k,
                                   int64_t n_elems) {
  pdl_enter();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_elems) return;
  int64_t t, i;
  div_mod(e, out.ne0, t, i);
  reinterpret_cast<float*>(out.row(t))[i] = routed_sum(y, weights, k, t, i);
}

// out = a * sigmoid(g), g per element or one per row; out may alias a (each element is read
// before its own write). xq non-null (DerivedCache: out contiguous, n_elems a multiple of 32, so
// every warp holds one whole 32-element block): out's codes too (the gated attention's output,
// which the output projection reads).
__global__ void mul_sigmoid_kernel(TensorDesc a, TensorDesc g, bool per_row, TensorDesc out,
                                   int64_t n_elems, int8_t* __restrict__ xq,
                                   ActBlock* __restrict__ xb) {
  pdl_enter();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_elems) return;
  int64_t r, i;
  div_mod(e, a.ne0, r, i);
  const float gv = reinterpret_cast<const float*>(g.row(r))[per_row ? 0 : i];
  const float av = reinterpret_cast<const float*>(a.row(r))[i];
  const float y = av * sigmoid(gv);
  reinterpret_cast<float*>(out.row(r))[i] = y;
  if (xq != nullptr) quantize_value(y, threadIdx.x % 32, xq + (e - e % 32), xb + e / 32);
}

// moe_combine_kernel, then mul_sigmoid_kernel on `shared` (written back: the composed ops leave it
// so), then the add, in one pass: each of the three values rounded as the separate kernels round
// it (__fmul_rn / __fadd_rn keep the compiler from fusing the product into the sum).
__global__ void moe_combine_shared_kernel(TensorDesc y, TensorDesc weights, TensorDesc shared,
                                          TensorDesc gate, bool per_row, TensorDesc out, int64_t k,
                                          int64_t n_elems) {
  pdl_enter();
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n_elems) return;
  int64_t t, i;
  div_mod(e, out.ne0, t, i);
  const float o = routed_sum(y, weights, k, t, i);
  const float gv = reinterpret_cast<const float*>(gate.row(t))[per_row ? 0 : i];
  float* sr = reinterpret_cast<float*>(shared.row(t));
  const float m = __fmul_rn(sr[i], sigmoid(gv));
  sr[i] = m;
  reinterpret_cast<float*>(out.row(t))[i] = __fadd_rn(o, m);
}

// Pairs up to which matmul_id takes the device route (TEMPO9_CUDA_MOE_DEVICE_PAIRS, read once;
// default 256 = 32 tokens of top-8). Each pair re-reads its expert's matrix, so at prefill sizes
// the grouped tensor-core route reads far fewer bytes; below this the host round trip and one
// launch per used expert cost more than the re-reads (docs/CUDA.md).
int64_t moe_device_pairs() {
  static const int64_t n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MOE_DEVICE_PAIRS");
    return e != nullptr ? std::atoll(e) : int64_t{256};
  }();
  return n;
}

// TEMPO9_CUDA_MOE_HOST_GROUPING=1 (read once, measurement): past moe_device_pairs(), group on
// the host (one launch per used expert) instead of the device-sorted tensor-core launch.
bool moe_host_grouping() {
  static const bool on = std::getenv("TEMPO9_CUDA_MOE_HOST_GROUPING") != nullptr;
  return on;
}

unsigned rows_grid(int64_t n) {
  T9_CHECK(n > 0 && n <= 0x7fffffff, "{} rows exceed the launch grid", n);
  return static_cast<unsigned>(n);
}

// Expert e of w [n_expert, n_out, n_in] as a 2-D [n_out, n_in] weight tensor.
Tensor expert_view(const Tensor& w, int64_t e) {
  Tensor we = w;
  we.offset = w.offset + static_cast<size_t>(e) * w.nb[2];
  we.ne = {w.ne[0], w.ne[1], 1, 1};
  we.nb[3] = we.nb[2] = w.nb[1] * static_cast<size_t>(w.ne[1]);
  return we;
}

}  // namespace
}  // namespace cuda

namespace {

// moe_route's operand checks (a message naming the operand, no launch).
void check_route(const Tensor& logits, int k, const Tensor& ids, const Tensor& weights) {
  cuda::check_f32_rows(logits, "moe_route logits");
  cuda::check_f32_rows(weights, "moe_route weights");
  const int64_t n = logits.n_rows(), n_expert = logits.ne[0];
  T9_CHECK(k >= 1 && k <= n_expert, "moe_route: k = {} of {} experts", k, n_expert);
  // p lives in shared memory: 48 KiB without an opt-in.
  T9_CHECK(n_expert <= 12288, "moe_route: {} experts (at most 12288)", n_expert);
  T9_CHECK(ids.type == GgmlType::I32 && ids.nb[0] == 4 && ids.ne[0] == k && ids.n_rows() == n,
           "moe_route: ids must be I32 [{}, {}]", n, k);
  T9_CHECK(weights.ne[0] == k && weights.n_rows() == n, "moe_route: weights must be [{}, {}]", n,
           k);
}

}  // namespace

void CudaBackend::moe_route(const Tensor& logits, int k, bool normalize, const Tensor& ids,
                            const Tensor& weights) {
  T9_CUDA_PROF("moe_route");
  derived_->wrote(ids);
  derived_->wrote(weights);
  check_route(logits, k, ids, weights);
  const int64_t n = logits.n_rows(), n_expert = logits.ne[0];
  if (n == 0) return;
  if (n_expert <= 32 * cuda::kRouteRegsMax && k <= 32) {
    const auto kernel = n_expert <= 256 ? cuda::moe_route_regs_kernel<8>
                                        : cuda::moe_route_regs_kernel<cuda::kRouteRegsMax>;
    return stream_->launch(kernel, cuda::rows_grid(n), 32, 0, cuda::desc(logits), k, normalize,
                           cuda::desc(ids), cuda::desc(weights));
  }
  stream_->launch(cuda::moe_route_kernel, cuda::rows_grid(n), 32, static_cast<size_t>(n_expert) * 4,
                  cuda::desc(logits), k, normalize, cuda::desc(ids), cuda::desc(weights));
}

void CudaBackend::matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids,
                            const Tensor& out) {
  matmul_id_with(w, x, ids, out, nullptr);
}

void CudaBackend::moe_route_matmul(const MoeRoute& r, const Tensor& x,
                                   std::span<const MatmulOut> outs) {
  if (!fuse_route_) return Backend::moe_route_matmul(r, x, outs);  // moe_route's launch first
  T9_CHECK(pending_route_ == nullptr, "moe_route_matmul: called inside another");
  pending_route_ = &r;
  struct Clear {  // however matmul_shared_x leaves
    const MoeRoute*& p;
    ~Clear() { p = nullptr; }
  } clear{pending_route_};
  matmul_shared_x(x, outs);
  // No matmul_id over r.ids took the routing (none in outs, or none with rows): on its own.
  if (pending_route_ != nullptr) {
    pending_route_ = nullptr;
    moe_route(r.logits, r.k, r.normalize, r.ids, r.weights);
  }
}

void CudaBackend::check_matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids,
                                  const Tensor& out) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  cuda::check_f32_rows(x, "matmul_id x");
  cuda::check_f32_rows(out, "matmul_id out");
  T9_CHECK(w.ne[3] == 1, "matmul_id: weights must be [n_expert, n_out, n_in]");
  T9_CHECK(w.buf->layout == WeightLayout::kGguf,
           "matmul_id: weights stored for plain matmuls only (upload_matmul_weights)");
  T9_CHECK(ids.type == GgmlType::I32 && ids.ne[2] == 1 && ids.ne[3] == 1 && ids.is_contiguous(),
           "matmul_id: ids must be contiguous I32 [n, k]");
  const int64_t k = ids.ne[0], n = ids.ne[1], xk = x.ne[1];
  T9_CHECK(x.ne[0] == n_in && x.ne[2] == n && x.ne[3] == 1 && (xk == 1 || xk == k),
           "matmul_id: x must be [{}, 1 or {}, {}]", n, k, n_in);
  T9_CHECK(out.ne[0] == n_out && out.ne[1] == k && out.ne[2] == n && out.ne[3] == 1,
           "matmul_id: out must be [{}, {}, {}]", n, k, n_out);
  T9_CHECK(n * k <= 0x7fffffff, "matmul_id: {} rows", n * k);
}

// Tokens up to which matmul_shared_x puts plain matmuls beside a matmul_id as its plain rows
// (TEMPO9_CUDA_SHARED_ROWS_TOKENS, read once; 0: never). Each plain row re-reads its matrix
// (from L2 after the first), where a plain launch of 3-8 rows reads it once per tile.
bool CudaBackend::plain_rows_ride(const Tensor& ids) const {
  static const int64_t max_tokens = [] {
    const char* e = std::getenv("TEMPO9_CUDA_SHARED_ROWS_TOKENS");
    return e != nullptr ? std::atoll(e) : int64_t{8};
  }();
  return ids.n_elements() <= cuda::moe_device_pairs() && ids.n_rows() <= max_tokens;
}

// The device routes for one or several (fused) parts of one type and shape over the same ids:
// false (nothing enqueued) when the type needs the host's grouping. `plain`: see
// launch_matmul_id_gemv; only where plain_rows_ride(ids).
bool CudaBackend::matmul_id_device(std::span<const cuda::FusedPart> parts, const Tensor& x,
                                   const Tensor& ids, const cuda::RoundedX* pre,
                                   std::span<const cuda::FusedPart> plain) {
  const Tensor& w = *parts[0].w;
  const int64_t m = ids.n_elements(), n_expert = w.ne[2];
  T9_CHECK(plain.empty() || plain_rows_ride(ids), "matmul_id: plain rows at {} pairs", m);
  // moe_route_matmul's routing of these ids: inside the one-row launch below where it takes the
  // shape, else its own launch first (no other route reads the logits).
  cuda::RouteArgs route;
  if (pending_route_ != nullptr && pending_route_->ids.buf == ids.buf &&
      pending_route_->ids.offset == ids.offset) {
    const MoeRoute& r = *std::exchange(pending_route_, nullptr);
    const bool fuses = m <= cuda::moe_device_pairs() && x.ne[1] == 1 && r.ids.ne == ids.ne &&
                       r.logits.ne[0] <= cuda::kRouteFusedMaxExperts && r.k <= 32 &&
                       r.logits.nb[1] % 4 == 0 && r.weights.is_contiguous() &&
                       cuda::matmul_id_groups(w);  // launch_matmul_id_gemv takes w's type
    if (!fuses) {
      moe_route(r.logits, r.k, r.normalize, r.ids, r.weights);
    } else {
      derived_->wrote(r.ids);
      derived_->wrote(r.weights);
      check_route(r.logits, r.k, r.ids, r.weights);
      route.logits = reinterpret_cast<const float*>(cuda::base_ptr(r.logits));
      route.row_floats = static_cast<int64_t>(r.logits.nb[1] / 4);
      route.ids = reinterpret_cast<int32_t*>(cuda::base_ptr(r.ids));
      route.w = reinterpret_cast<float*>(cuda::base_ptr(r.weights));
      route.n_expert = static_cast<int32_t>(r.logits.ne[0]);
      route.normalize = r.normalize ? 1 : 0;
      ++fused_routes_;
    }
  }
  if (m <= cuda::moe_device_pairs()) {
    // The plain rows' (shared expert's) copies may start beside the router's launch
    // (CudaBackendConfig::plain_early).
    const bool plain_early = plain_early_ && std::ranges::all_of(plain, [&](const auto& p) {
                               return reads_early(*p.w);
                             });
    return cuda::launch_matmul_id_gemv(parts, x, ids, scratch_, err_word_, *stream_, pre, plain,
                                       route, plain_early);
  }
  if (cuda::moe_host_grouping() || !cuda::matmul_id_groups(w)) return false;
  const int tile_rows = cuda::mma_grouped_tile_rows(m, n_expert);
  const cuda::ExpertSort* sort = derived_->sort(ids, n_expert, tile_rows);
  if (sort == nullptr) {
    derived_->keep_sort(
        ids, cuda::launch_expert_sort(ids, n_expert, sort_scratch_, err_word_, *stream_));
    sort = derived_->sort(ids, n_expert, tile_rows);
  }
  cuda::launch_matmul_id_grouped(parts, x, ids, *sort, scratch_, *stream_, pre);
  return true;
}

void CudaBackend::matmul_id_with(const Tensor& w, const Tensor& x, const Tensor& ids,
                                 const Tensor& out, const cuda::RoundedX* pre) {
  T9_CUDA_PROF(fmt::format("matmul_id {} {}x{}x{} rows {}", type_name(w.type), w.ne[0], w.ne[1],
                           w.ne[2], cuda::rows_bucket(ids.n_rows())));
  check_matmul_id(w, x, ids, out);
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_expert = w.ne[2];
  const int64_t k = ids.ne[0], xk = x.ne[1], m = ids.n_elements();
  if (pre == nullptr && cuda_matmul_int8_activations(w.type) && n_in % 32 == 0)
    pre = derived_->codes(x);  // x's codes, written by the op that wrote x
  derived_->wrote(out);
  if (m == 0 || n_out == 0) return;
  const cuda::FusedPart part{&w, nullptr, &out};
  if (matmul_id_device(std::span(&part, 1), x, ids, pre)) return;
  // The grouping needs the ids on the host: wait for the router (this window then runs
  // without a CUDA graph, cuda_stream.cuh).
  const cudaStream_t raw = stream_->eager();
  std::vector<int32_t> id(static_cast<size_t>(m));
  CUDA_CHECK(
      cudaMemcpyAsync(id.data(), cuda::base_ptr(ids), id.size() * 4, cudaMemcpyDeviceToHost, raw));
  CUDA_CHECK(cudaStreamSynchronize(raw));
  // Counting sort by expert, rows in (token, rank) order within an expert (as the CPU).
  std::vector<int64_t> first(static_cast<size_t>(n_expert) + 1, 0);
  for (int64_t r = 0; r < m; ++r) {
    T9_CHECK(id[r] >= 0 && id[r] < n_expert, "matmul_id: expert id {} of {}", id[r], n_expert);
    ++first[static_cast<size_t>(id[r]) + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) first[e + 1] += first[e];
  std::vector<int32_t> pairs(static_cast<size_t>(2 * m));  // (x row, out row) in expert order
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t at = fill[static_cast<size_t>(id[r])]++;
    pairs[2 * at] = static_cast<int32_t>(xk == 1 ? r / k : r);
    pairs[2 * at + 1] = static_cast<int32_t>(r);
  }
  // Scratch: packed x [m, n_in], packed y [m, n_out], then the index pairs; 256-byte aligned
  // parts so the packed rows keep the alignment the fast matmul paths look for.
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t xb = align(static_cast<size_t>(m * n_in) * 4);
  const size_t yb = align(static_cast<size_t>(m * n_out) * 4);
  char* base = static_cast<char*>(moe_scratch_.reserve(xb + yb + pairs.size() * 4, *stream_));
  Buffer sbuf{base, xb + yb + pairs.size() * 4, false};
  // Pageable source: the runtime stages the bytes before returning (see upload()).
  CUDA_CHECK(
      cudaMemcpyAsync(base + xb + yb, pairs.data(), pairs.size() * 4, cudaMemcpyHostToDevice, raw));
  const auto* dpairs = reinterpret_cast<const int32_t*>(base + xb + yb);
  const Tensor xs = make_tensor(&sbuf, 0, GgmlType::F32, n_in, m);
  const Tensor ys = make_tensor(&sbuf, xb, GgmlType::F32, n_out, m);
  stream_->launch(cuda::moe_rows_kernel, cuda::rows_grid(m), 128, 0, cuda::desc(x), cuda::desc(xs),
                  dpairs, true);
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t rows = first[e + 1] - first[e];
    if (rows == 0) continue;
    matmul(cuda::expert_view(w, e), view_rows(xs, first[e], rows), Tensor{},
           view_rows(ys, first[e], rows));
  }
  stream_->launch(cuda::moe_rows_kernel, cuda::rows_grid(m), 128, 0, cuda::desc(ys),
                  cuda::desc(out), dpairs, false);
}

void CudaBackend::moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
  T9_CUDA_PROF("moe_combine");
  derived_->wrote(out);
  cuda::check_f32_rows(y, "moe_combine y");
  cuda::check_f32_rows(weights, "moe_combine weights");
  cuda::check_f32_rows(out, "moe_combine out");
  const int64_t d = y.ne[0], k = y.ne[1], n = y.ne[2];
  T9_CHECK(k >= 1 && y.ne[3] == 1, "moe_combine: y must be [n, k >= 1, d]");
  T9_CHECK(weights.ne[0] == k && weights.n_rows() == n, "moe_combine: weights must be [{}, {}]", n,
           k);
  T9_CHECK(out.ne[0] == d && out.n_rows() == n, "moe_combine: out must be [{}, {}]", n, d);
  const int64_t n_elems = n * d;
  if (n_elems == 0) return;
  stream_->launch(cuda::moe_combine_kernel, cuda::grid_1d(n_elems, cuda::kThreads), cuda::kThreads,
                  0, cuda::desc(y), cuda::desc(weights), cuda::desc(out), k, n_elems);
}

void CudaBackend::moe_combine_shared(const Tensor& y, const Tensor& weights, const Tensor& shared,
                                     const Tensor& gate, const Tensor& out) {
  T9_CUDA_PROF("moe_combine_shared");
  derived_->wrote(out);
  cuda::check_f32_rows(y, "moe_combine_shared y");
  cuda::check_f32_rows(weights, "moe_combine_shared weights");
  cuda::check_f32_rows(shared, "moe_combine_shared shared");
  cuda::check_f32_rows(gate, "moe_combine_shared gate");
  cuda::check_f32_rows(out, "moe_combine_shared out");
  const int64_t d = y.ne[0], k = y.ne[1], n = y.ne[2];
  T9_CHECK(k >= 1 && y.ne[3] == 1, "moe_combine_shared: y must be [n, k >= 1, d]");
  T9_CHECK(weights.ne[0] == k && weights.n_rows() == n,
           "moe_combine_shared: weights must be [{}, {}]", n, k);
  T9_CHECK(out.ne[0] == d && out.n_rows() == n, "moe_combine_shared: out must be [{}, {}]", n, d);
  cuda::check_same_shape(shared, out, "moe_combine_shared shared");
  const bool per_row = gate.ne[0] == 1 && d != 1;
  T9_CHECK(gate.n_rows() == n && (per_row || gate.ne[0] == d),
           "moe_combine_shared: gate must be shared's shape or [rows, 1]");
  const int64_t n_elems = n * d;
  if (n_elems == 0) return;
  stream_->launch(cuda::moe_combine_shared_kernel, cuda::grid_1d(n_elems, cuda::kThreads),
                  cuda::kThreads, 0, cuda::desc(y), cuda::desc(weights), cuda::desc(shared),
                  cuda::desc(gate), per_row, cuda::desc(out), k, n_elems);
}

void CudaBackend::moe_down(const MoeDown& m) {
  // A shared expert stored for the bf16 matmul is read by matmul only: the ops one by one.
  if (m.down_shexp.valid() && m.down_shexp.buf->layout != WeightLayout::kGguf)
    return Backend::moe_down(m);
  {
    T9_CUDA_PROF(fmt::format("moe_down {} rows {}", type_name(m.down_exps.type),
                             cuda::rows_bucket(m.ids.n_rows())));
    // Before the launches, as every op; eg, sg, ed and so are not written (backend.h: scratch).
    derived_->wrote(m.out);
    if (cuda::launch_moe_down(m, scratch_, err_word_, *stream_, reads_early(m.down_shexp),
                              moe_down_split_))
      return;
    if (moe_down_pairs(m)) return;
  }
  Backend::moe_down(m);
}

// The composed tail in three launches instead of five where the down projection runs by pair
// (decode steps of 3-8 tokens): both GLUs' codes in one launch (eg and sg are not written), the
// routed pairs and the shared expert's rows (plain rows) in one by-pair launch into ed and so,
// then moe_combine_shared. Each step has its composed op's bits: the codes are the GLU's (the same
// expression and rounding), every pair and plain row the bits of its one-row matmul, which every
// route of matmul gives. Each plain row re-reads the shared matrix (from L2 after the first)
// where the 8-row tile read it once, but the tile and the shared GLU were two more links of the
// decode chain (~7.8 and ~3.1 us a layer in run 159's 8-row map): run 160, 628 -> 548 kernels
// and 6.98 -> 6.69 ms a step, 8 agents +1.1%. TEMPO9_CUDA_MOE_DOWN_PAIRS=0 (read once) turns it
// off.
bool CudaBackend::moe_down_pairs(const MoeDown& m) {
  static const bool off = cuda::env_off("TEMPO9_CUDA_MOE_DOWN_PAIRS");
  const Tensor &w = m.down_exps, &ws = m.down_shexp;
  if (off || !ws.valid() || m.ids.type != GgmlType::I32 || m.ids.ne[0] < 2 ||
      m.eg.ne[1] != m.ids.ne[0] || m.eg.ne[2] != m.ids.ne[1] || !plain_rows_ride(m.ids) ||
      !cuda::id_plain_part_fits(w, ws) || !cuda::matmul_id_groups(w))
    return false;
  check_matmul_id(w, m.eg, m.ids, m.ed);
  check_matmul(ws, m.sg, Tensor{}, m.so);
  cuda::RoundedX codes;
  if (!cuda::launch_moe_glu_codes(m, xq_scratch_, *stream_, codes)) return false;
  derived_->wrote(m.ed);
  derived_->wrote(m.so);
  const cuda::FusedPart part{&w, nullptr, &m.ed}, plain{&ws, nullptr, &m.so};
  const bool ok = matmul_id_device(std::span(&part, 1), m.eg, m.ids, &codes, std::span(&plain, 1));
  T9_CHECK(ok, "moe_down: no by-pair route for {}", type_name(w.type));
  moe_combine_shared(m.ed, m.wts, m.so, m.sgate, m.out);
  return true;
}

void CudaBackend::mul_sigmoid(const Tensor& a, const Tensor& g, const Tensor& out) {
  T9_CUDA_PROF("mul_sigmoid");
  cuda::check_f32_rows(a, "mul_sigmoid a");
  cuda::check_f32_rows(g, "mul_sigmoid g");
  cuda::check_f32_rows(out, "mul_sigmoid out");
  cuda::check_same_shape(a, out, "mul_sigmoid");
  const bool per_row = g.ne[0] == 1 && a.ne[0] != 1;
  T9_CHECK(g.n_rows() == a.n_rows() && (per_row || g.ne[0] == a.ne[0]),
           "mul_sigmoid: g must be a's shape or [rows, 1]");
  const int64_t n_elems = a.n_elements();
  if (n_elems == 0) {
    derived_->wrote(out);
    return;
  }
  static_assert(cuda::kThreads % 32 == 0);
  const cuda::RoundedOut ro = derived_->produce(out, codes_scratch_, *stream_);
  // Row r of g is its own flat row r (TensorDesc::row), as cpu::f32_row(g, r).
  stream_->launch(cuda::mul_sigmoid_kernel, cuda::grid_1d(n_elems, cuda::kThreads), cuda::kThreads,
                  0, cuda::desc(a), cuda::desc(g), per_row, cuda::desc(out), n_elems, ro.xq, ro.xb);
}

}  // namespace t9
