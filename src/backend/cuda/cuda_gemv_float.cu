// Stage-2 matmul for F16/BF16/F32 weights (contract in cuda_gemv.cuh): F32 activations, 16-byte
// weight loads straight from global memory, two weight rows per warp.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_gemv.cuh"

namespace t9::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 2;   // weight rows per warp

__device__ __forceinline__ float f16(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

int tok_tile(int64_t n_tok) {
  return n_tok == 1 ? 1 : n_tok <= 4 ? 4 : 8;
}

// ---- the float kernel ----

template <GgmlType T>
__device__ __forceinline__ void unpack16(uint4 v, float* f) {
  if constexpr (T == GgmlType::F32) {
    f[0] = __uint_as_float(v.x), f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z), f[3] = __uint_as_float(v.w);
  } else {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (T == GgmlType::F16) {
        f[2 * i] = f16(static_cast<uint16_t>(words[i] & 0xFFFFu));
        f[2 * i + 1] = f16(static_cast<uint16_t>(words[i] >> 16));
      } else {
        f[2 * i] = __uint_as_float(words[i] << 16);
        f[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
      }
    }
  }
}

// One warp per kRows rows; lane l takes 16-byte units l, l + 32, ...; per unit a fixed-order
// sum in four partial chains, then added to the row's accumulator. kSplit (few rows: the MoE
// router, the shared expert's one-output gate): the block's warps share kRows rows, warp w taking
// units 32 w + l, 32 (w + kWarps) + l, ..., and the warps' sums are added in warp order; so the
// order per output depends on n_in (and the choice, made from n_out), never on n_tok. kR rows per
// warp (or per block when split) changes no output's order: split calls over many tokens take 8
// (each block's activation rows serve 8 weight rows instead of 2: a 2048-token chunk's router
// re-read its activations 128 times from L2, 533 us; session 10, run 3).
template <GgmlType T, int kTok, bool kSplit, int kR = kRows>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_f_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_out, TensorDesc x,
                  TensorDesc y, const float* __restrict__ bias, int64_t n_tok, bool w_early) {
  if (!w_early) pdl_enter();
  constexpr int kE = T == GgmlType::F32 ? 4 : 8;  // elements per 16-byte unit
  constexpr int kStride = kSplit ? 32 * kWarps : 32;
  __shared__ float part[kSplit ? kWarps : 1][kR][kTok];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t g =
      kSplit ? static_cast<int64_t>(blockIdx.x) : static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (w_early) {  // this block's (warp's) rows into L2 before the wait
    if (blockIdx.y == 0 && g * kR < n_out)
      prefetch_l2(w + g * kR * row_bytes, min64(kR, n_out - g * kR) * row_bytes,
                  kSplit ? static_cast<int>(threadIdx.x) : lane, kSplit ? kWarps * 32 : 32);
    pdl_enter();
  }
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTok;
  const int nt = static_cast<int>(min64(kTok, n_tok - t0));
  if (g * kR >= n_out) return;
  const int64_t n_units = row_bytes / 16;
  const float4* xrow[kTok];
#pragma unroll
  for (int t = 0; t < kTok; ++t)
    xrow[t] = reinterpret_cast<const float4*>(x.row(t0 + (t < nt ? t : 0)));
  float acc[kR][kTok];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int t = 0; t < kTok; ++t) acc[r][t] = 0.0f;
#pragma unroll 4
  for (int64_t u = kSplit ? 32 * warp + lane : lane; u < n_units; u += kStride) {
    float wf[kR][kE];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int64_t o = min64(g * kR + r, n_out - 1);
      unpack16<T>(__ldg(reinterpret_cast<const uint4*>(w + o * row_bytes) + u), wf[r]);
    }
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      if (t >= nt) break;
      const float4* xr = xrow[t] + u * (kE / 4);
      float xf[kE];
#pragma unroll
      for (int i = 0; i < kE / 4; ++i) {
        const float4 v = __ldg(xr + i);
        xf[4 * i] = v.x, xf[4 * i + 1] = v.y, xf[4 * i + 2] = v.z, xf[4 * i + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < kE; ++i) p[i % 4] = __fmaf_rn(wf[r][i], xf[i], p[i % 4]);
        acc[r][t] = __fadd_rn(acc[r][t], __fadd_rn(__fadd_rn(p[0], p[1]), __fadd_rn(p[2], p[3])));
      }
    }
  }
  const auto put = [&](int r, int t, float s) {
    const int64_t o = g * kR + r;
    if (t < nt && o < n_out) {
      float* yr = reinterpret_cast<float*>(y.row(t0 + t));
      yr[o] = bias != nullptr ? __fadd_rn(s, bias[o]) : s;
    }
  };
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      const float s = warp_sum(acc[r][t]);
      if constexpr (kSplit) {
        if (lane == 0) part[warp][r][t] = s;
      } else if (lane == 0) {
        put(r, t, s);
      }
    }
  if constexpr (kSplit) {
    __syncthreads();
    // The warps' sums in warp order, one output per thread of warp 0 at a time.
    if (warp != 0) return;
    for (int j = lane; j < kR * kTok; j += 32) {
      const int r = j / kTok, t = j % kTok;
      float s = part[0][r][t];
#pragma unroll
      for (int v = 1; v < kWarps; ++v) s = __fadd_rn(s, part[v][r][t]);
      put(r, t, s);
    }
  }
}

// ---- launchers ----

template <GgmlType T, int kTok>
void launch_f(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y, Stream& stream,
              bool w_early) {
  const int64_t n_out = w.ne[1], n_tok = x.n_rows();
  const int64_t tok_groups = (n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", n_tok);
  const int64_t row_groups = (n_out + kRows - 1) / kRows;
  // Split rows across the warps when one warp per row group would leave most SMs idle (a
  // property of the weight: the same choice for every n_tok).
  const bool split = (row_groups + kWarps - 1) / kWarps < sm_count();
  const dim3 grid(split ? grid_1d(row_groups, 1) : grid_1d(row_groups, kWarps),
                  static_cast<unsigned>(tok_groups));
  const auto* wp = reinterpret_cast<const uint8_t*>(base_ptr(w));
  const float* b = bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr;
  // Split calls over 8-token tiles with enough rows: 8 rows per block (same order per output).
  constexpr int kWide = 8;
  if (split && kTok == 8 && n_out >= 8 * kWide) {
    const dim3 wide(grid_1d(n_out, kWide), static_cast<unsigned>(tok_groups));
    stream.launch(gemv_f_kernel<T, kTok, true, kWide>, wide, kWarps * 32, 0, wp,
                  static_cast<int64_t>(w.nb[1]), n_out, desc(x), desc(y), b, n_tok, w_early);
  } else if (split) {
    stream.launch(gemv_f_kernel<T, kTok, true>, grid, kWarps * 32, 0, wp,
                  static_cast<int64_t>(w.nb[1]), n_out, desc(x), desc(y), b, n_tok, w_early);
  } else
    stream.launch(gemv_f_kernel<T, kTok, false>, grid, kWarps * 32, 0, wp,
                  static_cast<int64_t>(w.nb[1]), n_out, desc(x), desc(y), b, n_tok, w_early);
}

template <GgmlType T>
void run_f(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y, Stream& stream,
           bool w_early) {
  const int64_t w_bytes = w.ne[1] * static_cast<int64_t>(w.nb[1]);
  if (x.n_rows() <= 8 && w_bytes <= tok1_max_weight_bytes())  // tok1_max_weight_bytes: why
    return launch_f<T, 1>(w, x, bias, y, stream, w_early);
  switch (tok_tile(x.n_rows())) {
    case 1:
      return launch_f<T, 1>(w, x, bias, y, stream, w_early);
    case 4:
      return launch_f<T, 4>(w, x, bias, y, stream, w_early);
    default:
      return launch_f<T, 8>(w, x, bias, y, stream, w_early);
  }
}

bool aligned16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(base_ptr(t)) % 16 == 0;
}

}  // namespace

bool launch_float_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                         Stream& stream, bool w_early) {
  // 16-byte weight units and float4 activation loads: rows and x rows 16-byte aligned.
  const bool ok = w.nb[1] % 16 == 0 && aligned16(w) && aligned16(x) && x.nb[1] % 16 == 0 &&
                  x.nb[2] % 16 == 0 && x.nb[3] % 16 == 0;
  if (!ok) return false;
  if (w.type == GgmlType::F16) run_f<GgmlType::F16>(w, x, bias, y, stream, w_early);
  if (w.type == GgmlType::BF16) run_f<GgmlType::BF16>(w, x, bias, y, stream, w_early);
  if (w.type == GgmlType::F32) run_f<GgmlType::F32>(w, x, bias, y, stream, w_early);
  return true;
}

}  // namespace t9::cuda
