// CUDA matmul: y = x @ w^T (+ bias). CudaBackend::matmul first offers the call to the stage-2
// kernels (cuda_gemv.cuh: int8-activation Q4_0/Q4_1/Q5_0/Q8_0/Q3_K/Q4_K/Q6_K, 16-byte-aligned float
// rows); the stage-1 kernel below takes every other type and layout.
//
// One warp per output column (weight row) and group of up to kTokTile activation rows. Lane l
// dequantizes 32-element chunks l, l + 32, ... of the weight row once and dots each with every
// row of its group, so the weight bytes are read once per group. Per output the sum order is
// fixed (chunk sums in lane order, then an xor-shuffle tree), whatever the group size or n_tokens:
// batch-invariant bit for bit. Stage 1: correctness first; no tensor cores (see docs/CUDA.md).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_bf16_matmul.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_moe_gemv.cuh"
#include "backend/cuda/cuda_profile.cuh"
#include "backend/cuda/cuda_quant.cuh"

namespace t9 {
namespace cuda {
namespace {

constexpr int kTokTile = 8;        // activation rows per warp (weights reused this many times)
constexpr int kWarpsPerBlock = 4;  // output columns per block

// ---- kernels ----

// Dot of the 32 dequantized weights v with x[32c .. 32c + 32); four partial sums in a fixed order.
template <bool kGuard>
__device__ __forceinline__ float chunk_dot(const float* v, const float* xr, int64_t c, int64_t n,
                                           bool x_vec) {
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const float* xc = xr + 32 * c;
  if (!kGuard && x_vec) {
#pragma unroll
    for (int j = 0; j < 32; j += 4) {
      const float4 xv = *reinterpret_cast<const float4*>(xc + j);
      p[0] = fmaf(v[j], xv.x, p[0]);
      p[1] = fmaf(v[j + 1], xv.y, p[1]);
      p[2] = fmaf(v[j + 2], xv.z, p[2]);
      p[3] = fmaf(v[j + 3], xv.w, p[3]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float xv = (!kGuard || 32 * c + j < n) ? xc[j] : 0.0f;
      p[j % 4] = fmaf(v[j], xv, p[j % 4]);
    }
  }
  return (p[0] + p[1]) + (p[2] + p[3]);
}

template <GgmlType T, int kTile>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matmul_kernel(const uint8_t* __restrict__ w, int64_t w_row_bytes, int64_t n_in, int64_t n_out,
                  TensorDesc x, TensorDesc y, const float* __restrict__ bias, int64_t n_tok,
                  bool x_vec) {
  pdl_enter();
  const int lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTile;
  if (o >= n_out) return;
  const int nt = static_cast<int>(min64(kTile, n_tok - t0));
  const uint8_t* wr = w + o * w_row_bytes;
  const float* xr[kTile];
#pragma unroll
  for (int t = 0; t < kTile; ++t)
    xr[t] = reinterpret_cast<const float*>(x.row(t < nt ? t0 + t : t0));
  float acc[kTile];
#pragma unroll
  for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;

  const int64_t n_chunks = (n_in + 31) / 32;
  float v[32];
  for (int64_t c = lane; c < n_chunks; c += 32) {
    dequant_chunk<T>(wr, c, n_in, v);
    const bool tail = kIsFloat<T> && 32 * c + 32 > n_in;
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      if (t < nt)
        acc[t] += tail ? chunk_dot<true>(v, xr[t], c, n_in, false)
                       : chunk_dot<false>(v, xr[t], c, n_in, x_vec);
    }
  }
#pragma unroll
  for (int t = 0; t < kTile; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0 && t < nt) {
      float* yr = reinterpret_cast<float*>(y.row(t0 + t));
      yr[o] = bias != nullptr ? s + bias[o] : s;
    }
  }
}

// ---- launchers ----

template <GgmlType T>
void launch_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                   Stream& stream) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const TensorDesc xd = desc(x), yd = desc(y);
  const bool x_vec = reinterpret_cast<uintptr_t>(xd.base) % 16 == 0 && xd.nb1 % 16 == 0 &&
                     xd.nb2 % 16 == 0 && xd.nb3 % 16 == 0;
  const float* b = bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr;
  const auto* wp = reinterpret_cast<const uint8_t*>(base_ptr(w));
  const int tile = n_tok == 1 ? 1 : kTokTile;
  const int64_t groups = (n_tok + tile - 1) / tile;
  T9_CHECK(groups <= 65535, "matmul: {} activation rows exceed the launch grid", n_tok);
  const dim3 grid(grid_1d(n_out, kWarpsPerBlock), static_cast<unsigned>(groups));
  const int threads = kWarpsPerBlock * 32;
  if (tile == 1)
    stream.launch(matmul_kernel<T, 1>, grid, threads, 0, wp, static_cast<int64_t>(w.nb[1]), n_in,
                  n_out, xd, yd, b, n_tok, x_vec);
  else
    stream.launch(matmul_kernel<T, kTokTile>, grid, threads, 0, wp, static_cast<int64_t>(w.nb[1]),
                  n_in, n_out, xd, yd, b, n_tok, x_vec);
}

// Weights in the bf16 matmul's layout: every matmul of them runs there (launch_bf16_matmul),
// never in a fused int8 launch.
bool bf16_layout(const Tensor& w) {
  return w.valid() && w.buf->layout == WeightLayout::kFrag;
}

}  // namespace
}  // namespace cuda

int64_t CudaBackend::tok1_max_weight_bytes() {
  return cuda::tok1_max_weight_bytes();
}

void CudaBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y) {
  matmul_with(w, x, bias, y, nullptr);
}

void CudaBackend::matmul_shared_x(const Tensor& x, std::span<const MatmulOut> outs) {
  bool any_int8 = false;
  for (const MatmulOut& o : outs)
    any_int8 = any_int8 || (cuda_matmul_int8_activations(o.w.type) && !cuda::bf16_layout(o.w));
  // Every weight checks x against its own n_in in matmul_with; the rounding needs whole blocks.
  const bool round = any_int8 && x.ne[0] % 32 == 0 && x.n_rows() > 0;
  cuda::RoundedX rx;
  if (round) {
    cuda::check_f32_rows(x, "matmul x");
    T9_CUDA_PROF("round_x");
    const cuda::RoundedX* made = derived_->codes(x);  // by the op that wrote x
    rx = made != nullptr ? *made : cuda::round_x(x, xq_scratch_, *stream_);
  }
  // Matmuls of one weight type: one launch for up to kMaxParts of them (q/k/v, gate/up; and
  // matmul_ids of one shape over the same ids: the experts' gate/up; float ones: the MoE router
  // and the shared expert's gate), the rest one by one below. A matmul_id group of decode size
  // also takes one plain matmul of its shape per part as its plain rows (SliceParts: the shared
  // expert's gate/up beside the experts'), when there are exactly that many.
  std::vector<bool> done(outs.size(), false);
  // Matrices stored for the bf16 matmul of exactly two types (a Q4_K_M layer's Q4_K q/k and Q6_K
  // v): one pair launch when it takes them (the same bits as a launch a type).
  if (bf16_pairs_ && fuse_parts_ && x.n_rows() > 0) {
    std::vector<cuda::Bf16Out> a, b;
    std::vector<size_t> members;
    bool w_early = true, two_types = true;
    for (size_t i = 0; i < outs.size() && two_types; ++i) {
      const MatmulOut& o = outs[i];
      if (o.ids.valid() || !cuda::bf16_layout(o.w)) continue;
      std::vector<cuda::Bf16Out>& group = a.empty() || a[0].w->type == o.w.type ? a : b;
      if (&group == &b && !b.empty() && b[0].w->type != o.w.type) two_types = false;
      group.push_back({&o.w, &o.bias, &o.y});
      members.push_back(i);
      w_early = w_early && reads_early(o.w);
    }
    if (two_types && cuda::bf16_pair_fits(a, b, x)) {
      for (const size_t j : members) check_matmul(outs[j].w, x, outs[j].bias, outs[j].y);
      T9_CUDA_PROF(fmt::format("matmul bf16 pair {}x{} {} + {}x{} {} rows {}", a.size(),
                               type_name(a[0].w->type), a[0].w->ne[1], b.size(),
                               type_name(b[0].w->type), b[0].w->ne[1],
                               cuda::rows_bucket(x.n_rows())));
      for (const size_t j : members) derived_->wrote(outs[j].y);
      cuda::launch_bf16_matmul_pair(a, b, x, w_early, *stream_);
      for (const size_t j : members) done[j] = true;
      ++fused_matmuls_;
    }
  }
  // Matrices stored for the bf16 matmul: one launch for up to kBf16MaxFused of one type (q/k/v,
  // gate/up; the same bits as one by one), the rest one by one below.
  if (fuse_parts_ && x.n_rows() > 0)
    for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K,
                                GgmlType::Q8_0, GgmlType::BF16}) {
      std::vector<cuda::Bf16Out> group;
      std::vector<size_t> members;
      bool w_early = true;
      const auto flush = [&] {
        if (group.size() >= 2) {
          T9_CUDA_PROF(fmt::format("matmul bf16 {} {}x{} parts {} rows {}", type_name(type),
                                   x.ne[0], group[0].w->ne[1], group.size(),
                                   cuda::rows_bucket(x.n_rows())));
          for (const size_t j : members) derived_->wrote(outs[j].y);
          cuda::launch_bf16_matmul(group, x, w_early, bf16_scratch_, *stream_, nullptr,
                                   {bf16_wgmma_rows_, bf16_wgmma_quant_});
          for (const size_t j : members) done[j] = true;
          ++fused_matmuls_;
        }
        group.clear(), members.clear(), w_early = true;
      };
      for (size_t i = 0; i < outs.size(); ++i) {
        const MatmulOut& o = outs[i];
        if (done[i] || o.ids.valid() || !cuda::bf16_layout(o.w) || o.w.type != type) continue;
        check_matmul(o.w, x, o.bias, o.y);
        group.push_back({&o.w, &o.bias, &o.y});
        members.push_back(i);
        w_early = w_early && reads_early(o.w);
        if (group.size() == static_cast<size_t>(cuda::kBf16MaxFused)) flush();
      }
      flush();
    }
  if (fuse_parts_) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const MatmulOut& a = outs[i];
      const bool int8 = cuda_matmul_int8_activations(a.w.type);
      const bool float_w =
          a.w.type == GgmlType::F32 || a.w.type == GgmlType::F16 || a.w.type == GgmlType::BF16;
      if (done[i] || cuda::bf16_layout(a.w) || (int8 ? !round : !float_w || a.ids.valid()))
        continue;
      const bool by_id = a.ids.valid();
      std::vector<size_t> group{i};
      for (size_t j = i + 1; j < outs.size() && group.size() < cuda::kMaxParts; ++j) {
        const MatmulOut& b = outs[j];
        if (done[j] || cuda::bf16_layout(b.w) || b.w.type != a.w.type || b.ids.valid() != by_id)
          continue;
        if (by_id && !(b.ids.buf == a.ids.buf && b.ids.offset == a.ids.offset &&
                       b.ids.ne == a.ids.ne && cuda::id_parts_fuse(a.w, b.w)))
          continue;
        group.push_back(j);
      }
      std::vector<size_t> plain;
      if (by_id && x.n_rows() > 0 && plain_rows_ride(a.ids)) {
        for (size_t j = 0; j < outs.size(); ++j) {
          const MatmulOut& b = outs[j];
          if (!done[j] && !b.ids.valid() && !b.bias.valid() && !cuda::bf16_layout(b.w) &&
              cuda::id_plain_part_fits(a.w, b.w))
            plain.push_back(j);
        }
        if (plain.size() != group.size()) plain.clear();
      }
      if (group.size() < 2 && plain.empty()) continue;
      if (fuse_group(x, outs, group, plain, rx)) {
        for (const size_t j : group) done[j] = true;
        for (const size_t j : plain) done[j] = true;
        ++fused_matmuls_;
      }
    }
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (done[i]) continue;
    const MatmulOut& o = outs[i];
    const cuda::RoundedX* pre = round && cuda_matmul_int8_activations(o.w.type) ? &rx : nullptr;
    if (o.ids.valid())
      matmul_id_with(o.w, reshape(x, x.ne[0], 1, x.n_rows()), o.ids, o.y, pre);
    else
      matmul_with(o.w, x, o.bias, o.y, pre);
  }
}

// One launch for the outputs `group` of matmul_shared_x (all plain, or all matmul_ids over one
// ids tensor): false (nothing enqueued) when the kernels cannot take them together.
bool CudaBackend::fuse_group(const Tensor& x, std::span<const MatmulOut> outs,
                             std::span<const size_t> group, std::span<const size_t> plain,
                             const cuda::RoundedX& rx) {
  const MatmulOut& a = outs[group[0]];
  T9_CUDA_PROF(fmt::format("{} {} {}x{} parts {}{} rows {}", a.ids.valid() ? "matmul_id" : "matmul",
                           type_name(a.w.type), a.w.ne[0], a.w.ne[1], group.size(),
                           plain.empty() ? "" : " plain", cuda::rows_bucket(x.n_rows())));
  std::vector<cuda::FusedPart> parts, plain_parts;
  bool w_early = true;
  for (const size_t j : group) {
    const MatmulOut& o = outs[j];
    if (o.ids.valid())
      check_matmul_id(o.w, reshape(x, x.ne[0], 1, x.n_rows()), o.ids, o.y);
    else
      check_matmul(o.w, x, o.bias, o.y);
    parts.push_back({&o.w, &o.bias, &o.y});
    w_early = w_early && reads_early(o.w);
  }
  for (const size_t j : plain) {
    const MatmulOut& o = outs[j];
    check_matmul(o.w, x, o.bias, o.y);
    plain_parts.push_back({&o.w, &o.bias, &o.y});
  }
  // Before the launch, as every op (a fallback one by one marks them again: harmless).
  for (const size_t j : group) derived_->wrote(outs[j].y);
  for (const size_t j : plain) derived_->wrote(outs[j].y);
  if (a.ids.valid()) {
    if (a.ids.n_elements() == 0 || a.w.ne[1] == 0) return false;  // one by one: nothing to do
    if (!matmul_id_device(parts, reshape(x, x.ne[0], 1, x.n_rows()), a.ids, &rx, plain_parts))
      return false;
  } else if (!cuda_matmul_int8_activations(a.w.type)) {
    if (x.n_rows() == 0) return false;  // one by one: nothing to do
    return cuda::launch_fused_float_matmul(
        parts, x, *stream_, {w_early, mma_rows_min_, mma_rows_max_, float_tile_min_rows_});
  } else if (!cuda::launch_fused_matmul(parts, x, scratch_, *stream_, rx,
                                        {w_early, mma_rows_min_, mma_rows_max_})) {
    return false;
  }
  return true;
}

void CudaBackend::check_matmul(const Tensor& w, const Tensor& x, const Tensor& bias,
                               const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  cuda::check_f32_rows(x, "matmul x");
  cuda::check_f32_rows(y, "matmul y");
  T9_CHECK(backend_supports_weight_type(w.type), "matmul: weight type {}", type_name(w.type));
  T9_CHECK(w.ne[2] == 1 && w.ne[3] == 1, "matmul: weights must be 2-D");
  T9_CHECK(w.nb[1] == row_bytes(w.type, n_in), "matmul: weight rows must be packed");
  T9_CHECK(x.ne[0] == n_in, "matmul: x rows have {} elements, weights {}", x.ne[0], n_in);
  T9_CHECK(y.ne[0] == n_out && y.n_rows() == x.n_rows(), "matmul: y must be [{}, {}]", x.n_rows(),
           n_out);
  T9_CHECK(!traits(w.type).quantized || n_in % 32 == 0, "matmul: n_in {} not a multiple of 32",
           n_in);
  if (bias.valid()) {
    cuda::check_f32_rows(bias, "matmul bias");
    T9_CHECK(bias.n_elements() == n_out, "matmul: bias has {} elements", bias.n_elements());
  }
}

void CudaBackend::matmul_with(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                              const cuda::RoundedX* pre) {
  T9_CUDA_PROF(fmt::format("matmul {}{} {}x{} rows {}", cuda::bf16_layout(w) ? "bf16 " : "",
                           type_name(w.type), w.ne[0], w.ne[1], cuda::rows_bucket(x.n_rows())));
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  check_matmul(w, x, bias, y);
  if (cuda::bf16_layout(w)) {
    derived_->wrote(y);
    if (x.n_rows() == 0 || n_out == 0) return;
    const cuda::Bf16Out one{&w, &bias, &y};
    cuda::launch_bf16_matmul({&one, 1}, x, reads_early(w), bf16_scratch_, *stream_, nullptr,
                             {bf16_wgmma_rows_, bf16_wgmma_quant_});
    return;
  }
  if (pre == nullptr && cuda_matmul_int8_activations(w.type) && n_in % 32 == 0)
    pre = derived_->codes(x);  // x's codes, written by the op that wrote x
  derived_->wrote(y);
  if (x.n_rows() == 0 || n_out == 0) return;
  if (cuda::launch_fast_matmul(
          w, x, bias, y, scratch_, *stream_, pre,
          {reads_early(w), mma_rows_min_, mma_rows_max_, float_tile_min_rows_}))
    return;
  cuda::dispatch_weight_type(w.type, [&](auto tag) {
    cuda::launch_matmul<decltype(tag)::value>(w, x, bias, y, *stream_);
  });
}

void CudaBackend::matmul_glu(const Tensor& x, const Tensor& gate_w, const Tensor& up_w,
                             GluKind kind, const Tensor& gate, const Tensor& up) {
  const bool fuse = fuse_glu_ && cuda::bf16_layout(gate_w) && cuda::bf16_layout(up_w) &&
                    cuda::bf16_glu_fits(gate_w, up_w, x) &&
                    !cuda::byte_span(gate).overlaps(cuda::byte_span(x));
  if (!fuse) {
    Backend::matmul_glu(x, gate_w, up_w, kind, gate, up);
    return;
  }
  T9_CUDA_PROF(fmt::format("matmul_glu bf16 {} {}x{} rows {}", type_name(gate_w.type), gate_w.ne[0],
                           gate_w.ne[1], cuda::rows_bucket(x.n_rows())));
  check_matmul(gate_w, x, Tensor{}, gate);
  check_matmul(up_w, x, Tensor{}, up);
  derived_->wrote(gate);
  derived_->wrote(up);  // left unwritten: no codes of an older up may stay attached to it
  const Tensor none;
  const cuda::Bf16Out outs[] = {{&gate_w, &none, &gate}, {&up_w, &none, &up}};
  cuda::launch_bf16_matmul(outs, x, reads_early(gate_w) && reads_early(up_w), bf16_scratch_,
                           *stream_, &kind);
  ++fused_glus_;
}

}  // namespace t9
