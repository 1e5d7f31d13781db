// The bf16 tensor-core matmul of fragment-ordered Q4_K, Q5_K, Q6_K, Q3_K, Q8_0 and BF16 weights
// (cuda_bf16_matmul.cuh; layouts: quant/frag_layout.h; the formats' decode:
// cuda_bf16_formats.cuh). Grown from dev/kernels/cuda_bf16_q4k.cu (runs 205-217, docs/CUDA.md
// stages 41-42), whose standalone form times its GEMV against its GEMM bitwise and against a
// double oracle; this form (row groups, the GEMV's own rounding of x, several matrices a launch,
// Q5_K, Q6_K, Q8_0, BF16, the GEMM by slices) is checked by tests/ops/cuda_bf16_matmul_test.cpp.
//
// Why: the int8 path's canonical order costs ~4.5 float operations per output and 32 inputs, so
// its tensor-core GEMM stops near ~106 TOPS on an H100; here the scales go into the weights (one
// bf16 rounding each) and the tensor cores do the whole dot: ~200 TFLOP/s at 512 rows, and a
// GEMV as fast as the int8 one at one row and 3-6x faster at 8 rows (H100, run 217).
//
// Both kernels multiply A = 16 weight rows (one tile) by B = 8 activation rows with
// mma.sync.m16n8k16.bf16 in fp32, a slice of 1024 inputs as one chain of 64 steps from zero, the
// slices added in order: an mma's output (i, j) depends only on A's row i, B's column j and C(i,
// j), so a row's outputs are the same bits in the GEMV and in any tile of the GEMM. Q8_0 keeps d
// out of the weights (kBlockScale): its chain is fma(d, block, chain) over 32-input blocks, each
// block two mma from zero, in the same order in both kernels. BF16's weights are its own (the
// layout holds the A fragments), so only x is rounded.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <span>
#include <type_traits>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_bf16_formats.cuh"
#include "backend/cuda/cuda_bf16_matmul.cuh"
#include "backend/cuda/cuda_bf16_wgmma.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_stream.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

constexpr int kSlice = 1024;  // inputs a chain of the canonical order
constexpr int kSbPerSlice = kSlice / 256;
constexpr int kMaxSlices = 16;            // n_in up to 16384: one GEMV warp a slice
constexpr int kMaxFused = kBf16MaxFused;  // matrices a launch (Bf16Args::parts)
constexpr int kGemvMaxRows = 32;          // activation rows a GEMV call (4 x the mma's n8)

using bf16::GroupCodes;

// ---- the mma, shared by both kernels ----

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One launch multiplies x by up to kMaxFused matrices of the same n_in (q, k, v; gate, up):
// their 16-row tiles (GEMV) or 128-row blocks (GEMM) are numbered one after the other.
// No padding anywhere (static_asserts below): Stream::put_arg clears padding bytes, which GCC 12.2
// gets wrong after an array of structs (it zeroes live bytes: cuda_stream.cuh).
struct Bf16Part {
  const uint8_t* w;   // fragment-ordered weights
  const float* bias;  // [n_out] or null
  TensorDesc y;       // n_tok rows of n_out floats
  int n_out;
  int first_tile;   // the part's first 16-row tile in the launch's numbering
  int first_block;  // its first 128-row GEMM block
  int unused = 0;   // fills the tail (8-byte alignment)
};
struct Bf16Args {
  Bf16Part parts[kMaxFused];
  const __nv_bfloat16* x;  // n_tok rows of n_in, contiguous (null: the GEMV stages xf itself)
  TensorDesc xf;           // the F32 rows x was rounded from
  int n_parts;
  int n_in, n_tok;
  int n_tiles, n_blocks;  // all parts'
  int w_early;            // every part's weights are model weights (reads_early): the GEMV
                          // starts its first copies before its dependent-launch wait
  // The GEMV's GLU epilogue (launch_bf16_matmul's glu): 0 none, else 1 + GluKind. Parts 0 and 1
  // are the gate and up of one n_out; a block takes gate tile k then up tile k and stores
  // glu_value(gate, up) into part 0's y (part 1's y is never written).
  int glu;
  int unused2 = 0;
  // The GEMM by slices (null: whole rows): block (x, y, z) walks slice z only and leaves its
  // outputs in partial[z][row][x * kBM + local], for bf16_slice_sum_kernel to add in order.
  float* partial;
};
static_assert(std::has_unique_object_representations_v<Bf16Part> &&
              std::has_unique_object_representations_v<Bf16Args>);

// The part holding launch tile (or block) `at`, given each part's first one: walked with
// constant indices, so the parameters are read in place (no copy to local memory).
template <typename First>
__device__ __forceinline__ int part_of(const Bf16Args& a, int at, First first) {
  int p = 0;
#pragma unroll
  for (int q = 1; q < kMaxFused; ++q)
    if (q < a.n_parts && at >= first(a.parts[q])) p = q;
  return p;
}
// Field f of part p, likewise.
template <typename F>
__device__ __forceinline__ auto part_field(const Bf16Args& a, int p, F f) {
  auto v = f(a.parts[0]);
#pragma unroll
  for (int q = 1; q < kMaxFused; ++q)
    if (q == p) v = f(a.parts[q]);
  return v;
}

// Output o of part p: the chain's sum plus the part's bias.
__device__ __forceinline__ float y_value(const Bf16Args& a, int p, int o, float acc) {
  const float* bias = part_field(a, p, [](const Bf16Part& x) { return x.bias; });
  return bias != nullptr ? acc + bias[o] : acc;
}
__device__ __forceinline__ void put_y(const Bf16Args& a, int p, int t, int o, float v) {
  const TensorDesc y = part_field(a, p, [](const Bf16Part& x) { return x.y; });
  reinterpret_cast<float*>(y.row(t))[o] = v;
}
__device__ __forceinline__ void store_y(const Bf16Args& a, int p, int t, int o, float acc) {
  put_y(a, p, t, o, y_value(a, p, o, acc));
}

// ---- x to bf16 ----

// Eight elements a thread: n_tok rows (TensorDesc) of n_in floats to contiguous bf16, rounded to
// nearest even. Scalar loads: x's rows need only be 4-byte aligned.
__global__ void to_bf16_kernel(TensorDesc x, int n_in, int64_t n_oct, __nv_bfloat16* out) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_oct) return;
  const int64_t per_row = n_in / 8, r = i / per_row, c = 8 * (i % per_row);
  const float* src = reinterpret_cast<const float*>(x.row(r)) + c;
  __nv_bfloat162 v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = __floats2bfloat162_rn(src[2 * j], src[2 * j + 1]);
  *reinterpret_cast<uint4*>(out + r * n_in + c) = *reinterpret_cast<const uint4*>(v);
}

// ---- GEMV: 1..32 activation rows ----
// Persistent blocks of one warp a slice (n_in / 1024 warps): block b takes tiles b, b + grid,
// ...; warp s streams super-blocks 4s .. 4s + 3 of each through a ring of F::kRing shared slots,
// one bulk copy (lane 0, an mbarrier a slot) a super-block, kRing - 1 ahead, so its copies stay in
// flight while it multiplies and while the block adds a tile's slices. Per super-block the warp
// builds its table of scales (F::build_table); per 64-input group a lane reads its 16 code bytes
// (and Q6_K's high words) and its table entries, dequantizes once, and runs four mma for each of
// kGroups groups of 8 activation rows.
// kStageX: each warp rounds its slice of the F32 rows to bf16 into shared memory at the start
// (no conversion launch); else the rows come from the bf16 copy through L1, the next group's
// loads issued before this group's mma.
constexpr int kMaxRing = 3;              // the largest F::kRing (the barriers' room)
constexpr int kXRowU4 = kSlice / 8 + 4;  // uint4 a staged row (+64 bytes: rows g, g + 1 of one
                                         // LDS.128 phase on disjoint banks)
constexpr int kStageXMaxBytes = 64 << 10;
// A GEMV block's shared memory limit (H100 / H200 opt-in: 227 KB); the largest Q4_K request,
// 16 slices with two staged rows, is ~200 KB; Q6_K's ring is larger (the launcher stages fewer
// rows to fit).
constexpr int kGemvMaxSmem = 227 * 1024;
constexpr int kBarBytes = 32;  // a warp's ring mbarriers, padded: the staged rows stay 16-aligned

// A GEMV block's shared memory, for n_slices warps: every warp's ring, every warp's table of
// scales, every warp's slice partials (16 rows x 8 groups floats), one tile's outputs held for
// the GLU epilogue, every warp's mbarriers, then the staged rows. One function for the kernel and
// the launcher; every region stays 16-byte aligned.
struct GemvSmem {
  int table, part, hold, bars, x, bytes;
};
template <class F>
__host__ __device__ constexpr GemvSmem gemv_smem(int n_slices, int groups, int n_tok_staged) {
  GemvSmem m{};
  m.table = n_slices * F::kRing * F::kBlockBytes;
  m.part = m.table + n_slices * F::kTableBytes;
  m.hold = m.part + n_slices * 16 * 8 * 4 * groups;  // the GLU epilogue's gate tile outputs
  m.bars = m.hold + 16 * 8 * 4 * groups;
  m.x = m.bars + n_slices * kBarBytes;
  m.bytes = m.x + n_slices * n_tok_staged * kXRowU4 * 16;
  return m;
}
static_assert(bf16::Q4K::kBlockBytes % 16 == 0 && bf16::Q5K::kBlockBytes % 16 == 0 &&
              bf16::Q3K::kBlockBytes % 16 == 0 && bf16::Q6K::kBlockBytes % 16 == 0 &&
              bf16::Q80::kBlockBytes % 16 == 0 && bf16::Q4K::kTableBytes % 16 == 0 &&
              bf16::Q6K::kTableBytes % 16 == 0 && bf16::Q80::kTableBytes % 16 == 0 &&
              kBarBytes % 16 == 0 && kBarBytes >= kMaxRing * 8);

// The GEMV of block `block` of `grid` (blockIdx.x and gridDim.x, or their share of a pair launch).
template <class F, bool kStageX, int kGroups>
__device__ __forceinline__ void gemv_body(const Bf16Args& args, int block, int grid,
                                          uint8_t* smem) {
  constexpr int kRing = F::kRing;
  static_assert(kRing >= 2 && kRing <= kMaxRing);
  if (!args.w_early) pdl_enter();
  const int lane = threadIdx.x % 32, s = threadIdx.x / 32;  // warp s: slice s
  const int g = lane / 4, tq = lane % 4;
  const int n_in = args.n_in, n_tok = args.n_tok, n_sb = n_in / 256, n_slices = n_in / kSlice;
  const int n_tiles = args.n_tiles;
  constexpr int kPartFloats = 16 * 8 * kGroups;  // a slice's partials: [16 rows][8 kGroups]
  const GemvSmem lay = gemv_smem<F>(n_slices, kGroups, kStageX ? n_tok : 0);
  uint8_t* ring = smem + s * kRing * F::kBlockBytes;
  uint32_t* table = reinterpret_cast<uint32_t*>(smem + lay.table + s * F::kTableBytes);
  float* part = reinterpret_cast<float*>(smem + lay.part);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + lay.bars + s * kBarBytes);
  uint4* xsm = reinterpret_cast<uint4*>(smem + lay.x);
  if (lane == 0)
    for (int r = 0; r < kRing; ++r) mbar_init(&bars[r]);
  __syncwarp();
  // Stream position i: super-block i % 4 of this warp's slice of the block's (i / 4)-th tile.
  // The block's tiles are b, b + grid, ...; with the GLU epilogue its units are (gate, up) tile
  // pairs: gate tile k = launch tile k, up tile k = launch tile n_units + k.
  const bool pairs = args.glu != 0;
  const int n_units = pairs ? n_tiles / 2 : n_tiles;
  const int my_units = (n_units - block + grid - 1) / grid;
  const int n_pos = 4 * (pairs ? 2 * my_units : my_units);
  const auto tile_of = [&](int j) {  // the block's j-th tile
    return pairs ? (j % 2) * n_units + block + (j / 2) * grid : block + j * grid;
  };
  auto first_tile = [](const Bf16Part& x) { return x.first_tile; };
  auto issue = [&](int i) {
    if (i >= n_pos || lane != 0) return;
    const int tile = tile_of(i / 4), at = part_of(args, tile, first_tile);
    const uint8_t* w = part_field(args, at, [](const Bf16Part& x) { return x.w; });
    const int64_t local = tile - part_field(args, at, first_tile);
    // The slot was read through the generic proxy in the previous round: order those reads
    // before the copy engine's writes.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_expect(&bars[i % kRing], F::kBlockBytes);
    bulk_copy(ring + (i % kRing) * F::kBlockBytes,
              w + (local * n_sb + s * kSbPerSlice + i % 4) * F::kBlockBytes, F::kBlockBytes,
              &bars[i % kRing]);
  };
#pragma unroll
  for (int i = 0; i < kRing - 1; ++i) issue(i);
  // Weights are never written after their upload: their first copies may run while the
  // predecessor still does (pdl_enter, cuda_common.cuh); x is read only after the wait.
  if (args.w_early) pdl_enter();
  if (kStageX) {  // this warp's slice of every row, rounded to bf16 (8 floats a lane and step)
    for (int r = 0; r < n_tok; ++r) {
      const float4* src = reinterpret_cast<const float4*>(
          reinterpret_cast<const float*>(args.xf.row(r)) + s * kSlice);
#pragma unroll
      for (int u = lane; u < kSlice / 8; u += 32) {
        const float4 lo = src[2 * u], hi = src[2 * u + 1];
        const __nv_bfloat162 v[4] = {
            __floats2bfloat162_rn(lo.x, lo.y), __floats2bfloat162_rn(lo.z, lo.w),
            __floats2bfloat162_rn(hi.x, hi.y), __floats2bfloat162_rn(hi.z, hi.w)};
        xsm[(s * n_tok + r) * kXRowU4 + u] = *reinterpret_cast<const uint4*>(v);
      }
    }
    __syncwarp();
  }
  // Lane g of group gi feeds activation row 8 gi + g, the mma's column g, which reaches only
  // output column g: rows past n_tok read row n_tok - 1 (their columns are never stored), so no
  // load needs a branch.
  const uint4* x_lane[kGroups];
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) {
    const int row = min(8 * gi + g, n_tok - 1);
    x_lane[gi] = kStageX ? xsm + (s * n_tok + row) * kXRowU4 + tq  // + (input in the slice) / 8
                         : reinterpret_cast<const uint4*>(
                               args.x + static_cast<int64_t>(row) * n_in + s * kSlice) +
                               tq;
  }
  auto load_x = [&](int k0, uint4(&xl)[kGroups], uint4(&xh)[kGroups]) {
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {
      xl[gi] = kStageX ? x_lane[gi][k0 / 8] : __ldg(x_lane[gi] + k0 / 8);
      xh[gi] = kStageX ? x_lane[gi][(k0 + 32) / 8] : __ldg(x_lane[gi] + (k0 + 32) / 8);
    }
  };
  float p[kGroups][4];
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) p[gi][0] = p[gi][1] = p[gi][2] = p[gi][3] = 0.0f;
  for (int i = 0; i < n_pos; ++i) {
    issue(i + kRing - 1);
    const int q = i % 4;
    uint4 xl[kGroups], xh[kGroups];
    load_x(q * 256, xl, xh);                       // before the wait: in flight meanwhile
    mbar_wait(&bars[i % kRing], (i / kRing) & 1);  // position i landed
    const uint8_t* sb = ring + (i % kRing) * F::kBlockBytes;
    F::build_table(sb, table, lane);
    __syncwarp();
    uint4 high = {};   // Q6_K, Q5_K: the lane's high words (F::gemv_highs); Q3_K: its low words
    uint4 high2 = {};  // Q3_K: the lane's high words (F::gemv_codes)
#pragma unroll
    for (int grp = 0; grp < 4; ++grp) {
      uint4 nl[kGroups], nh[kGroups];  // the next group's rows
      if (grp < 3) load_x(q * 256 + 64 * (grp + 1), nl, nh);
      const uint4* cp =
          reinterpret_cast<const uint4*>(sb + F::kCodesAt) + 32 * F::kCodeChunks * grp + lane;
      GroupCodes codes{};
#pragma unroll
      for (int c = 0; c < F::kCodeChunks; ++c) {
        const uint4 cw = cp[32 * c];
        codes.w[4 * c] = cw.x, codes.w[4 * c + 1] = cw.y;
        codes.w[4 * c + 2] = cw.z, codes.w[4 * c + 3] = cw.w;
      }
      if constexpr (F::kCodesInHighs)
        F::gemv_codes(sb, grp, lane, high, high2, codes);
      else if constexpr (F::kHigh)
        F::gemv_highs(sb, grp, lane, high, codes.h);
      uint32_t a[4][4];
      const typename F::Scales sc = F::table_scales(table, g, tq, grp);
      F::dequant(codes, sc, a);
#pragma unroll
      for (int gi = 0; gi < kGroups; ++gi) {
        if constexpr (F::kBlockScale) {  // p += d x (the block's two steps from zero)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint4 xv = h == 0 ? xl[gi] : xh[gi];
            float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_bf16(t, a[2 * h], xv.x, xv.y);
            mma_bf16(t, a[2 * h + 1], xv.z, xv.w);
#pragma unroll
            for (int e = 0; e < 4; ++e) p[gi][e] = __fmaf_rn(sc.d[e / 2][h], t[e], p[gi][e]);
          }
        } else {
          mma_bf16(p[gi], a[0], xl[gi].x, xl[gi].y);
          mma_bf16(p[gi], a[1], xl[gi].z, xl[gi].w);
          mma_bf16(p[gi], a[2], xh[gi].x, xh[gi].y);
          mma_bf16(p[gi], a[3], xh[gi].z, xh[gi].w);
        }
      }
      if (grp < 3)
#pragma unroll
        for (int gi = 0; gi < kGroups; ++gi) xl[gi] = nl[gi], xh[gi] = nh[gi];
    }
    __syncwarp();  // the slot and the table are read before they are overwritten
    if (q == 3) {  // the slice is done: p[gi][e] is weight row g + 8(e/2), row 8gi + 2tq + e%2
#pragma unroll
      for (int gi = 0; gi < kGroups; ++gi)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          part[s * kPartFloats + (g + 8 * (e / 2)) * 8 * kGroups + 8 * gi + 2 * tq + e % 2] =
              p[gi][e];
          p[gi][e] = 0.0f;
        }
      __syncthreads();
      const int tile = tile_of(i / 4), at = part_of(args, tile, first_tile);
      const int o0 = (tile - part_field(args, at, first_tile)) * 16;
      const bool gate_tile = pairs && (i / 4) % 2 == 0;  // held for its up tile, the next
      float* hold = reinterpret_cast<float*>(smem + lay.hold);
      for (int e = threadIdx.x; e < 16 * n_tok; e += blockDim.x) {  // output o of row t
        const int t = e / 16, o = e % 16;
        float acc = 0.0f;
        for (int sl = 0; sl < n_slices; ++sl)
          acc = __fadd_rn(acc, part[sl * kPartFloats + o * 8 * kGroups + t]);
        if (!pairs) {
          store_y(args, at, t, o0 + o, acc);
        } else if (gate_tile) {
          hold[e] = y_value(args, 0, o0 + o, acc);  // the same thread reads it back below
        } else {
          const GluKind kind = args.glu == 1 + static_cast<int>(GluKind::kSwiGLU) ? GluKind::kSwiGLU
                                                                                  : GluKind::kGeGLU;
          put_y(args, 0, t, o0 + o, glu_value(kind, hold[e], y_value(args, 1, o0 + o, acc)));
        }
      }
      __syncthreads();  // part is read before the next tile writes it
    }
  }
}

template <class F, bool kStageX, int kGroups>
__global__ void __launch_bounds__(32 * kMaxSlices) bf16_gemv_kernel(Bf16Args args) {
  extern __shared__ __align__(16) uint8_t smem[];
  gemv_body<F, kStageX, kGroups>(args, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x),
                                 smem);
}

// Two GEMVs over the same x in one grid: blocks [0, grid_a) run a's matrices (format F), the
// others b's (format G), each exactly as its own launch would (a block runs one body only, so
// its code is one format's). For a layer whose q/k/v are of two types (a Q4_K_M file's Q6_K v),
// which otherwise take two launches one after the other.
template <class F, class G, bool kStageX, int kGroups>
__global__ void __launch_bounds__(32 * kMaxSlices)
    bf16_gemv_pair_kernel(Bf16Args a, Bf16Args b, int grid_a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int block = static_cast<int>(blockIdx.x);
  if (block < grid_a)
    gemv_body<F, kStageX, kGroups>(a, block, grid_a, smem);
  else
    gemv_body<G, kStageX, kGroups>(b, block - grid_a, static_cast<int>(gridDim.x) - grid_a, smem);
}

// ---- GEMM: a block owns 128 weight rows (8 tiles) x 64 activation rows, 8 warps of 32 x 32 ----
// Per 64-input k-tile kt (one barrier): wait for tile kt + 1's copies, barrier, issue tile
// kt + 3's, dequantize tile kt + 1 into fragment order (thread = tile tid / 32, lane tid % 32:
// its own A fragments, from headers other threads copied, hence after the barrier), multiply
// tile kt. B is one 16-byte load a lane and n8 tile per 32 inputs (the layout's slot order).
// F::kDirectA (BF16, opt-in): the copied codes are the A fragments, so there is no dequantization
// and no fragment buffer; a fourth stage of codes takes its place (the multiply reads tile kt's
// stage while kt + 3's lands in another), and the block's shared memory fits two an SM.
constexpr int kBM = kBf16GemmRows, kBN = 64, kGemmThreads = 256, kRawStages = 3, kXStages = 4;
constexpr int kXStride = 96;  // bf16 a shared row: 192 bytes, rows g and g + 1 on disjoint banks
template <class F>
constexpr int kCodeStages = F::kDirectA ? 4 : kRawStages;
template <class F, bool kDirect = F::kDirectA>
struct GemmSmem {
  // (Q3_K: none here, kCodeChunks 0: its code words come with the high words below.)
  uint4 codes[kCodeStages<F>][kBM / 16][F::kCodeChunks > 0 ? 32 * F::kCodeChunks : 1];
  uint4 hdr[kRawStages][kBM / 16][F::kHdrChunks > 0 ? F::kHdrChunks : 1];  // BF16: none
  // Q6_K, Q5_K: each lane's high words; Q3_K: its low words, then (32 on) its high words.
  uint2 high[kRawStages][kBM / 16][F::kHigh ? 32 * F::kHighCopies : 1];
  __nv_bfloat16 x[kXStages][kBN][kXStride];
  uint4 a[2][kBM / 16][4][32];  // dequantized fragments: tile, k16 step, lane
  // Q8_0: d of rows g, g + 8 x the k-tile's two blocks, by tile and g (beside a).
  float4 d[2][kBM / 16][F::kBlockScale ? 8 : 1];
};
template <class F>
struct GemmSmem<F, true> {
  uint4 codes[kCodeStages<F>][kBM / 16][32 * F::kCodeChunks];
  __nv_bfloat16 x[kXStages][kBN][kXStride];
};
// F::kGemmBlocks blocks an SM (the launch bounds) in the 228 KB of an SM, 1 KB reserved a block.
template <class F>
constexpr bool gemm_fits = (sizeof(GemmSmem<F>) + 1024) * F::kGemmBlocks <= 228 * 1024;
static_assert(gemm_fits<bf16::Q4K> && gemm_fits<bf16::Q5K> && gemm_fits<bf16::Q6K> &&
              gemm_fits<bf16::Q3K> && gemm_fits<bf16::Q80> && gemm_fits<bf16::B16> &&
              gemm_fits<bf16::B16Direct>);

// 8 bytes from global src to shared dst (cp.async takes 4, 8 or 16; .cg only 16).
__device__ __forceinline__ void cp_async8(void* dst, const uint8_t* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src));
}

template <class F>
__global__ void __launch_bounds__(kGemmThreads, F::kGemmBlocks) bf16_gemm_kernel(Bf16Args args) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  GemmSmem<F>& sm = *reinterpret_cast<GemmSmem<F>*>(smem_raw);
  pdl_enter();
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, tq = lane % 4;
  const int wm = warp / 2, wn = warp % 2;  // 4 x 2 warps
  const int n_in = args.n_in, n_tok = args.n_tok;
  const int part = part_of(args, blockIdx.x, [](const Bf16Part& x) { return x.first_block; });
  const int n_out = part_field(args, part, [](const Bf16Part& x) { return x.n_out; });
  const uint8_t* w = part_field(args, part, [](const Bf16Part& x) { return x.w; });
  const int o0 =
      (blockIdx.x - part_field(args, part, [](const Bf16Part& x) { return x.first_block; })) * kBM;
  const int t0 = blockIdx.y * kBN;
  // k-tiles [kt_begin, n_tiles): all of them, or slice blockIdx.z's (the split launch).
  const bool split = args.partial != nullptr;
  const int kt_begin = split ? static_cast<int>(blockIdx.z) * (kSlice / 64) : 0;
  const int n_sb = n_in / 256, last_tile = n_out / 16 - 1;
  const int n_tiles = split ? kt_begin + kSlice / 64 : n_in / 64;
  // Tiles past n_out (a partial block) copy the last tile again; their outputs are not stored.
  // Warp `warp` copies its tile's codes; thread tid < 8 kHdrChunks chunk tid % kHdrChunks of tile
  // tid / kHdrChunks's header.
  constexpr int kB = F::kBlockBytes, kChunks = F::kHdrChunks > 0 ? F::kHdrChunks : 1;
  const uint8_t* w_tile = w + static_cast<int64_t>(min(o0 / 16 + warp, last_tile)) * n_sb * kB;
  const uint8_t* w_hdr =
      w + static_cast<int64_t>(min(o0 / 16 + tid / kChunks, last_tile)) * n_sb * kB;
  const int cx_row = tid / 4;
  const bool x_ok = t0 + cx_row < n_tok;
  const __nv_bfloat16* x_row = args.x + static_cast<int64_t>(min(t0 + cx_row, n_tok - 1)) * n_in;
  auto issue = [&](int kt) {
    if (kt >= n_tiles) return;
    const int st = kt % kCodeStages<F>, sb = kt / 4, grp = kt % 4;
    const uint8_t* blk = w_tile + static_cast<int64_t>(sb) * kB;
#pragma unroll
    for (int c = 0; c < F::kCodeChunks; ++c)
      cp_async16(reinterpret_cast<uint8_t*>(&sm.codes[st][warp][32 * c + lane]),
                 blk + F::kCodesAt + 16 * (32 * (F::kCodeChunks * grp + c) + lane));
    if constexpr (F::kCodesInHighs) {
#pragma unroll
      for (int k = 0; k < F::kHighCopies; ++k)
        cp_async8(&sm.high[st][warp][32 * k + lane], blk + F::gemm_high_at(grp, lane, k));
    } else if constexpr (F::kHigh && !F::kDirectA) {
      cp_async8(&sm.high[st][warp][lane], blk + F::gemm_high_at(grp, lane));
    }
    if constexpr (F::kHdrChunks > 0 && !F::kDirectA)
      if (tid < (kBM / 16) * kChunks)
        cp_async16(reinterpret_cast<uint8_t*>(&sm.hdr[st][tid / kChunks][tid % kChunks]),
                   w_hdr + static_cast<int64_t>(sb) * kB + 16 * (tid % kChunks));
    if (x_ok) {
      const int xs = kt % kXStages, quarter = tid % 4;  // 16 of the k-tile's 64 inputs
      const uint8_t* src = reinterpret_cast<const uint8_t*>(x_row + kt * 64 + 16 * quarter);
      cp_async16(reinterpret_cast<uint8_t*>(&sm.x[xs][cx_row][16 * quarter]), src);
      cp_async16(reinterpret_cast<uint8_t*>(&sm.x[xs][cx_row][16 * quarter + 8]), src + 16);
    }
  };
  auto dequant = [&](int kt) {
    if constexpr (!F::kDirectA) {  // (kDirectA: the codes are the fragments)
      if (kt >= n_tiles) return;
      const int st = kt % kRawStages, grp = kt % 4;
      // This lane's scales of the group, computed directly from the headers: the GEMV's table
      // holds the same values.
      GroupCodes codes{};
#pragma unroll
      for (int c = 0; c < F::kCodeChunks; ++c) {
        const uint4 cw = sm.codes[st][warp][32 * c + lane];
        codes.w[4 * c] = cw.x, codes.w[4 * c + 1] = cw.y;
        codes.w[4 * c + 2] = cw.z, codes.w[4 * c + 3] = cw.w;
      }
      if constexpr (F::kCodesInHighs)
        F::gemm_codes(&sm.high[st][warp][lane], grp, codes);
      else if constexpr (F::kHigh)
        F::gemm_highs(sm.high[st][warp][lane], grp, codes.h);
      uint32_t a[4][4];
      const typename F::Scales sc = F::header_scales(sm.hdr[st][warp], g, tq, grp);
      F::dequant(codes, sc, a);
      if constexpr (F::kBlockScale)
        if (tq == 0)
          sm.d[kt % 2][warp][g] = make_float4(sc.d[0][0], sc.d[0][1], sc.d[1][0], sc.d[1][1]);
#pragma unroll
      for (int step = 0; step < 4; ++step)
        sm.a[kt % 2][warp][step][lane] = make_uint4(a[step][0], a[step][1], a[step][2], a[step][3]);
    }
  };
  if (!x_ok)  // rows past n_tok: zeros once (their outputs are not stored)
    for (int b = 0; b < kXStages; ++b)
      for (int k = 16 * (tid % 4); k < 16 * (tid % 4) + 16; ++k)
        sm.x[b][cx_row][k] = __float2bfloat16_rn(0.0f);
  float p[2][4][4], acc[2][4][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) p[mt][nt][i] = 0.0f, acc[mt][nt][i] = 0.0f;
  issue(kt_begin);
  cp_async_commit();
  issue(kt_begin + 1);
  cp_async_commit();
  issue(kt_begin + 2);
  cp_async_commit();
  if constexpr (!F::kDirectA) {
    asm volatile("cp.async.wait_group 2;\n" ::: "memory");  // the first tile (this thread's)
    __syncthreads();
    dequant(kt_begin);
  }
  for (int kt = kt_begin; kt < n_tiles; ++kt) {
    if constexpr (F::kDirectA)  // tile kt's copies (this thread's); kt + 1, kt + 2 may fly on
      asm volatile("cp.async.wait_group 2;\n" ::: "memory");
    else
      cp_async_wait_1();  // tile kt + 1's copies (this thread's)
    __syncthreads();      // ... everyone's; tile kt's fragments; iteration kt - 1 done by all
    issue(kt + 3);        // kDirectA: into tile kt - 1's stage of four
    cp_async_commit();
    dequant(kt + 1);
    const int xs = kt % kXStages, ab = kt % 2;
    // Tile `tile`'s A fragments of k16 step `step` (kDirectA: as copied).
    auto frag = [&](int tile, int step) -> uint4 {
      if constexpr (F::kDirectA)
        return sm.codes[kt % kCodeStages<F>][tile][32 * step + lane];
      else
        return sm.a[ab][tile][step][lane];
    };
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the group's low then high sub-block
      uint4 b[4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        b[nt] = *reinterpret_cast<const uint4*>(&sm.x[xs][wn * 32 + 8 * nt + g][32 * h + 8 * tq]);
      if constexpr (F::kBlockScale) {  // p += d x (the block's two steps from zero), as the GEMV
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const float4 dv = sm.d[ab][2 * wm + mt][g];
          const float d_row[2] = {h == 0 ? dv.x : dv.y, h == 0 ? dv.z : dv.w};
          float t[4][4];
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) t[nt][0] = t[nt][1] = t[nt][2] = t[nt][3] = 0.0f;
#pragma unroll
          for (int s2 = 0; s2 < 2; ++s2) {
            const uint4 v = frag(2 * wm + mt, 2 * h + s2);
            const uint32_t a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
              mma_bf16(t[nt], a, s2 == 0 ? b[nt].x : b[nt].z, s2 == 0 ? b[nt].y : b[nt].w);
          }
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i)
              p[mt][nt][i] = __fmaf_rn(d_row[i / 2], t[nt][i], p[mt][nt][i]);
        }
      } else {
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2) {
          uint32_t a[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            const uint4 v = frag(2 * wm + mt, 2 * h + s2);
            a[mt][0] = v.x, a[mt][1] = v.y, a[mt][2] = v.z, a[mt][3] = v.w;
          }
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
              mma_bf16(p[mt][nt], a[mt], s2 == 0 ? b[nt].x : b[nt].z, s2 == 0 ? b[nt].y : b[nt].w);
        }
      }
    }
    if ((kt + 1) % (kSlice / 64) == 0) {  // a slice ends: y += p
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[mt][nt][i] = __fadd_rn(acc[mt][nt][i], p[mt][nt][i]), p[mt][nt][i] = 0.0f;
    }
  }
  // Accumulator i of (mt, nt): weight row wm*32 + 16mt + g + 8(i/2), activation row wn*32 + 8nt +
  // 2tq + i%2.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int ol = wm * 32 + 16 * mt + g + 8 * (i / 2), o = o0 + ol;
        const int t = t0 + wn * 32 + 8 * nt + 2 * tq + i % 2;
        if (o >= n_out || t >= n_tok) continue;
        if (split)
          args.partial[(static_cast<int64_t>(blockIdx.z) * n_tok + t) * (args.n_blocks * kBM) +
                       blockIdx.x * kBM + ol] = acc[mt][nt][i];
        else
          store_y(args, part, t, o, acc[mt][nt][i]);
      }
}

// The split GEMM's sum: output (t, c) of the launch's n_blocks x kBM columns is 0 + slice 0 +
// slice 1 + ... in that order, as the whole-row GEMM adds its slices, so the same bits (each
// partial is already 0 + p: adding it to a sum that is never -0 is adding p).
__global__ void bf16_slice_sum_kernel(Bf16Args args, int n_slices) {
  pdl_enter();
  const int64_t cols = static_cast<int64_t>(args.n_blocks) * kBM;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= cols * args.n_tok) return;
  const int t = static_cast<int>(e / cols), c = static_cast<int>(e % cols);
  const int blk = c / kBM;
  const int part = part_of(args, blk, [](const Bf16Part& x) { return x.first_block; });
  const int o =
      (blk - part_field(args, part, [](const Bf16Part& x) { return x.first_block; })) * kBM +
      c % kBM;
  if (o >= part_field(args, part, [](const Bf16Part& x) { return x.n_out; })) return;
  const int64_t stride = cols * args.n_tok;  // one slice's partials
  float acc = 0.0f;
  for (int s = 0; s < n_slices; ++s) acc = __fadd_rn(acc, args.partial[s * stride + e]);
  store_y(args, part, t, o, acc);
}

// The persistent GEMV on one wave of resident blocks (resident_blocks: shared memory, registers
// and warps per SM, queried once per size), at most one block a tile.
template <class F, bool kStageX, int kGroups>
struct Gemv {
  static constexpr auto value = bf16_gemv_kernel<F, kStageX, kGroups>;
};
template <auto kKernel>
void launch_gemv(const Bf16Args& args, int n_slices, int bytes, int64_t n_tiles, Stream& stream) {
  const int threads = 32 * n_slices;
  const int64_t blocks = resident_blocks<kKernel>(threads, bytes, kGemvMaxSmem, n_tiles);
  stream.launch(kKernel, dim3(static_cast<unsigned>(blocks)), threads, bytes, args);
}

// The launch for format F (its GEMM G's); args are complete but for x (the bf16 copy, when one
// is made).
// Whether format F's GEMV rounds x's rows (n_in inputs, in `groups` groups of 8) itself: 16-byte
// aligned F32 rows that fit its shared memory as bf16 beside F's ring. The rest (and the GEMM)
// read a bf16 copy made by one launch.
template <class F>
bool gemv_stages_x(const Tensor& x, int64_t n_in, int groups) {
  const TensorDesc xd = desc(x);
  const int64_t n_tok = x.n_rows();
  const bool aligned = reinterpret_cast<uintptr_t>(xd.base) % 16 == 0 && xd.nb1 % 16 == 0 &&
                       (x.ne[2] == 1 || xd.nb2 % 16 == 0) && (x.ne[3] == 1 || xd.nb3 % 16 == 0);
  return n_tok <= kGemvMaxRows && aligned && n_tok * n_in * 2 <= kStageXMaxBytes &&
         gemv_smem<F>(static_cast<int>(n_in / kSlice), groups, static_cast<int>(n_tok)).bytes <=
             kGemvMaxSmem;
}

template <class F, class G = F>
void launch_format(Bf16Args& args, const Tensor& x, Scratch& scratch, Stream& stream) {
  const int64_t n_in = args.n_in, n_tok = args.n_tok;
  const TensorDesc& xd = args.xf;
  const bool gemv = n_tok <= kGemvMaxRows;
  const int n_slices = static_cast<int>(n_in / kSlice);
  const int groups = n_tok <= 8 ? 1 : n_tok <= 16 ? 2 : 4;
  const bool stage = gemv && gemv_stages_x<F>(x, n_in, groups);
  // The GEMM by slices (bf16_gemm_by_slices): the slices' partials after the bf16 copy.
  const int64_t row_blocks = (n_tok + kBN - 1) / kBN, cols = int64_t{args.n_blocks} * kBM;
  const bool split = bf16_gemm_by_slices(n_in, args.n_blocks, n_tok);  // (never a GEMV's)
  const size_t x_bytes = (static_cast<size_t>(n_tok * n_in) * 2 + 255) / 256 * 256;
  if (!stage) {
    const size_t part_bytes = split ? static_cast<size_t>(n_slices * n_tok * cols) * 4 : 0;
    auto* base = static_cast<uint8_t*>(scratch.reserve(x_bytes + part_bytes, stream));
    auto* xb = reinterpret_cast<__nv_bfloat16*>(base);
    if (split) args.partial = reinterpret_cast<float*>(base + x_bytes);
    const int64_t n_oct = n_tok * n_in / 8;
    stream.launch(to_bf16_kernel, grid_1d(n_oct, 256), 256, 0, xd, static_cast<int>(n_in), n_oct,
                  xb);
    args.x = xb;
  }
  if (gemv) {
    const int bytes = gemv_smem<F>(n_slices, groups, stage ? static_cast<int>(n_tok) : 0).bytes;
    T9_CHECK(bytes <= kGemvMaxSmem, "bf16 GEMV: {} bytes of shared memory for n_in {} x {} rows",
             bytes, n_in, n_tok);
    const int64_t units = args.glu != 0 ? args.n_tiles / 2 : args.n_tiles;  // a block's at most
    const auto go = [&](auto kernel) {
      launch_gemv<decltype(kernel)::value>(args, n_slices, bytes, units, stream);
    };
    if (stage)
      groups == 1   ? go(Gemv<F, true, 1>{})
      : groups == 2 ? go(Gemv<F, true, 2>{})
                    : go(Gemv<F, true, 4>{});
    else
      groups == 1   ? go(Gemv<F, false, 1>{})
      : groups == 2 ? go(Gemv<F, false, 2>{})
                    : go(Gemv<F, false, 4>{});
    return;
  }
  static const bool attr = [] {
    CUDA_CHECK(cudaFuncSetAttribute(bf16_gemm_kernel<G>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(sizeof(GemmSmem<G>))));
    return true;
  }();
  (void)attr;
  T9_CHECK((n_tok + kBN - 1) / kBN <= 65535, "bf16 matmul: {} rows exceed the launch grid", n_tok);
  const dim3 grid(static_cast<unsigned>(args.n_blocks), static_cast<unsigned>(row_blocks),
                  split ? static_cast<unsigned>(n_slices) : 1u);
  stream.launch(bf16_gemm_kernel<G>, grid, kGemmThreads, sizeof(GemmSmem<G>), args);
  if (split)
    stream.launch(bf16_slice_sum_kernel, grid_1d(n_tok * cols, 256), 256, 0, args, n_slices);
}

// fn(F{}) for the bf16 path's format F of a weight type; false for a type it does not take.
template <class Fn>
bool with_format(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::Q4_K:
      return fn(bf16::Q4K{});
    case GgmlType::Q5_K:
      return fn(bf16::Q5K{});
    case GgmlType::Q3_K:
      return fn(bf16::Q3K{});
    case GgmlType::Q6_K:
      return fn(bf16::Q6K{});
    case GgmlType::Q8_0:
      return fn(bf16::Q80{});
    case GgmlType::BF16:
      return fn(bf16::B16{});
    default:
      return false;
  }
}

}  // namespace

bool bf16_frag_shape_ok(GgmlType type, int64_t n_in, int64_t n_out) {
  if (!frag_shape_ok(n_in, n_out) || n_in % kSlice != 0 || n_in > kMaxSlices * kSlice ||
      n_out > (int64_t{1} << 30))
    return false;
  // The GEMV's largest form (four groups of 8 rows, x from the bf16 copy) must fit a block's
  // shared memory: Q8_0's ring (3 x 4352 bytes a warp) stops at 14 slices, BF16's (2 x 8192) at
  // 12.
  const int n_slices = static_cast<int>(n_in / kSlice);
  return with_format(type, [&](auto format) {
    return gemv_smem<decltype(format)>(n_slices, 4, 0).bytes <= kGemvMaxSmem;
  });
}

// Whole-row blocks that would leave most SMs idle (the 35B's 4096 -> 2048 out-projections at
// 33-64 rows: 16 blocks for 132 SMs, each walking 64 k-tiles) go by slices instead.
// TEMPO9_CUDA_BF16_SPLIT=0 turns it off (A/B runs).
bool bf16_gemm_by_slices(int64_t n_in, int64_t n_blocks, int64_t n_tok) {
  static const bool off = env_off("TEMPO9_CUDA_BF16_SPLIT");
  const int64_t row_blocks = (n_tok + kBN - 1) / kBN;
  return !off && n_tok > kGemvMaxRows && n_in / kSlice >= 2 &&
         2 * n_blocks * row_blocks <= sm_count();
}

bool bf16_glu_fits(const Tensor& gate_w, const Tensor& up_w, const Tensor& x) {
  return x.n_rows() >= 1 && x.n_rows() <= kGemvMaxRows && gate_w.type == up_w.type &&
         gate_w.ne == up_w.ne;
}

namespace {

// A launch's arguments for outs (one type and n_in) over x, but for the GEMV's staging choice
// and the bf16 copy (launch_format's).
Bf16Args make_args(std::span<const Bf16Out> outs, const Tensor& x, bool w_early) {
  T9_CHECK(!outs.empty() && outs.size() <= static_cast<size_t>(kMaxFused),
           "bf16 matmul: {} matrices in one launch", outs.size());
  const int64_t n_in = outs[0].w->ne[0], n_tok = x.n_rows();
  const GgmlType type = outs[0].w->type;
  Bf16Args args{};
  args.n_parts = static_cast<int>(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& w = *outs[i].w;
    const int64_t n_out = w.ne[1];
    T9_CHECK(w.type == type && w.buf->layout == WeightLayout::kFrag && w.ne[0] == n_in &&
                 bf16_frag_shape_ok(w.type, n_in, n_out),
             "bf16 matmul: weights {} [{}, {}] not in fragment order (launch: {}, n_in {})",
             type_name(w.type), n_out, w.ne[0], type_name(type), n_in);
    const Tensor& bias = *outs[i].bias;
    args.parts[i] = {reinterpret_cast<const uint8_t*>(base_ptr(w)),
                     bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr,
                     desc(*outs[i].y),
                     static_cast<int>(n_out),
                     args.n_tiles,
                     args.n_blocks};
    args.n_tiles += static_cast<int>(n_out / 16);
    args.n_blocks += static_cast<int>((n_out + kBM - 1) / kBM);
  }
  T9_CHECK(n_tok <= 0x7fffffff / n_in, "bf16 matmul: {} rows of {}", n_tok, n_in);
  args.xf = desc(x);
  args.n_in = static_cast<int>(n_in);
  args.n_tok = static_cast<int>(n_tok);
  static const bool early_off = env_off("TEMPO9_CUDA_BF16_EARLY");  // =0: A/B runs
  args.w_early = w_early && !early_off ? 1 : 0;
  return args;
}

// The pair launch for formats F (a) and G (b): staged x, one group of 8 rows.
template <class F, class G>
void launch_pair(const Bf16Args& a, const Bf16Args& b, int n_slices, Stream& stream) {
  constexpr auto kKernel = bf16_gemv_pair_kernel<F, G, true, 1>;
  const int bytes =
      std::max(gemv_smem<F>(n_slices, 1, a.n_tok).bytes, gemv_smem<G>(n_slices, 1, a.n_tok).bytes);
  // Every unit its own block while they fit the device at once; else the resident blocks split
  // in proportion (at least one each).
  const int64_t units = int64_t{a.n_tiles} + b.n_tiles;
  const int64_t cap = resident_blocks<kKernel>(32 * n_slices, bytes, kGemvMaxSmem, units);
  int64_t grid_a = a.n_tiles;
  if (cap < units) grid_a = std::clamp<int64_t>(cap * a.n_tiles / units, 1, cap - 1);
  const int64_t grid_b = std::min<int64_t>(b.n_tiles, std::max<int64_t>(cap - grid_a, 1));
  stream.launch(kKernel, dim3(static_cast<unsigned>(grid_a + grid_b)), 32 * n_slices, bytes, a, b,
                static_cast<int>(grid_a));
}

// Which format pairs have a pair kernel (the K-quant mixes' q/k beside a Q6_K v): 1 (a, b as
// given), -1 (swapped), 0 (none).
int pair_order(GgmlType a, GgmlType b) {
  const auto known = [](GgmlType x, GgmlType y) {
    return (x == GgmlType::Q4_K || x == GgmlType::Q5_K) && y == GgmlType::Q6_K;
  };
  return known(a, b) ? 1 : known(b, a) ? -1 : 0;
}

}  // namespace

bool bf16_pair_fits(std::span<const Bf16Out> a, std::span<const Bf16Out> b, const Tensor& x) {
  if (a.empty() || b.empty() || a.size() > static_cast<size_t>(kMaxFused) ||
      b.size() > static_cast<size_t>(kMaxFused) || pair_order(a[0].w->type, b[0].w->type) == 0)
    return false;
  const int64_t n_in = a[0].w->ne[0], n_tok = x.n_rows();
  if (b[0].w->ne[0] != n_in || n_tok < 1 || n_tok > 8 || n_in % kSlice != 0) return false;
  const bool q5 = a[0].w->type == GgmlType::Q5_K || b[0].w->type == GgmlType::Q5_K;
  return (q5 ? gemv_stages_x<bf16::Q5K>(x, n_in, 1) : gemv_stages_x<bf16::Q4K>(x, n_in, 1)) &&
         gemv_stages_x<bf16::Q6K>(x, n_in, 1);
}

void launch_bf16_matmul_pair(std::span<const Bf16Out> a, std::span<const Bf16Out> b,
                             const Tensor& x, bool w_early, Stream& stream) {
  T9_CHECK(bf16_pair_fits(a, b, x), "bf16 matmul pair: {} and {} over {} rows do not fit",
           type_name(a[0].w->type), type_name(b[0].w->type), x.n_rows());
  if (pair_order(a[0].w->type, b[0].w->type) < 0) std::swap(a, b);
  const Bf16Args aa = make_args(a, x, w_early), ba = make_args(b, x, w_early);
  const int n_slices = aa.n_in / kSlice;
  if (a[0].w->type == GgmlType::Q4_K)
    launch_pair<bf16::Q4K, bf16::Q6K>(aa, ba, n_slices, stream);
  else
    launch_pair<bf16::Q5K, bf16::Q6K>(aa, ba, n_slices, stream);
}

namespace {

// The wgmma GEMM for every matrix of a launch (one type) of at least wgmma.min_rows rows, when
// each takes it (bf16_wgmma_fits; the K-quants only with wgmma.quantized): x copied once in the
// layout's input order, then one launch a matrix. The same bits as the GEMM here (docs/CUDA.md
// stages 53-54).
bool launch_wgmma(std::span<const Bf16Out> outs, const Tensor& x, WgmmaUse wgmma, Scratch& scratch,
                  Stream& stream) {
  const GgmlType type = outs[0].w->type;
  if (type != GgmlType::BF16 && !wgmma.quantized) return false;
  const int64_t n_in = outs[0].w->ne[0], n_tok = x.n_rows();
  for (const Bf16Out& o : outs)
    if (!bf16_wgmma_fits(type, n_in, o.w->ne[1], n_tok, wgmma.min_rows)) return false;
  void* xb = scratch.reserve(bf16_wgmma_x_bytes(n_in, n_tok), stream);
  launch_bf16_wgmma_x(desc(x), n_in, n_tok, xb, stream);
  for (const Bf16Out& o : outs) {
    const Tensor& bias = *o.bias;
    launch_bf16_wgmma({type, reinterpret_cast<const uint8_t*>(base_ptr(*o.w)),
                       bias.valid() ? reinterpret_cast<const float*>(base_ptr(bias)) : nullptr,
                       desc(*o.y), xb, n_in, o.w->ne[1], n_tok},
                      stream);
  }
  return true;
}

}  // namespace

void launch_bf16_matmul(std::span<const Bf16Out> outs, const Tensor& x, bool w_early,
                        Scratch& scratch, Stream& stream, const GluKind* glu, WgmmaUse wgmma) {
  Bf16Args args = make_args(outs, x, w_early);
  const int64_t n_tok = x.n_rows();
  const GgmlType type = outs[0].w->type;
  // BF16's GEMM as B16Direct (stage 48, run 235: 512-token prompt 8,465 -> 12,194 tok/s on the
  // 8B BF16); =0 keeps B16's fragment buffer (A/B runs).
  static const bool direct_on = !env_off("TEMPO9_CUDA_BF16_DIRECT");
  // (BF16 only as B16Direct: =0 measures the fragment buffer's GEMM.)
  if ((type != GgmlType::BF16 || direct_on) && glu == nullptr && n_tok > kGemvMaxRows &&
      launch_wgmma(outs, x, wgmma, scratch, stream))
    return;
  if (glu != nullptr) {
    T9_CHECK(outs.size() == 2 && bf16_glu_fits(*outs[0].w, *outs[1].w, x),
             "bf16 matmul: the GLU epilogue takes one gate and one up of one shape, {} rows",
             n_tok);
    args.glu = 1 + static_cast<int>(*glu);
  }
  if (type == GgmlType::BF16 && direct_on)
    return launch_format<bf16::B16, bf16::B16Direct>(args, x, scratch, stream);
  const bool known = with_format(type, [&](auto format) {
    launch_format<decltype(format)>(args, x, scratch, stream);
    return true;
  });
  T9_CHECK(known, "bf16 matmul: {} has no bf16 format", type_name(type));
}

}  // namespace t9::cuda
