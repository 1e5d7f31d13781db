// Stage-2 matmul kernels (contract in cuda_gemv.cuh; design and numbers in docs/CUDA.md).
//
// Quantized path. A warp owns kRows consecutive weight rows at a time (grid-stride over row
// groups, so a warp keeps working and prefetching across groups) and walks each row in segments
// of kSegUnits units (two per lane). A segment's bytes are contiguous in the row: the warp copies
// them to shared memory with 16-byte cp.async loads (the row may start anywhere on a 2-byte
// boundary: the copy starts at the 16-byte boundary below and the data sits `skew` bytes in),
// double-buffered so the next segment is in flight while this one is computed. Each lane then
// decodes its units from shared memory into signed int8x4 words and dots them with the int8
// activations (dp4a), one float scale per 16 or 32 elements.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_gemv_mma.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {

void* Scratch::reserve(size_t n, Stream& stream) {
  if (n <= bytes) return ptr;
  // Stream-ordered: kernels already queued on the stream finish with the old block first. Held
  // back launches are issued first, since they may use the old block (before_free()).
  const cudaStream_t raw = ptr != nullptr ? stream.before_free() : stream.eager();
  if (ptr != nullptr) CUDA_CHECK(cudaFreeAsync(ptr, raw));
  const size_t want = std::max(n, bytes * 2);
  CUDA_CHECK(cudaMallocAsync(&ptr, want, raw));
  bytes = want;
  return ptr;
}

void* Scratch::reserve_zeroed(size_t n, Stream& stream) {
  const size_t had = bytes;
  void* p = reserve(n, stream);
  if (bytes != had) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream.eager()));
  return p;
}

namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 2;   // weight rows per warp: two independent copies in flight

// One warp per 32-element block of every row; output row r is x row rows[r] (rows null: r).
__global__ void quantize_act_kernel(TensorDesc x, int64_t n_in, int64_t n_blocks,
                                    int8_t* __restrict__ xq, ActBlock* __restrict__ xb,
                                    const int32_t* __restrict__ rows = nullptr) {
  pdl_enter();
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (g >= n_blocks) return;  // uniform per warp
  const int64_t per_row = n_in / 32, r = g / per_row, b = g % per_row;
  const int64_t src = rows != nullptr ? rows[r] : r;
  quantize_block(reinterpret_cast<const float*>(x.row(src)) + 32 * b, threadIdx.x % 32,
                 xq + r * n_in + 32 * b, xb + g);
}

// ---- the quantized kernel ----

template <typename U>
struct QArgs {  // every member initialized (the tape's bytes: cuda_stream.cuh)
  const uint8_t* w = nullptr;
  int64_t row_bytes = 0, n_out = 0, n_units = 0, n_in = 0, n_tok = 0;
  const int8_t* xq = nullptr;  // null: fused decode (kTok == 1), the block quantizes x row 0
  const ActBlock* xb = nullptr;
  TensorDesc x = {};
  TensorDesc y = {};
  const float* bias = nullptr;
  bool w_early = false;  // launch_fast_matmul's: the first weights are staged before the wait
};

// Copies segment `seg` of rows g*kRows.. into buf (kRows slots of kLoads * 512 bytes).
template <typename U>
__device__ __forceinline__ void stage(const QArgs<U>& a, int64_t g, int64_t seg, uint8_t* buf,
                                      int lane) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t o = g * kRows + r;
    if (o >= a.n_out) break;
    const uint8_t* src = a.w + o * a.row_bytes + seg * U::kSegBytes;
    const int64_t len = min64(U::kSegBytes, a.row_bytes - seg * U::kSegBytes);
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    const uint8_t* a0 = src - skew;
    const int n16 = static_cast<int>((skew + len + 15) / 16);
#pragma unroll
    for (int i = 0; i < U::kLoads; ++i) {
      const int idx = lane + 32 * i;
      if (idx < n16) cp_async16(buf + r * U::kLoads * 512 + 16 * idx, a0 + 16 * idx);
    }
  }
}

template <GgmlType T, int kTok>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_kernel(QArgs<Unit<T>> a) {
  using U = Unit<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kWeightSmem = kWarps * 2 * kRows * U::kLoads * 512;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* bufs = smem + warp * 2 * kRows * U::kLoads * 512;
  const int64_t n_groups = (a.n_out + kRows - 1) / kRows;
  const int64_t n_seg = (a.n_units + U::kSegUnits - 1) / U::kSegUnits;
  const int64_t g0 = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTok;
  const int nt = static_cast<int>(min64(kTok, a.n_tok - t0));

  if (!a.w_early) pdl_enter();
  if (g0 < n_groups) {
    stage(a, g0, 0, bufs, lane);  // the first weights are in flight while x is quantized
    cp_async_commit();
  }
  if (a.w_early) pdl_enter();  // and while the predecessor finishes
  const int8_t* xq_all = a.xq;
  const ActBlock* xb_all = a.xb;
  if (kTok == 1 && a.xq == nullptr) {
    // Fused decode: x (one row) rounded to int8 into shared memory behind the weight buffers.
    auto* xq_s = reinterpret_cast<int8_t*>(smem + kWeightSmem);
    auto* xb_s = reinterpret_cast<ActBlock*>(smem + kWeightSmem + ((a.n_in + 15) & ~int64_t{15}));
    const float* xr = reinterpret_cast<const float*>(a.x.row(0));
    for (int64_t b = warp; b < a.n_in / 32; b += kWarps)
      quantize_block(xr + 32 * b, lane, xq_s + 32 * b, xb_s + b);
    __syncthreads();
    xq_all = xq_s;
    xb_all = xb_s;
  }
  if (g0 >= n_groups) return;  // uniform per warp (after the block barrier above)
  const int64_t n_items = ((n_groups - 1 - g0) / stride + 1) * n_seg;
  float acc[kRows][kTok];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTok; ++t) acc[r][t] = 0.0f;

  for (int64_t it = 0; it < n_items; ++it) {
    const int64_t g = g0 + (it / n_seg) * stride, seg = it % n_seg;
    uint8_t* buf = bufs + (it & 1) * kRows * U::kLoads * 512;
    if (it + 1 < n_items) {
      const int64_t gn = g0 + ((it + 1) / n_seg) * stride, sn = (it + 1) % n_seg;
      stage(a, gn, sn, bufs + ((it + 1) & 1) * kRows * U::kLoads * 512, lane);
    }
    cp_async_commit();
    cp_async_wait_1();
    __syncwarp();
#pragma unroll
    for (int j = 0; j < U::kSegUnits / 32; ++j) {
      const int lu = lane + 32 * j;  // unit within the segment
      const int64_t u = seg * U::kSegUnits + lu;
      if (u >= a.n_units) break;
      typename U::W wu[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t o = g * kRows + r;
        const int skew =
            static_cast<int>(reinterpret_cast<uintptr_t>(a.w + min64(o, a.n_out - 1) * a.row_bytes +
                                                         seg * U::kSegBytes) &
                             15);
        wu[r] = U::load(buf + r * U::kLoads * 512 + skew + (lu / U::kPerBlock) * U::kBlockBytes,
                        lu % U::kPerBlock);
      }
#pragma unroll
      for (int t = 0; t < kTok; ++t) {
        if (t >= nt) break;
        const int8_t* xq = xq_all + (t0 + t) * a.n_in;
        const ActBlock* xb = xb_all + (t0 + t) * (a.n_in / 32);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] = __fadd_rn(acc[r][t], U::dot(wu[r], xq, xb, u));
      }
    }
    __syncwarp();  // every lane is done with buf before the next iteration refills it
    if (seg == n_seg - 1) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t o = g * kRows + r;
#pragma unroll
        for (int t = 0; t < kTok; ++t) {
          const float s = warp_sum(acc[r][t]);
          acc[r][t] = 0.0f;
          if (lane == 0 && t < nt && o < a.n_out) {
            float* yr = reinterpret_cast<float*>(a.y.row(t0 + t));
            yr[o] = a.bias != nullptr ? __fadd_rn(s, a.bias[o]) : s;
          }
        }
      }
    }
  }
}

// ---- Q4_K straight from global memory ----
// 144-byte super-blocks keep 16-byte alignment, so a lane loads its unit with three 16-byte
// loads (header, two halves of qs; the four lanes of a super-block read 144 contiguous bytes)
// and no shared-memory staging limits the warps in flight. Lane l takes units l, l + 32, ...
// in the order the staged kernel does, and decodes and dots them with the same arithmetic, so
// both kernels give the same bits.

__device__ __forceinline__ Unit<GgmlType::Q4_K>::W load_q4k_global(const uint8_t* blk, int p) {
  return load_q4k_16<true>(blk, p);
}

// kR weight rows per warp; kMinBlocks caps registers so that many blocks fit on an SM.
template <int kTok, int kR = kRows, int kMinBlocks = 1>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    gemv_q4k_direct_kernel(QArgs<Unit<GgmlType::Q4_K>> a) {
  pdl_enter();
  constexpr int kRows = kR;  // shadows the file-wide default
  using U = Unit<GgmlType::Q4_K>;
  const int lane = threadIdx.x % 32;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTok;
  const int nt = static_cast<int>(min64(kTok, a.n_tok - t0));
  if (g * kRows >= a.n_out) return;  // uniform per warp
  float acc[kRows][kTok];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTok; ++t) acc[r][t] = 0.0f;
#pragma unroll 2
  for (int64_t u = lane; u < a.n_units; u += 32) {
    U::W wu[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t o = min64(g * kRows + r, a.n_out - 1);
      wu[r] = load_q4k_global(a.w + o * a.row_bytes + (u / 4) * U::kBlockBytes,
                              static_cast<int>(u % 4));
    }
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      if (t >= nt) break;
      const int8_t* xq = a.xq + (t0 + t) * a.n_in;
      const ActBlock* xb = a.xb + (t0 + t) * (a.n_in / 32);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r][t] = __fadd_rn(acc[r][t], U::dot(wu[r], xq, xb, u));
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t o = g * kRows + r;
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      const float s = warp_sum(acc[r][t]);
      if (lane == 0 && t < nt && o < a.n_out) {
        float* yr = reinterpret_cast<float*>(a.y.row(t0 + t));
        yr[o] = a.bias != nullptr ? __fadd_rn(s, a.bias[o]) : s;
      }
    }
  }
}

// ---- launchers ----

// Activation rows from which Q4_K / Q6_K / Q8_0 take the tensor-core kernel
// (TEMPO9_CUDA_MMA_ROWS overrides, read once; the result is the same bits either way).
int64_t mma_min_rows() {
  static const int64_t n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MMA_ROWS");
    return e != nullptr ? std::max<int64_t>(1, std::atoll(e)) : int64_t{16};
  }();
  return n;
}

int tok_tile(int64_t n_tok) {
  return n_tok == 1 ? 1 : n_tok <= 4 ? 4 : 8;
}

}  // namespace

int64_t tok1_max_weight_bytes() {
  static const int64_t n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_TOK1_BYTES");
    return e != nullptr ? std::atoll(e) : int64_t{20} << 20;
  }();
  return n;
}

namespace {

// Bytes of shared memory for x on the fused decode path (0 when x is quantized separately).
int64_t fused_x_smem(int64_t n_in) {
  return ((n_in + 15) & ~int64_t{15}) + (n_in / 32) * static_cast<int64_t>(sizeof(ActBlock));
}
constexpr int64_t kMaxFusedXSmem = 96 << 10;  // n_in up to ~85k: every model we load

template <GgmlType T, int kTok>
void launch_q(const QArgs<Unit<T>>& a, Stream& stream) {
  using U = Unit<T>;
  constexpr int kWeightSmem = kWarps * 2 * kRows * U::kLoads * 512;
  const int64_t x_smem = a.xq == nullptr ? fused_x_smem(a.n_in) : 0;
  const int smem = static_cast<int>(kWeightSmem + x_smem);
  const int64_t n_groups = (a.n_out + kRows - 1) / kRows;
  const int64_t blocks = resident_blocks<gemv_q_kernel<T, kTok>>(
      kWarps * 32, smem, static_cast<int>(kWeightSmem + kMaxFusedXSmem),
      (n_groups + kWarps - 1) / kWarps);
  const int64_t tok_groups = (a.n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  stream.launch(gemv_q_kernel<T, kTok>,
                dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(tok_groups)), kWarps * 32,
                smem, a);
}

template <int kTok, int kR = kRows, int kMinBlocks = 1>
void launch_q4k_direct(const QArgs<Unit<GgmlType::Q4_K>>& a, Stream& stream) {
  const int64_t tok_groups = (a.n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  const dim3 grid(grid_1d((a.n_out + kR - 1) / kR, kWarps), static_cast<unsigned>(tok_groups));
  stream.launch(gemv_q4k_direct_kernel<kTok, kR, kMinBlocks>, grid, kWarps * 32, 0, a);
}

// One-row Q4_K variants for measurement (TEMPO9_CUDA_Q4K=r2b8|r1b8|r4b4; default: 2 rows per
// warp, no register cap). Same unit order and arithmetic: same bits.
void launch_q4k_decode(const QArgs<Unit<GgmlType::Q4_K>>& a, Stream& stream) {
  static const std::string v = [] {
    const char* e = std::getenv("TEMPO9_CUDA_Q4K");
    return std::string(e != nullptr ? e : "");
  }();
  if (v == "r2b8") return launch_q4k_direct<1, 2, 8>(a, stream);
  if (v == "r1b8") return launch_q4k_direct<1, 1, 8>(a, stream);
  if (v == "r4b4") return launch_q4k_direct<1, 4, 4>(a, stream);
  launch_q4k_direct<1>(a, stream);
}

template <GgmlType T>
void run_q(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y, Scratch& scratch,
           Stream& stream, const RoundedX* pre, const MatmulOpts& opts) {
  const bool w_early = opts.w_early;
  const int64_t n_in = w.ne[0], n_tok = x.n_rows();
  QArgs<Unit<T>> a{reinterpret_cast<const uint8_t*>(base_ptr(w)),
                   static_cast<int64_t>(w.nb[1]),
                   w.ne[1],
                   n_in / Unit<T>::kElems,
                   n_in,
                   n_tok,
                   nullptr,
                   nullptr,
                   desc(x),
                   desc(y),
                   bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr,
                   w_early};
  // Q4_K rows on 16-byte boundaries: the direct kernel (TEMPO9_CUDA_STAGED=1: the staged one).
  static const bool staged = std::getenv("TEMPO9_CUDA_STAGED") != nullptr;
  const bool direct = T == GgmlType::Q4_K && !staged && a.row_bytes % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
  // TEMPO9_CUDA_FUSED=1 (read once): one-row calls quantize x inside the staged GEMV, one
  // launch. Measured slower (every block re-quantizes all of x before its first weights: Q4_K
  // 14336 -> 4096 took 66 us fused vs 24 us with the separate quantizer), so off by default.
  static const bool fused = std::getenv("TEMPO9_CUDA_FUSED") != nullptr;
  // The sliced types (is_sliced_type) use the sliced order (cuda_units.cuh): the sliced GEMV below
  // mma_min_rows() activation rows, the tensor-core kernel from there.
  // TEMPO9_CUDA_LEGACY_GEMV=1 (measurement only) gives them the per-lane-strided kernels of
  // this file for every row count instead (batch-invariant too, but another order).
  static const bool legacy = std::getenv("TEMPO9_CUDA_LEGACY_GEMV") != nullptr;
  constexpr bool sliced_type = is_sliced_type(T);
  const bool sliced = sliced_type && !legacy;
  // The few-row tensor-core GEMV first where it takes the call (MatmulOpts), then the tile kernel.
  const bool few = sliced && opts.few_rows(n_tok) &&
                   mma_rows_fits(SliceArgs{a.w, a.row_bytes, a.n_out, n_in, n_tok}, T);
  const bool mma = sliced && n_tok >= mma_min_rows() && !few;
  // The split form's partials go in scratch behind the rounded x: reserved first, so that
  // round_x's own reserve never moves the block under them.
  const size_t split_bytes =
      mma ? mma_split_bytes(mma_weight_tiles(a.n_out), a.n_out, n_tok, n_in / Unit<T>::kElems) : 0;
  const size_t split_at = pre != nullptr ? 0 : round_x_bytes(n_in, n_tok);
  auto* base = split_bytes > 0 ? static_cast<char*>(scratch.reserve(split_at + split_bytes, stream))
                               : nullptr;
  if (pre != nullptr) {
    a.xq = pre->xq, a.xb = pre->xb;
  } else {
    if (n_tok == 1 && fused && !direct && !sliced && fused_x_smem(n_in) <= kMaxFusedXSmem)
      return launch_q<T, 1>(a, stream);
    const RoundedX r = round_x(x, scratch, stream);
    a.xq = r.xq, a.xb = r.xb;
  }
  if constexpr (sliced_type) {
    if (sliced) {
      SliceArgs s{a.w, a.row_bytes, a.n_out, n_in, n_tok, a.xq, a.xb, a.y, a.bias};
      s.w_early = w_early;
      if (base != nullptr) s.split_p = reinterpret_cast<float*>(base + split_at);
      if (mma) return launch_mma<T>(s, stream);
      if (few) return launch_mma_rows(s, T, stream);
      return launch_slice_gemv<T>(s, stream);
    }
  }
  if constexpr (T == GgmlType::Q4_K) {
    if (direct) {
      switch (tok_tile(n_tok)) {
        case 1:
          return launch_q4k_decode(a, stream);
        case 4:
          return launch_q4k_direct<4>(a, stream);
        default:
          return launch_q4k_direct<8>(a, stream);
      }
    }
  }
  switch (tok_tile(n_tok)) {
    case 1:
      return launch_q<T, 1>(a, stream);
    case 4:
      return launch_q<T, 4>(a, stream);
    default:
      return launch_q<T, 8>(a, stream);
  }
}

// The parts of launch_fused_matmul as one sliced call (SliceParts) of type T.
template <GgmlType T>
void run_fused(std::span<const FusedPart> parts, const Tensor& x, Scratch& scratch, Stream& stream,
               const RoundedX& pre, const MatmulOpts& opts) {
  const int64_t n_in = x.ne[0], n_tok = x.n_rows(), n_units = n_in / Unit<T>::kElems;
  SliceArgs s{nullptr, static_cast<int64_t>(row_bytes(T, n_in)), 0, n_in, n_tok, pre.xq, pre.xb, {},
              nullptr};
  s.w_early = opts.w_early;
  int64_t n_out = 0, w_tiles = 0;
  for (const FusedPart& p : parts) {
    s.parts.part[s.parts.n++] = slice_part(p);
    n_out += p.w->ne[1];
    w_tiles += mma_weight_tiles(p.w->ne[1]);
  }
  // The plain call's fields, for the launchers' choices (alignment, row bytes): part 0's.
  const SlicePart& p0 = s.parts.part[0];
  s.w = p0.w, s.y = p0.y, s.bias = p0.bias, s.n_out = p0.n_out;
  const bool few = opts.few_rows(n_tok) && mma_rows_fits(s, T);
  if (n_tok >= mma_min_rows() && !few) {
    const size_t split_bytes = mma_split_bytes(w_tiles, n_out, n_tok, n_units);
    if (split_bytes > 0) {
      auto* base = static_cast<float*>(scratch.reserve(split_bytes, stream));
      for (int i = 0; i < s.parts.n; ++i) {
        s.parts.part[i].split_p = base;
        base += 32 * n_tok * s.parts.part[i].n_out;
      }
    }
    return launch_mma<T>(s, stream);
  }
  if (few) return launch_mma_rows(s, T, stream);
  launch_slice_gemv<T>(s, stream);
}

}  // namespace

bool launch_fused_matmul(std::span<const FusedPart> parts, const Tensor& x, Scratch& scratch,
                         Stream& stream, const RoundedX& pre, const MatmulOpts& opts) {
  static const bool legacy = std::getenv("TEMPO9_CUDA_LEGACY_GEMV") != nullptr;
  if (legacy || parts.size() < 2 || parts.size() > static_cast<size_t>(kMaxParts)) return false;
  const GgmlType t = parts[0].w->type;
  if (!is_sliced_type(t)) return false;
  // One kernel variant for all parts: the same type and n_in, and (Q4_K's unstaged kernels
  // need it) the same 16-byte alignment of the weight rows.
  const auto align16 = [](const Tensor& w) {
    return reinterpret_cast<uintptr_t>(base_ptr(w)) % 16 == 0;
  };
  for (const FusedPart& p : parts) {
    if (p.w->type != t || p.w->ne[0] != parts[0].w->ne[0] || p.w->ne[1] == 0 ||
        reinterpret_cast<uintptr_t>(base_ptr(*p.w)) % 2 != 0 ||
        align16(*p.w) != align16(*parts[0].w))
      return false;
  }
  if (x.n_rows() == 0) return true;
  dispatch_weight_type(t, [&](auto tag) {
    constexpr GgmlType kT = decltype(tag)::value;
    if constexpr (is_sliced_type(kT)) run_fused<kT>(parts, x, scratch, stream, pre, opts);
  });
  return true;
}

// The codes, then the ActBlocks 256-byte aligned, in scratch.
size_t round_x_bytes(int64_t n_in, int64_t n_rows) {
  const size_t q_bytes = (static_cast<size_t>(n_in * n_rows) + 255) & ~size_t{255};
  const size_t b_bytes = static_cast<size_t>(n_rows * (n_in / 32)) * sizeof(ActBlock);
  return q_bytes + ((b_bytes + 255) & ~size_t{255});
}
RoundedX round_x(const Tensor& x, Scratch& scratch, Stream& stream) {
  const int64_t n_in = x.ne[0], n_rows = x.n_rows();
  const size_t q_bytes = (static_cast<size_t>(n_in * n_rows) + 255) & ~size_t{255};
  auto* base = static_cast<uint8_t*>(scratch.reserve(round_x_bytes(n_in, n_rows), stream));
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* xb = reinterpret_cast<ActBlock*>(base + q_bytes);
  launch_round_rows(x, nullptr, n_rows, xq, xb, stream);
  return {xq, xb};
}

void launch_round_rows(const Tensor& x, const int32_t* rows, int64_t n_rows, int8_t* xq,
                       ActBlock* xb, Stream& stream) {
  const int64_t n_in = x.ne[0], n_blocks = n_rows * (n_in / 32);
  if (n_blocks == 0) return;
  stream.launch(quantize_act_kernel, grid_1d(n_blocks, 8), 256, 0, desc(x), n_in, n_blocks, xq, xb,
                rows);
}

bool launch_fast_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                        Scratch& scratch, Stream& stream, const RoundedX* pre,
                        const MatmulOpts& opts) {
  // Every weight row starts on a 2-byte boundary (all block sizes are even) in these formats.
  const bool w2 = reinterpret_cast<uintptr_t>(base_ptr(w)) % 2 == 0;
  switch (w.type) {
    case GgmlType::Q4_0:
      if (!w2) return false;
      run_q<GgmlType::Q4_0>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q4_1:
      if (!w2) return false;
      run_q<GgmlType::Q4_1>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q5_0:
      if (!w2) return false;
      run_q<GgmlType::Q5_0>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q8_0:
      if (!w2) return false;
      run_q<GgmlType::Q8_0>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q4_K:
      if (!w2) return false;
      run_q<GgmlType::Q4_K>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q6_K:
      if (!w2) return false;
      run_q<GgmlType::Q6_K>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q3_K:
      if (!w2) return false;
      run_q<GgmlType::Q3_K>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::Q5_K:
      if (!w2) return false;
      run_q<GgmlType::Q5_K>(w, x, bias, y, scratch, stream, pre, opts);
      return true;
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::F32:
      return launch_float_matmul(w, x, bias, y, stream, opts);
    default:
      return false;
  }
}

}  // namespace t9::cuda

namespace t9 {

bool cuda_matmul_int8_activations(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         cuda::is_sliced_type(t);
}

}  // namespace t9
