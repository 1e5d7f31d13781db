// The few-row tensor-core GEMV (Q8_0, 2..15 activation rows): int8 mma.sync m16n8k32 with 16
// weight rows as A and up to 8 activation rows as B, in the canonical order of cuda_units.cuh,
// so the same bits as the sliced GEMV and the tile kernel (rule 7).
//
// Why: a decode step of 8 agents multiplies every dense weight by 8 rows. The sliced GEMV's 8-row
// tile spends 8 dp4a and 3 float instructions per (weight row, unit, activation row) and is
// latency-bound (docs/CUDA.md stage 19: the 35B's DeltaNet in-projection at 8 rows ~19 us for
// 27 MB, 1.4 TB/s). One mma gives a unit's 16 x 8 integer sums; what is left per unit is
// Unit::acc's scale product and fma.
//
// A block owns 16 weight rows and one group of 8 activation rows (blockIdx.y); warp w of kWarps
// takes slices [32 w / kWarps, 32 (w + 1) / kWarps) of all 16 rows, a contiguous byte range per
// row, which it stages in shared memory with cp.async (before the dependent-launch wait when the
// weights are uploaded ones: SliceArgs::w_early) from the 16-byte boundary below it. Per unit it
// then builds the A fragment from the staged codes (2-byte aligned: Q8_0 blocks are 34 bytes),
// the B fragment from the activation codes in global memory (L1: every block reads the same
// rows), runs one mma and adds each output's term into its slice partial p (Unit::acc: p =
// fma(d * a.d, s, p)), flushing p to shared memory where a slice ends (SliceWalk). After a
// barrier one thread per (weight row, activation row) adds the 32 partials in slice order from
// y = 0, then the bias.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <type_traits>

#include "backend/cuda/cuda_gemv_mma.cuh"
#include "backend/cuda/cuda_imma.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

using U = Unit<GgmlType::Q8_0>;
constexpr int kRows = 16;                        // weight rows per block: the mma's m
constexpr int kToks = 8;                         // activation rows per launch-grid row: the mma's n
constexpr int kPartFloats = 32 * kRows * kToks;  // the slice partials, [slice][row][token]
constexpr int kMaxSmem = 200 << 10;

// Bytes per staged weight row of a warp covering up to `units` units: the skew (< 16, even) plus
// the units, rounded up to an odd number of 16-byte granules so that rows g = 0..7 of an A
// fragment fall in distinct banks (the argument of cuda_mma.cu's Smem::kRawStride).
constexpr int staged_stride(int units) {
  return 16 * (((14 + U::kBlockBytes * units + 15) / 16) | 1);
}

template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32) gemv_mma_rows_kernel(SliceArgs a, int stride) {
  extern __shared__ __align__(16) uint8_t smem[];
  int64_t n_blocks = 0;
  const int64_t r0 = select_part(a, n_blocks) * kRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int n_units = static_cast<int>(a.n_in / 32);
  const int l0 = 32 * warp / kWarps, l1 = 32 * (warp + 1) / kWarps;  // this warp's slices
  const int u0 = l0 * n_units / 32, u1 = l1 * n_units / 32;          // and their units
  uint8_t* rows = smem + warp * kRows * stride;
  float* part = reinterpret_cast<float*>(smem + kWarps * kRows * stride);
  // Rows start on 16-byte boundaries (the launcher checks w and row_bytes), so every row's range
  // sits `skew` bytes into its first granule.
  const int first = U::kBlockBytes * u0, skew = first % 16;
  const int granules = (skew + U::kBlockBytes * (u1 - u0) + 15) / 16;
  const auto stage = [&] {
    if (r0 >= a.n_out) return;
    for (int i = lane; i < kRows * granules; i += 32) {
      const int r = i / granules, c = i - r * granules;
      const int64_t o = min64(r0 + r, a.n_out - 1);  // past the last row: a copy of it, unused
      cp_async16(rows + r * stride + 16 * c, a.w + o * a.row_bytes + (first - skew) + 16 * c);
    }
    cp_async_commit();
  };
  if (a.w_early) stage();
  pdl_enter();
  if (r0 >= a.n_out) return;
  if (!a.w_early) stage();
  for (int i = l0 * kRows * kToks + lane; i < l1 * kRows * kToks; i += 32) part[i] = 0.0f;  // empty
  cp_async_wait_0();
  __syncwarp();

  const int g = lane / 4, q = lane % 4;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kToks;
  const int nt = static_cast<int>(min64(kToks, a.n_tok - t0));
  // B: activation row g (zero past the last); the scales of rows 2q, 2q + 1.
  const int8_t* xg = a.xq + (t0 + min(g, nt - 1)) * a.n_in + 4 * q;
  const ActBlock* xs0 = a.xb + (t0 + min(2 * q, nt - 1)) * n_units;
  const ActBlock* xs1 = a.xb + (t0 + min(2 * q + 1, nt - 1)) * n_units;
  const uint8_t* wg = rows + g * stride + skew;  // row g's first unit (row g + 8: + 8 stride)
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  SliceWalk walk(n_units, u0);
  const auto step = [&](int u, auto a4) {  // unit u; a4: its codes are 4-byte aligned
    const uint8_t* blk = wg + U::kBlockBytes * (u - u0);  // d at 0, codes at 2
    uint32_t w[4];  // m16n8k32 A: rows g (h even) / g + 8 (odd), bytes 4q (h < 2) / 16 + 4q
#pragma unroll
    for (int h = 0; h < 4; ++h)
      w[h] = lds32_at<decltype(a4)::value>(blk + 2 + 4 * q + 16 * (h / 2) + 8 * stride * (h % 2));
    uint32_t b0 = 0, b1 = 0;
    if (g < nt) {
      b0 = __ldg(reinterpret_cast<const uint32_t*>(xg + 32 * u));
      b1 = __ldg(reinterpret_cast<const uint32_t*>(xg + 32 * u + 16));
    }
    int c[4];
    mma_k32(c, w, b0, b1);
    const float d0 = f16(lds16(blk)), d1 = f16(lds16(blk + 8 * stride));
    const ActBlock x0 = xs0[u], x1 = xs1[u];
    // Accumulators: c[0] (row g, act 2q), c[1] (g, 2q + 1), c[2] (g + 8, 2q), c[3] (g + 8, 2q + 1).
    p[0] = U::acc(p[0], d0, x0, unbias(c[0]));
    p[1] = U::acc(p[1], d0, x1, unbias(c[1]));
    p[2] = U::acc(p[2], d1, x0, unbias(c[2]));
    p[3] = U::acc(p[3], d1, x1, unbias(c[3]));
    if (walk.ends_at(u)) {
      float* pl = part + walk.last * (kRows * kToks);
      pl[g * kToks + 2 * q] = p[0];
      pl[g * kToks + 2 * q + 1] = p[1];
      pl[(g + 8) * kToks + 2 * q] = p[2];
      pl[(g + 8) * kToks + 2 * q + 1] = p[3];
      p[0] = p[1] = p[2] = p[3] = 0.0f;
    }
  };
  // 34-byte blocks: the units' codes alternate between 4- and 2-byte alignment (the same for every
  // row), so the units go in pairs whose two alignments are compile-time constants.
  const auto walk_pairs = [&](auto a4) {
    constexpr bool kFirst = decltype(a4)::value;
    int u = u0;
    for (; u + 1 < u1; u += 2) {
      step(u, std::bool_constant<kFirst>{});
      step(u + 1, std::bool_constant<!kFirst>{});
    }
    if (u < u1) step(u, std::bool_constant<kFirst>{});
  };
  if (((skew + 2) & 3) == 0)
    walk_pairs(std::true_type{});
  else
    walk_pairs(std::false_type{});
  __syncthreads();
  // y = 0, y += p_l for l = 0..31 (empty slices hold +0.0f, which changes no sum), + bias.
  for (int j = static_cast<int>(threadIdx.x); j < kRows * kToks; j += kWarps * 32) {
    const int r = j / kToks, t = j % kToks;
    if (r0 + r >= a.n_out || t >= nt) continue;
    float y = 0.0f;
#pragma unroll 8
    for (int l = 0; l < 32; ++l) y = __fadd_rn(y, part[l * (kRows * kToks) + j]);
    if (a.bias != nullptr) y = __fadd_rn(y, a.bias[r0 + r]);
    reinterpret_cast<float*>(a.y.row(t0 + t))[r0 + r] = y;
  }
}

// Warps per block: 8 for rows of 128 units or more (each warp's staged range stays small), else
// 4. The same bits either way: a slice's partial and the order of the final sum do not depend on
// which warp computed it.
int mma_rows_warps(int64_t n_units) {
  return n_units >= 128 ? 8 : 4;
}
int mma_rows_smem(int64_t n_units, int warps, int* stride) {
  *stride = staged_stride(static_cast<int>(n_units / warps + 1));
  return warps * kRows * *stride + kPartFloats * static_cast<int>(sizeof(float));
}

template <int kWarps>
void launch_rows(dim3 grid, int smem, const SliceArgs& a, int stride, Stream& stream) {
  static const bool attr = [] {  // once per kernel
    CUDA_CHECK(cudaFuncSetAttribute(gemv_mma_rows_kernel<kWarps>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    return true;
  }();
  (void)attr;
  stream.launch(gemv_mma_rows_kernel<kWarps>, grid, kWarps * 32, smem, a, stride);
}

}  // namespace

bool mma_rows_fits(const SliceArgs& a, GgmlType t, int64_t min_rows, int64_t max_rows) {
  if (t != GgmlType::Q8_0 || min_rows <= 0 || a.n_tok < min_rows || a.n_tok > max_rows ||
      a.ids != nullptr || a.split_p != nullptr || a.n_in % 32 != 0 || a.row_bytes % 16 != 0)
    return false;
  const auto aligned = [](const uint8_t* w) { return reinterpret_cast<uintptr_t>(w) % 16 == 0; };
  if (a.parts.n == 0 ? !aligned(a.w) : false) return false;
  for (int i = 0; i < a.parts.n; ++i)
    if (!aligned(a.parts.part[i].w)) return false;
  int stride = 0;
  return mma_rows_smem(a.n_in / 32, mma_rows_warps(a.n_in / 32), &stride) <= kMaxSmem;
}

void launch_mma_rows(const SliceArgs& a, Stream& stream) {
  const int64_t n_units = a.n_in / 32;
  const int warps = mma_rows_warps(n_units);
  int stride = 0;
  const int smem = mma_rows_smem(n_units, warps, &stride);
  SliceArgs b = a;
  int64_t blocks = (a.n_out + kRows - 1) / kRows;
  if (b.parts.n > 0) blocks = part_blocks(b.parts, kRows, INT64_MAX);
  const int64_t tok_groups = (a.n_tok + kToks - 1) / kToks;
  T9_CHECK(blocks <= 0x7fffffff && tok_groups <= 65535, "matmul: launch grid");
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(tok_groups));
  if (warps == 8) return launch_rows<8>(grid, smem, b, stride, stream);
  launch_rows<4>(grid, smem, b, stride, stream);
}

}  // namespace t9::cuda
