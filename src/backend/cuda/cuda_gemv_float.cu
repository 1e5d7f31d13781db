// Stage-2 matmul for F16/BF16/F32 weights (contract in cuda_gemv.cuh): F32 activations, 16-byte
// weight loads straight from global memory, two weight rows per warp.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_gemv.cuh"

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_norm.cuh"
#include "backend/cuda/cuda_units.cuh"  // cp_async16, quantize_value

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

// acc plus one 16-byte unit's products of w and x (kE elements each): four chains (element i into
// p[i % 4]) joined (p0 + p1) + (p2 + p3). The float GEMVs' unit step: every kernel computing their
// outputs (gemv_f_kernel, gemv_f_tile_kernel, norm_gemv_f_kernel) takes it from here, so their
// order per output is one.
template <int kE>
__device__ __forceinline__ float unit_dot(float acc, const float* w, const float* x) {
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kE; ++i) p[i % 4] = __fmaf_rn(w[i], x[i], p[i % 4]);
  return __fadd_rn(acc, __fadd_rn(__fadd_rn(p[0], p[1]), __fadd_rn(p[2], p[3])));
}

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
//
// FloatParts (n > 0): up to kMaxParts matmuls of one x, weight type and launch configuration in
// one launch (matmul_shared_x: the MoE router beside the shared expert's one-output gate); part i
// owns blocks [block_first[i], block_first[i + 1]) and its w, n_out, y and bias replace the
// parameters, so each output keeps the bits of its own launch.
//
// Every member has an initializer: a launch's argument bytes go on the stream's tape, and a
// member left unset (the unused parts of `part`) carried stack bytes that differed from step to
// step, so no decode step's tape ever repeated and no graph was replayed (run 166).
struct FloatPart {
  const uint8_t* w = nullptr;
  int64_t n_out = 0;
  TensorDesc y = {};
  const float* bias = nullptr;
};
struct FloatParts {
  FloatPart part[kMaxParts] = {};
  int32_t block_first[kMaxParts + 1] = {};
  int n = 0;
};

template <GgmlType T, int kTok, bool kSplit, int kR = kRows>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_f_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_out, TensorDesc x,
                  TensorDesc y, const float* __restrict__ bias, int64_t n_tok, bool w_early,
                  FloatParts fp) {
  int64_t bx = blockIdx.x;
#pragma unroll
  for (int i = 0; i < kMaxParts; ++i) {  // constant indices: parameter loads, no local copy
    if (i < fp.n && blockIdx.x >= fp.block_first[i]) {
      w = fp.part[i].w, n_out = fp.part[i].n_out, y = fp.part[i].y, bias = fp.part[i].bias;
      bx = static_cast<int64_t>(blockIdx.x) - fp.block_first[i];
    }
  }
  if (!w_early) pdl_enter();
  constexpr int kE = T == GgmlType::F32 ? 4 : 8;  // elements per 16-byte unit
  constexpr int kStride = kSplit ? 32 * kWarps : 32;
  __shared__ float part[kSplit ? kWarps : 1][kR][kTok];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t g = kSplit ? bx : bx * kWarps + warp;
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
      for (int r = 0; r < kR; ++r) acc[r][t] = unit_dot<kE>(acc[r][t], wf[r], xf);
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

// ---- the norm beside the matmuls (launch_norm_float_matmul) ----

struct NormGemvArgs {  // every member initialized (the tape's bytes: cuda_stream.cuh)
  TensorDesc a = {}, b = {}, sum = {}, out = {};  // add_rms_norm's row (row 0 of each)
  const float* weight = nullptr;                  // the norm's weight (null: none)
  int8_t* xq = nullptr;                           // out's codes (null: none)
  ActBlock* xb = nullptr;
  int64_t row_bytes = 0;  // every part's weight row
  float eps = 0.0f, weight_bias = 0.0f;
  int weight_early = 0, w_early = 0;  // the norm's weight / every part's weights: model weights
};
static_assert(sizeof(NormGemvArgs) == 4 * sizeof(TensorDesc) + 48, "no padding bytes");

// gemv_f_kernel blocks (of 4 warps) that one norm block (kNormThreads) runs side by side.
constexpr int kNormHalves = kNormThreads / (kWarps * 32);
static_assert(kNormHalves * kWarps * 32 == kNormThreads);

// One row's add_rms_norm and the float matmuls of its output in one launch. Every block computes
// the row's sum of squares as each of rms_norm_codes_kernel's blocks does (norm_head, block_sum
// over kNormThreads threads: the same bits) and keeps the whole normed row in shared memory;
// block g < n / kNormThreads also stores element chunk g of sum, out and out's codes, as that
// kernel's block g does. Then each half of the block runs one gemv_f_kernel<T, 1, true> block
// (launch block 2 x + half in the parts' numbering) on the shared row, in its order: warp w of
// the half takes units 32 w + l, 32 (w + kWarps) + l, ..., each unit's products in four chains
// joined (p0 + p1) + (p2 + p3), the warps' sums added in warp order: the matmuls' bits. Its first
// kPre units of each row are loaded into registers before the dependent-launch wait (weights are
// never written), so after the wait the block's only round trip is the row's a and b. What it
// saves is the router's launch boundary in a MoE layer's decode chain: its wait for the norm and
// x's trip through L2.
template <GgmlType T, int kPre>
__global__ void __launch_bounds__(kNormThreads) norm_gemv_f_kernel(NormGemvArgs a, FloatParts fp) {
  extern __shared__ float4 xs4[];  // the normed row, a.a.ne0 floats
  __shared__ double scratch[32];
  __shared__ float part[kNormHalves][kWarps][kRows];
  constexpr int kE = T == GgmlType::F32 ? 4 : 8;  // elements per 16-byte unit
  constexpr int kStride = 32 * kWarps;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const int half = tid / (kWarps * 32), warp = (tid / 32) % kWarps;
  const int64_t n = a.a.ne0, n_units = a.row_bytes / 16;
  // This half's gemv_f block: its part and rows (constant indices: parameter loads, no local copy).
  const int64_t gb = static_cast<int64_t>(blockIdx.x) * kNormHalves + half;
  const uint8_t* w = nullptr;
  int64_t n_out = 0, bx = 0, blocks = 0;
  TensorDesc y = {};
  const float* bias = nullptr;
#pragma unroll
  for (int i = 0; i < kMaxParts; ++i) {
    if (i < fp.n && gb >= fp.block_first[i]) {
      w = fp.part[i].w, n_out = fp.part[i].n_out, y = fp.part[i].y, bias = fp.part[i].bias;
      bx = gb - fp.block_first[i];
    }
  }
#pragma unroll
  for (int i = 0; i <= kMaxParts; ++i)
    if (i == fp.n) blocks = fp.block_first[i];
  const bool active = gb < blocks && bx * kRows < n_out;
  const int64_t u0 = 32 * warp + lane;
  uint4 wpre[kPre][kRows];
  const auto load_pre = [&] {
#pragma unroll
    for (int k = 0; k < kPre; ++k)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t u = u0 + k * kStride, o = min64(bx * kRows + r, n_out - 1);
        wpre[k][r] = active && u < n_units
                         ? __ldg(reinterpret_cast<const uint4*>(w + o * a.row_bytes) + u)
                         : uint4{};
      }
  };
  float wv[kNormCache];  // the norm's weights of this thread's elements
  const auto load_norm_w = [&] {
#pragma unroll
    for (int c = 0; c < kNormCache; ++c) {
      const int64_t i = tid + c * kNormThreads;
      wv[c] = i < n ? norm_weight_at(a.weight, a.weight_bias, i) : 1.0f;
    }
  };
  if (a.w_early) load_pre();
  if (a.weight_early) load_norm_w();
  pdl_enter();
  if (!a.w_early) load_pre();
  if (!a.weight_early) load_norm_w();

  float xv[kNormCache], unused[kNormCache];
  const double ss = block_sum(
      norm_head<true>(reinterpret_cast<const float*>(a.a.row(0)),
                      reinterpret_cast<const float*>(a.b.row(0)), nullptr, 0.0f, n, xv, unused),
      scratch);
  const float inv = norm_inv(ss, n, a.eps);
  float* xs = reinterpret_cast<float*>(xs4);
  const int64_t g = blockIdx.x;  // rms_norm_codes_kernel's block g: element chunk g
#pragma unroll
  for (int c = 0; c < kNormCache; ++c) {
    const int64_t i = tid + c * kNormThreads;
    if (i >= n) break;  // (n is a multiple of kNormThreads: uniform)
    const float yv = xv[c] * inv * wv[c];
    xs[i] = yv;
    if (c == g) {
      reinterpret_cast<float*>(a.sum.row(0))[i] = xv[c];
      reinterpret_cast<float*>(a.out.row(0))[i] = yv;
      if (a.xq != nullptr) quantize_value(yv, lane, a.xq + (i & ~int64_t{31}), a.xb + i / 32);
    }
  }
  __syncthreads();

  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  const auto dot_unit = [&](const uint4(&wu)[kRows], int64_t u) {
    float wf[kRows][kE], xf[kE];
#pragma unroll
    for (int r = 0; r < kRows; ++r) unpack16<T>(wu[r], wf[r]);
#pragma unroll
    for (int i = 0; i < kE / 4; ++i) {
      const float4 v = xs4[u * (kE / 4) + i];
      xf[4 * i] = v.x, xf[4 * i + 1] = v.y, xf[4 * i + 2] = v.z, xf[4 * i + 3] = v.w;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = unit_dot<kE>(acc[r], wf[r], xf);
  };
  if (active) {
#pragma unroll
    for (int k = 0; k < kPre; ++k)
      if (u0 + k * kStride < n_units) dot_unit(wpre[k], u0 + k * kStride);
    for (int64_t u = u0 + kPre * kStride; u < n_units; u += kStride) {
      uint4 wu[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        wu[r] = __ldg(
            reinterpret_cast<const uint4*>(w + min64(bx * kRows + r, n_out - 1) * a.row_bytes) + u);
      dot_unit(wu, u);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0) part[half][warp][r] = s;
  }
  __syncthreads();
  if (active && warp == 0 && lane < kRows) {  // the warps' sums in warp order, as gemv_f_kernel
    float s = part[half][0][lane];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) s = __fadd_rn(s, part[half][v][lane]);
    const int64_t o = bx * kRows + lane;
    if (o < n_out)
      reinterpret_cast<float*>(y.row(0))[o] = bias != nullptr ? __fadd_rn(s, bias[o]) : s;
  }
}

// ---- the prompt-step tile kernel ----

// Split-order calls (few weight rows) over many activation rows: each output in gemv_f_kernel's
// split order exactly (virtual lane v = 32 w + l of the block's kWarps warps takes the units
// u = v, v + 128, ... in turn; a unit's products joined (p0 + p1) + (p2 + p3) into the lane's sum;
// the lanes by warp_sum, the warps in order, then the bias), so the same bits as every other row
// count. A block stages kRB weight rows in shared memory once, then walks `tiles` tiles of
// kTileToks activation rows: the weights leave L2 once per block instead of once per 8 rows
// (the 35B's F32 router at 2048 rows re-read its 2 MB for every 8 tokens: 341 us a call,
// docs/CUDA.md stage 27). The next unit's activations are loaded while this one's are used.
constexpr int kTileToks = 8;
template <GgmlType T, int kRB>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_f_tile_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_out,
                       TensorDesc x, TensorDesc y, const float* __restrict__ bias, int64_t n_tok,
                       int tiles, bool w_early) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kE = T == GgmlType::F32 ? 4 : 8;  // elements per 16-byte unit
  constexpr int kLanes = kWarps * 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRB, n_units = row_bytes / 16;
  float* part = reinterpret_cast<float*>(smem + kRB * row_bytes);  // [kWarps][kRB][kTileToks]
  const auto stage = [&] {
    for (int64_t i = threadIdx.x; i < kRB * n_units; i += kLanes) {
      const int64_t r = i / n_units, c = i - r * n_units;
      const int64_t o = min64(r0 + r, n_out - 1);  // past the last row: a copy of it, unused
      cp_async16(smem + r * row_bytes + 16 * c, w + o * row_bytes + 16 * c);
    }
    cp_async_commit();
  };
  if (w_early) stage();
  pdl_enter();
  if (!w_early) stage();
  cp_async_wait_0();
  __syncthreads();
  const int64_t n_tiles = (n_tok + kTileToks - 1) / kTileToks;
  const int64_t tile1 = min64(n_tiles, (static_cast<int64_t>(blockIdx.y) + 1) * tiles);
  for (int64_t tile = static_cast<int64_t>(blockIdx.y) * tiles; tile < tile1; ++tile) {
    const int64_t t0 = tile * kTileToks;
    const int nt = static_cast<int>(min64(kTileToks, n_tok - t0));
    const float4* xrow[kTileToks];
#pragma unroll
    for (int t = 0; t < kTileToks; ++t)
      xrow[t] = reinterpret_cast<const float4*>(x.row(t0 + (t < nt ? t : 0)));
    const auto load_x = [&](int64_t u, float(&xf)[kTileToks][kE]) {
#pragma unroll
      for (int t = 0; t < kTileToks; ++t)
#pragma unroll
        for (int i = 0; i < kE / 4; ++i) {
          const float4 q = __ldg(xrow[t] + u * (kE / 4) + i);
          xf[t][4 * i] = q.x, xf[t][4 * i + 1] = q.y, xf[t][4 * i + 2] = q.z,
                    xf[t][4 * i + 3] = q.w;
        }
    };
    float acc[kRB][kTileToks];
#pragma unroll
    for (int r = 0; r < kRB; ++r)
#pragma unroll
      for (int t = 0; t < kTileToks; ++t) acc[r][t] = 0.0f;
    float xa[kTileToks][kE];
    int64_t u = threadIdx.x;
    if (u < n_units) load_x(u, xa);
    for (; u < n_units; u += kLanes) {
      float xb[kTileToks][kE];
      const bool more = u + kLanes < n_units;
      if (more) load_x(u + kLanes, xb);
#pragma unroll
      for (int r = 0; r < kRB; ++r) {
        float wf[kE];
        unpack16<T>(*reinterpret_cast<const uint4*>(smem + r * row_bytes + 16 * u), wf);
#pragma unroll
        for (int t = 0; t < kTileToks; ++t) acc[r][t] = unit_dot<kE>(acc[r][t], wf, xa[t]);
      }
      if (more) {
#pragma unroll
        for (int t = 0; t < kTileToks; ++t)
#pragma unroll
          for (int i = 0; i < kE; ++i) xa[t][i] = xb[t][i];
      }
    }
#pragma unroll
    for (int r = 0; r < kRB; ++r)
#pragma unroll
      for (int t = 0; t < kTileToks; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0) part[(warp * kRB + r) * kTileToks + t] = v;
      }
    __syncthreads();
    for (int j = threadIdx.x; j < kRB * kTileToks; j += kLanes) {
      const int r = j / kTileToks, t = j % kTileToks;
      const int64_t o = r0 + r;
      if (t >= nt || o >= n_out) continue;
      float v = part[r * kTileToks + t];
#pragma unroll
      for (int k = 1; k < kWarps; ++k) v = __fadd_rn(v, part[(k * kRB + r) * kTileToks + t]);
      reinterpret_cast<float*>(y.row(t0 + t))[o] = bias != nullptr ? __fadd_rn(v, bias[o]) : v;
    }
    __syncthreads();  // part is read before the next tile writes it
  }
}

// ---- launchers ----

// A call's launch configuration, a function of the weight's shape and the row count (so of
// nothing a batch changes but the row count). Parts fuse only when theirs agree.
struct FloatConfig {
  int tok = 1;         // activation rows per tile: 1, 4 or 8
  bool split = false;  // the block's warps share its rows (few rows)
  bool wide = false;   // split 8-row tiles with enough rows: 8 rows per block
  bool operator==(const FloatConfig&) const = default;
};
FloatConfig float_config(const Tensor& w, int64_t n_rows) {
  const int64_t n_out = w.ne[1];
  const int64_t w_bytes = n_out * static_cast<int64_t>(w.nb[1]);
  FloatConfig c;
  // tok1_max_weight_bytes (cuda_gemv.cuh): why one row per grid row for small weights.
  c.tok = n_rows <= 8 && w_bytes <= tok1_max_weight_bytes() ? 1 : tok_tile(n_rows);
  // Split rows across the warps when one warp per row group would leave most SMs idle (a
  // property of the weight: the same choice for every n_tok).
  const int64_t row_groups = (n_out + kRows - 1) / kRows;
  c.split = (row_groups + kWarps - 1) / kWarps < sm_count();
  // Split calls over 8-token tiles with enough rows: 8 rows per block (same order per output).
  c.wide = c.split && c.tok == 8 && n_out >= 8 * 8;
  return c;
}
// Blocks along x of one matmul with configuration c.
int64_t float_blocks(const FloatConfig& c, int64_t n_out) {
  const int64_t row_groups = (n_out + kRows - 1) / kRows;
  return c.wide    ? grid_1d(n_out, 8)
         : c.split ? grid_1d(row_groups, 1)
                   : grid_1d(row_groups, kWarps);
}

// The tile kernel's shape for a call, or rows 0 when it does not take the call: split calls
// (few weight rows) of at least min_rows activation rows whose kRB staged rows fit in shared memory
// (16 for F32, whose 16-byte units hold 4 elements and so 128 accumulators a thread; else 8).
constexpr int kTileSmemMax = 200 << 10;
struct FloatTile {
  int rows = 0, smem = 0, tiles = 0;
  int64_t row_blocks = 0, tok_blocks = 0;
};
FloatTile float_tile(const FloatConfig& c, const Tensor& w, int64_t n_tok, int64_t min_rows) {
  FloatTile f;
  if (min_rows <= 0 || n_tok < min_rows || !c.split) return f;
  const int rows = w.type == GgmlType::F32 ? 16 : 8;
  const int64_t smem = rows * static_cast<int64_t>(w.nb[1]) + kWarps * rows * kTileToks * 4;
  if (smem > kTileSmemMax) return f;
  f.rows = rows, f.smem = static_cast<int>(smem);
  f.row_blocks = (w.ne[1] + rows - 1) / rows;
  // One wave: the blocks an SM holds (one at ~130 KB) over the row blocks; the rest in token
  // blocks of whole tiles.
  const int64_t n_tiles = (n_tok + kTileToks - 1) / kTileToks;
  const int64_t per_sm = std::max<int64_t>(1, kTileSmemMax / smem);
  const int64_t want = std::clamp<int64_t>(per_sm * sm_count() / f.row_blocks, 1, n_tiles);
  f.tiles = static_cast<int>((n_tiles + want - 1) / want);
  f.tok_blocks = (n_tiles + f.tiles - 1) / f.tiles;
  return f;
}

template <GgmlType T>
void launch_tile(const FloatTile& f, const Tensor& w, const Tensor& x, const Tensor& bias,
                 const Tensor& y, Stream& stream, bool w_early) {
  T9_CHECK(f.row_blocks <= 0x7fffffff && f.tok_blocks <= 65535, "matmul: launch grid");
  const dim3 grid(static_cast<unsigned>(f.row_blocks), static_cast<unsigned>(f.tok_blocks));
  const auto go = [&](auto kernel) {
    static const bool attr = [&] {  // once per kernel
      CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kTileSmemMax));
      return true;
    }();
    (void)attr;
    stream.launch(kernel, grid, kWarps * 32, f.smem, reinterpret_cast<const uint8_t*>(base_ptr(w)),
                  static_cast<int64_t>(w.nb[1]), w.ne[1], desc(x), desc(y),
                  bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr,
                  x.n_rows(), f.tiles, w_early);
  };
  if constexpr (T == GgmlType::F32)
    go(gemv_f_tile_kernel<T, 16>);
  else
    go(gemv_f_tile_kernel<T, 8>);
}

template <GgmlType T, int kTok>
void launch_f(const FloatConfig& c, const Tensor& w, const Tensor& x, const Tensor& bias,
              const Tensor& y, Stream& stream, bool w_early, const FloatParts& fp, int64_t blocks) {
  const int64_t n_out = w.ne[1], n_tok = x.n_rows();
  const int64_t tok_groups = (n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", n_tok);
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(tok_groups));
  const auto* wp = reinterpret_cast<const uint8_t*>(base_ptr(w));
  const float* b = bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr;
  const auto go = [&](auto kernel) {
    stream.launch(kernel, grid, kWarps * 32, 0, wp, static_cast<int64_t>(w.nb[1]), n_out, desc(x),
                  desc(y), b, n_tok, w_early, fp);
  };
  if constexpr (kTok == 8) {
    if (c.wide) return go(gemv_f_kernel<T, kTok, true, 8>);
  }
  if (c.split) return go(gemv_f_kernel<T, kTok, true>);
  go(gemv_f_kernel<T, kTok, false>);
}

template <GgmlType T>
void run_f(const FloatConfig& c, const Tensor& w, const Tensor& x, const Tensor& bias,
           const Tensor& y, Stream& stream, bool w_early, const FloatParts& fp, int64_t blocks) {
  switch (c.tok) {
    case 1:
      return launch_f<T, 1>(c, w, x, bias, y, stream, w_early, fp, blocks);
    case 4:
      return launch_f<T, 4>(c, w, x, bias, y, stream, w_early, fp, blocks);
    default:
      return launch_f<T, 8>(c, w, x, bias, y, stream, w_early, fp, blocks);
  }
}

template <typename F>
void with_float_type(GgmlType t, F&& f) {
  if (t == GgmlType::F16) f(std::integral_constant<GgmlType, GgmlType::F16>{});
  if (t == GgmlType::BF16) f(std::integral_constant<GgmlType, GgmlType::BF16>{});
  if (t == GgmlType::F32) f(std::integral_constant<GgmlType, GgmlType::F32>{});
}

bool aligned16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(base_ptr(t)) % 16 == 0;
}

}  // namespace

bool launch_float_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                         Stream& stream, const MatmulOpts& opts) {
  const bool w_early = opts.w_early;
  // 16-byte weight units and float4 activation loads: rows and x rows 16-byte aligned.
  const bool ok = w.nb[1] % 16 == 0 && aligned16(w) && aligned16(x) && x.nb[1] % 16 == 0 &&
                  x.nb[2] % 16 == 0 && x.nb[3] % 16 == 0;
  if (!ok) return false;
  const FloatConfig c = float_config(w, x.n_rows());
  const FloatTile f = float_tile(c, w, x.n_rows(), opts.float_tile_min_rows);
  if (f.rows > 0) {
    with_float_type(w.type, [&](auto t) {
      launch_tile<decltype(t)::value>(f, w, x, bias, y, stream, w_early);
    });
    return true;
  }
  with_float_type(w.type, [&](auto t) {
    run_f<decltype(t)::value>(c, w, x, bias, y, stream, w_early, FloatParts{},
                              float_blocks(c, w.ne[1]));
  });
  return true;
}

bool launch_fused_float_matmul(std::span<const FusedPart> parts, const Tensor& x, Stream& stream,
                               const MatmulOpts& opts) {
  const bool w_early = opts.w_early;
  if (parts.size() < 2 || parts.size() > static_cast<size_t>(kMaxParts)) return false;
  const Tensor& w0 = *parts[0].w;
  const FloatConfig c = float_config(w0, x.n_rows());
  // Calls the tile kernel takes go one by one (the caller's fallback): the same bits.
  for (const FusedPart& p : parts)
    if (float_tile(float_config(*p.w, x.n_rows()), *p.w, x.n_rows(), opts.float_tile_min_rows)
            .rows > 0)
      return false;
  if (!(aligned16(x) && x.nb[1] % 16 == 0 && x.nb[2] % 16 == 0 && x.nb[3] % 16 == 0)) return false;
  FloatParts fp{};
  int64_t blocks = 0;
  for (const FusedPart& p : parts) {
    const Tensor& w = *p.w;
    if (w.type != w0.type || w.ne[0] != w0.ne[0] || w.nb[1] != w0.nb[1] || w.nb[1] % 16 != 0 ||
        !aligned16(w) || !(float_config(w, x.n_rows()) == c))
      return false;
    const bool has_bias = p.bias != nullptr && p.bias->valid();
    fp.block_first[fp.n] = static_cast<int32_t>(blocks);
    fp.part[fp.n++] = {reinterpret_cast<const uint8_t*>(base_ptr(w)), w.ne[1], desc(*p.y),
                       has_bias ? reinterpret_cast<const float*>(base_ptr(*p.bias)) : nullptr};
    blocks += float_blocks(c, w.ne[1]);
  }
  fp.block_first[fp.n] = static_cast<int32_t>(blocks);
  T9_CHECK(blocks <= 0x7fffffff, "matmul: launch grid");
  with_float_type(w0.type, [&](auto t) {
    run_f<decltype(t)::value>(c, w0, x, Tensor{}, *parts[0].y, stream, w_early, fp, blocks);
  });
  return true;
}

bool norm_float_matmul_fits(const Tensor& out, std::span<const FusedPart> parts) {
  const int64_t n = out.ne[0];
  if (out.n_rows() != 1 || n % kNormThreads != 0 || n > kNormCache * kNormThreads ||
      parts.empty() || parts.size() > static_cast<size_t>(kMaxParts) || !aligned16(out))
    return false;
  const Tensor& w0 = *parts[0].w;
  for (const FusedPart& p : parts) {
    const Tensor& w = *p.w;
    const FloatConfig c = float_config(w, 1);
    // launch_float_matmul's one-row split call, whatever the caller's tile threshold (one row).
    if ((w.type != GgmlType::F32 && w.type != GgmlType::F16 && w.type != GgmlType::BF16) ||
        w.type != w0.type || w.ne[0] != n || w.nb[1] != w0.nb[1] || w.nb[1] % 16 != 0 ||
        !aligned16(w) || c.tok != 1 || !c.split || p.y->n_rows() != 1 || p.y->ne[0] != w.ne[1])
      return false;
  }
  return true;
}

void launch_norm_float_matmul(const NormRow& nr, std::span<const FusedPart> parts, Stream& stream,
                              const MatmulOpts& opts) {
  T9_CHECK(norm_float_matmul_fits(*nr.out, parts), "add_rms_norm_matmul: shapes it does not take");
  const Tensor& w0 = *parts[0].w;
  NormGemvArgs a;
  a.a = desc(*nr.a), a.b = desc(*nr.b), a.sum = desc(*nr.sum), a.out = desc(*nr.out);
  a.weight = nr.weight;
  a.xq = nr.xq, a.xb = nr.xb;
  a.row_bytes = static_cast<int64_t>(w0.nb[1]);
  a.eps = nr.eps, a.weight_bias = nr.weight_bias;
  a.weight_early = nr.weight_early ? 1 : 0;
  a.w_early = opts.w_early ? 1 : 0;
  FloatParts fp{};
  int64_t blocks = 0;
  const FloatConfig c = float_config(w0, 1);
  for (const FusedPart& p : parts) {
    const bool has_bias = p.bias != nullptr && p.bias->valid();
    fp.block_first[fp.n] = static_cast<int32_t>(blocks);
    fp.part[fp.n++] = {reinterpret_cast<const uint8_t*>(base_ptr(*p.w)), p.w->ne[1], desc(*p.y),
                       has_bias ? reinterpret_cast<const float*>(base_ptr(*p.bias)) : nullptr};
    blocks += float_blocks(c, p.w->ne[1]);
  }
  fp.block_first[fp.n] = static_cast<int32_t>(blocks);
  // Every element chunk needs its block; every gemv_f block its half.
  const int64_t grid =
      std::max((blocks + kNormHalves - 1) / kNormHalves, nr.out->ne[0] / kNormThreads);
  T9_CHECK(grid <= 0x7fffffff, "add_rms_norm_matmul: launch grid");
  const int smem = static_cast<int>(nr.out->ne[0] * 4);
  with_float_type(w0.type, [&](auto t) {
    constexpr GgmlType T = decltype(t)::value;
    // Four units a row and thread in registers before the wait: a 2048-input F32 row whole.
    stream.launch(norm_gemv_f_kernel<T, 4>, static_cast<unsigned>(grid), kNormThreads, smem, a, fp);
  });
}

}  // namespace t9::cuda
