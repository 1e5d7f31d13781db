// The sliced GEMV (Q4_K, Q6_K, Q8_0 with up to kMaxTok activation rows per launch tile): the
// canonical sum order of cuda_units.cuh computed with one lane per slice, so that the
// tensor-core kernel (cuda_mma.cu) can compute the same order with a running sum.
//
// A warp owns kR weight rows at a time (grid-stride over rows; kR > 1 in the 4- and 8-row tiles
// and Q4_K's unstaged path). It copies each whole row to shared memory (the row may start on any
// 2-byte boundary: the copy starts at the 16-byte boundary below and the data sits `skew` bytes
// in), the next rows double-buffered behind them: one bulk copy per row on an mbarrier per
// buffer (SliceArgs::bulk_rows; wide rows take a single buffer), or coalesced 16-byte cp.async
// loads by every lane.
// Lane l then decodes its slice's units one after the other from shared memory (a slice is
// contiguous, so lanes read disjoint contiguous ranges) and dots each with every activation row
// of the tile (dp4a). The 32 slice partials go through shared memory and one lane per (weight
// row, activation row) adds them in slice order.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

constexpr int kSliceWarps = 4;
constexpr int kMaxSliceSmem = 200 << 10;  // dynamic shared memory limit of the GEMV kernels

// Shared bytes of one row buffer: the row, up to 15 bytes of skew, rounded to 16.
__host__ __device__ __forceinline__ int64_t row_slot(int64_t row_bytes) {
  return (row_bytes + 15 + 16) & ~int64_t{15};
}

__device__ __forceinline__ void stage_row(const SliceArgs& a, int64_t o, uint8_t* buf, int lane) {
  const uint8_t* src = a.w + o * a.row_bytes;
  const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
  const int64_t n16 = (skew + a.row_bytes + 15) / 16;
  for (int64_t i = lane; i < n16; i += 32) cp_async16(buf + 16 * i, src - skew + 16 * i);
}

// The dependent-launch wait of a kernel that read its weights early (SliceArgs::w_early): staged
// kernels have the warp's first row in flight already; unstaged ones (kBufs 0) ask L2 for rows
// o .. o + kR - 1 first.
template <int kBufs, int kR>
__device__ __forceinline__ void enter_early(const SliceArgs& a, int64_t o, int lane) {
  if (kBufs == 0 && o < a.n_out)
    prefetch_l2(a.w + o * a.row_bytes, min64(kR, a.n_out - o) * a.row_bytes, lane, 32);
  pdl_enter();
}

// Shared bytes of the staged forms' mbarriers (one per warp and buffer, SliceArgs::bulk_rows).
template <int kBufs>
constexpr int64_t kSliceBarBytes = int64_t{kSliceWarps} * kBufs * 8;

// SliceArgs::bulk_rows of a kBufs-buffer form: its form's switch (bulk_rows_on).
template <int kBufs>
bool bulk_rows_for() {
  return kBufs == 2 ? bulk_rows_on(BulkForm::kTwoBuffers)
                    : kBufs == 1 && bulk_rows_on(BulkForm::kWide);
}

// Bytes of the packed activations of one activation row: for each slice position j < J (the
// longest slice) and lane l, unit u0_l + j's activations (kXBytes) and ActBlocks, so that lane l
// reads its units' activations from consecutive shared addresses (the activations of a unit sit
// n_units / 32 units apart from lane to lane in x itself: one cache line per lane and load).
template <GgmlType T>
__host__ __device__ __forceinline__ int64_t packed_x_bytes(int64_t n_in) {
  using U = Unit<T>;
  const int64_t n_units = n_in / U::kElems, j = (n_units + 31) / 32;
  return j * 32 * (U::kXBytes + U::kActs * static_cast<int64_t>(sizeof(ActBlock)));
}
constexpr int64_t kMaxPackedX = 48 << 10;

// kBufs row buffers per warp: 2 (the next rows in flight during these) or 1 for wide rows
// (twice the warps per SM; the next rows' copy starts once these are decoded); 0: Q4_K with
// 16-byte-aligned rows, no staging: each lane loads its units straight from global memory with
// three 16-byte loads (no shared memory for weights: many more warps per SM). A warp takes kR
// rows at a time (a buffer holds kR staged rows): each activation unit it reads from shared
// memory serves all kR of them. Tiles of 4 or 8 activation rows take kR = 2 or 4 (launch_tile:
// as many as keep enough blocks per SM). On its own that bought little (a 2048 -> 12352 Q8_0
// call at 8 rows 28.5 -> 26.7 us, still ~1 TB/s: the activation reads were not its main cost,
// ncu runs 103 / 105), but it made the tiles faster than re-reading L2-resident weights once per
// activation row (tok1_max_sliced_rows below). Every output's sum is the same either way.
template <GgmlType T, int kTok, bool kPacked, int kBufs, int kR = 1>
__global__ void __launch_bounds__(kSliceWarps * 32) gemv_slice_kernel(SliceArgs a) {
  static_assert(kR * kTok <= 32, "one lane per output in the final sum");
  using U = Unit<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  // matmul_id: blockIdx.y is a pair. Only one-row kernels take pairs (launch_slice_gemv), so the
  // 4- and 8-row tiles compile no pair path (nor its route's registers).
  const bool by_pair = kTok == 1 && a.ids != nullptr;
  const bool early = stages_early(a, by_pair);
  int64_t n_blocks;
  const int64_t bx = select_part(a, n_blocks);  // first: a pair's expert offsets its part's w
  if (!early) pdl_enter();
  if (by_pair && !select_pair(a)) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t slot = row_slot(a.row_bytes);
  uint8_t* bufs = smem + warp * kBufs * kR * slot;  // buffer b, row r: bufs + (b kR + r) slot
  // Each warp's mbarriers, one per buffer (SliceArgs::bulk_rows), after the buffers.
  uint64_t* bars =
      reinterpret_cast<uint64_t*>(smem + kSliceWarps * kBufs * kR * slot) + kBufs * warp;
  float* red =
      reinterpret_cast<float*>(smem + kSliceWarps * kBufs * kR * slot + kSliceBarBytes<kBufs>);
  const bool bulk = kBufs > 0 && a.bulk_rows;
  if (bulk) {
    if (lane == 0)
      for (int b = 0; b < kBufs; ++b) mbar_init(bars + b);
    __syncwarp();
  }
  const int64_t n_units = a.n_in / U::kElems, n_pos = (n_units + 31) / 32;
  auto* xs = reinterpret_cast<int8_t*>(red + kSliceWarps * kR * kTok * 33);
  auto* as = reinterpret_cast<ActBlock*>(xs + kTok * n_pos * 32 * U::kXBytes);
  red += warp * kR * kTok * 33;
  const int64_t u0 = slice_begin(lane, n_units), u1 = slice_begin(lane + 1, n_units);
  const int64_t t0 = by_pair ? 0 : static_cast<int64_t>(blockIdx.y) * kTok;
  const int nt = static_cast<int>(min64(kTok, a.n_tok - t0));
  const int64_t stride = n_blocks * kSliceWarps * kR;
  int64_t o = (bx * kSliceWarps + warp) * kR;
  // Rows o .. o + kR - 1 into buf (rows past the end repeat the last row: computed, not stored);
  // with bulk copies, lane 0 issues one per row on bar (stage_row's layout).
  const auto stage = [&](int64_t first, uint8_t* buf, uint64_t* bar) {
    if (bulk) {
      if (lane != 0) return;
      unsigned n16[kR];
      unsigned total = 0;
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const uint8_t* src = a.w + min64(first + r, a.n_out - 1) * a.row_bytes;
        const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
        n16[r] = static_cast<unsigned>((skew + a.row_bytes + 15) / 16);
        total += 16 * n16[r];
      }
      mbar_expect(bar, total);
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const uint8_t* src = a.w + min64(first + r, a.n_out - 1) * a.row_bytes;
        bulk_copy(buf + r * slot, src - (reinterpret_cast<uintptr_t>(src) & 15), 16 * n16[r], bar);
      }
      return;
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) stage_row(a, min64(first + r, a.n_out - 1), buf + r * slot, lane);
  };
  if (kBufs > 0 && o < a.n_out) stage(o, bufs, bars);
  cp_async_commit();
  if (early) enter_early<kBufs, kR>(a, o, lane);
  if constexpr (kPacked) {  // while the first rows are in flight
    for (int64_t i = warp; i < nt * n_pos; i += kSliceWarps) {
      const int64_t t = i / n_pos, j = i % n_pos, k = (t * n_pos + j) * 32 + lane;
      if (u0 + j < u1)
        U::pack(a.xq + (t0 + t) * a.n_in, a.xb + (t0 + t) * (a.n_in / 32), u0 + j,
                xs + k * U::kXBytes, as + k * U::kActs);
    }
    __syncthreads();
  }
  if (o >= a.n_out) return;  // uniform per warp; no block barriers below
  for (int it = 0; o < a.n_out; o += stride, ++it) {
    uint8_t* buf = bufs + (kBufs == 2 ? (it & 1) * kR * slot : 0);
    if constexpr (kBufs == 2) {
      if (o + stride < a.n_out)
        stage(o + stride, bufs + ((it + 1) & 1) * kR * slot, bars + ((it + 1) & 1));
      if (bulk) {  // buffer it & 1's (it / 2)-th fill
        mbar_wait(bars + (it & 1), static_cast<unsigned>(it >> 1) & 1u);
      } else {
        cp_async_commit();
        cp_async_wait_1();
      }
    } else if constexpr (kBufs == 1) {
      if (bulk)  // the buffer's it-th fill
        mbar_wait(bars, static_cast<unsigned>(it) & 1u);
      else
        cp_async_wait_0();
    }
    __syncwarp();
    // Staged row r: skew[r] bytes into its slot of buf (stage_row's layout).
    int skew[kR];
    const uint8_t* rows[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const uint8_t* src = a.w + min64(o + r, a.n_out - 1) * a.row_bytes;
      skew[r] = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
      rows[r] = buf + r * slot + skew[r];
    }
    float p[kR][kTok];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int t = 0; t < kTok; ++t) p[r][t] = 0.0f;
#pragma unroll(kBufs == 0 ? 4 : 2)  // several units' loads in flight (a slice: up to ~14 units)
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t blk = (u / U::kPerBlock) * U::kBlockBytes;
      const int part = static_cast<int>(u % U::kPerBlock);
      typename U::W wu[kR];
      const uint8_t* blk0 = a.w + o * a.row_bytes + blk;  // (kBufs 0: straight from global memory)
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        if constexpr (kBufs == 0)  // rows past the end repeat the last row (not stored)
          wu[r] = load_q4k_16<true>(blk0 + (min64(o + r, a.n_out - 1) - o) * a.row_bytes, part);
        else if constexpr (T == GgmlType::Q4_K)  // 16-byte loads where aligned (same W)
          wu[r] =
              skew[r] == 0 ? load_q4k_16<false>(rows[r] + blk, part) : U::load(rows[r] + blk, part);
        else
          wu[r] = U::load(rows[r] + blk, part);
      }
#pragma unroll
      for (int t = 0; t < kTok; ++t) {
        if (t >= nt) break;
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          if constexpr (kPacked) {
            const int64_t k = (t * n_pos + (u - u0)) * 32 + lane;
            p[r][t] = U::acc_at(p[r][t], wu[r], xs + k * U::kXBytes, as + k * U::kActs);
          } else {
            p[r][t] = U::acc(p[r][t], wu[r], a.xq + (t0 + t) * a.n_in,
                             a.xb + (t0 + t) * (a.n_in / 32), u);
          }
        }
      }
    }
    if constexpr (kBufs == 1) {  // the buffer is free: the next rows' copy overlaps the sum
      __syncwarp();
      if (o + stride < a.n_out) stage(o + stride, bufs, bars);
      cp_async_commit();
    }
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int t = 0; t < kTok; ++t) red[(r * kTok + t) * 33 + lane] = p[r][t];
    __syncwarp();
    const int r = lane / kTok, t = lane % kTok;  // this lane's output: row o + r, token t
    if (r < kR && t < nt && o + r < a.n_out) {
      float s = 0.0f;
#pragma unroll 8
      for (int l = 0; l < 32; ++l) s = __fadd_rn(s, red[lane * 33 + l]);
      float* yr = reinterpret_cast<float*>(a.y.row(t0 + t));
      yr[o + r] = a.bias != nullptr ? __fadd_rn(s, a.bias[o + r]) : s;
    }
    __syncwarp();  // buf and red are reused by the next row
  }
}

// One activation row, the same bits as gemv_slice_kernel by another route: a unit's dot is a pure
// function of the unit, so lanes compute the dots in the coalesced layout (lane l: units l,
// l + 32, ..., activations straight from global memory, consecutive across the warp), park them
// in shared memory, and only the sums follow the slices: lane l adds the dots of slice l in
// order, then one lane per row adds the 32 partials. kBufs and kR as in gemv_slice_kernel.
//
// Registers: left to itself ptxas gives these kernels 104-176 per thread, which leaves 3-4 blocks
// (12-16 warps) per SM, and each warp has loads in flight only between its row's sums. kMinB > 0
// asks for kMinB blocks per SM (kCoalMinBlocks by default: <= 80 registers for the staged rows,
// 96 for Q4_K's unstaged form, whose grouped loads (decode_q4k) spill 72 bytes at 80; the wide
// rows' single buffer allows only 4 blocks by shared memory anyway). Run 124, graph replays:
// Q4_K 4096 -> 24576 31.2 -> 24.0 us, 12288 -> 4096 22.7 -> 17.7, 4096 -> 4096 9.9 -> 7.4; Q6_K
// 4096 -> 151936 203.4 -> 197.9; Qwen3-8B decode 233-236 -> 255-257 tok/s. 6 blocks beat 8 (64
// registers, 12 bytes of spills) in every GEMV shape (run 123).
template <int kBufs>
constexpr int kCoalMinBlocks = kBufs == 1   ? 4
                               : kBufs == 0 ? 5
                                            : 6;

template <GgmlType T, int kBufs, int kR, int kMinB>
__global__ void __launch_bounds__(kSliceWarps * 32, kMinB > 0 ? kMinB : 1)
    gemv_coal_kernel(SliceArgs a) {
  static_assert(kBufs == 0 || kR == 1, "staged kernels take one row per warp");
  static_assert(T != GgmlType::Q8_0, "Q8_0's canonical acc is not p + a pure unit dot");
  using U = Unit<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  const bool by_pair = a.ids != nullptr;  // matmul_id: blockIdx.y is a pair
  const bool early = stages_early(a, by_pair);
  int64_t n_blocks;
  const int64_t bx = select_part(a, n_blocks);  // first: a pair's expert offsets its part's w
  if (!early) pdl_enter();
  if (by_pair && !select_pair(a)) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t slot = row_slot(a.row_bytes);
  const int64_t n_units = a.n_in / U::kElems;
  uint8_t* bufs = smem + warp * kBufs * slot;
  // Each warp's mbarriers, one per buffer (SliceArgs::bulk_rows), then the dots.
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kSliceWarps * kBufs * slot) + kBufs * warp;
  float* dots =
      reinterpret_cast<float*>(smem + kSliceWarps * kBufs * slot + kSliceBarBytes<kBufs>) +
      warp * (kR * n_units + kR * 33);
  float* red = dots + kR * n_units;
  const int64_t u0 = slice_begin(lane, n_units), u1 = slice_begin(lane + 1, n_units);
  const int64_t stride = n_blocks * kSliceWarps * kR;
  int64_t o = (bx * kSliceWarps + warp) * kR;
  if (o >= a.n_out) return;  // uniform per warp; no block barriers
  const bool bulk = kBufs > 0 && a.bulk_rows;
  if (bulk && lane == 0)
    for (int b = 0; b < kBufs; ++b) mbar_init(bars + b);
  __syncwarp();
  // Row r into buf: one bulk copy on bar (lane 0), or every lane's cp.async (stage_row's layout).
  const auto stage = [&](int64_t r, uint8_t* buf, uint64_t* bar) {
    if (!bulk) return stage_row(a, r, buf, lane);
    if (lane != 0) return;
    const uint8_t* src = a.w + r * a.row_bytes;
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    const auto bytes = static_cast<unsigned>(16 * ((skew + a.row_bytes + 15) / 16));
    mbar_expect(bar, bytes);
    bulk_copy(buf, src - skew, bytes, bar);
  };
  if (kBufs > 0) stage(o, bufs, bars);
  cp_async_commit();
  if (early) enter_early<kBufs, kR>(a, o, lane);
  for (int it = 0; o < a.n_out; o += stride, ++it) {
    uint8_t* buf = bufs + (kBufs == 2 ? (it & 1) * slot : 0);
    if constexpr (kBufs == 2) {
      if (o + stride < a.n_out)
        stage(o + stride, bufs + ((it + 1) & 1) * slot, bars + ((it + 1) & 1));
      if (bulk) {  // buffer it & 1's (it / 2)-th fill
        mbar_wait(bars + (it & 1), static_cast<unsigned>(it >> 1) & 1u);
      } else {
        cp_async_commit();
        cp_async_wait_1();
      }
    } else if constexpr (kBufs == 1) {
      if (bulk)  // the buffer's it-th fill
        mbar_wait(bars, static_cast<unsigned>(it) & 1u);
      else
        cp_async_wait_0();
    }
    __syncwarp();
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(a.w + o * a.row_bytes) & 15);
    const uint8_t* row = kBufs == 0 ? a.w + o * a.row_bytes : buf + skew;
#pragma unroll 2
    for (int64_t u = lane; u < n_units; u += 32) {
      const uint8_t* blk = row + (u / U::kPerBlock) * U::kBlockBytes;
      const int part = static_cast<int>(u % U::kPerBlock);
      typename U::W wu[kR];
      if constexpr (kBufs == 0) {  // every row's loads, then the decodes (decode_q4k)
        Q4kRaw raw[kR];
#pragma unroll
        for (int r = 0; r < kR; ++r)  // rows past the end repeat the last row (not stored)
          raw[r] = load_q4k_raw<true>(blk + (min64(o + r, a.n_out - 1) - o) * a.row_bytes, part);
#pragma unroll
        for (int r = 0; r < kR; ++r) wu[r] = decode_q4k<true>(raw[r], part);
      } else if constexpr (T == GgmlType::Q4_K) {
        wu[0] = skew == 0 ? load_q4k_16<false>(blk, part) : U::load(blk, part);
      } else {
        wu[0] = U::load(blk, part);
      }
#pragma unroll
      for (int r = 0; r < kR; ++r) dots[r * n_units + u] = U::dot(wu[r], a.xq, a.xb, u);
    }
    __syncwarp();
    if constexpr (kBufs == 1) {  // the buffer is free: the next row's copy overlaps the sums
      if (o + stride < a.n_out) stage(o + stride, bufs, bars);
      cp_async_commit();
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      float p = 0.0f;
      for (int64_t u = u0; u < u1; ++u) p = __fadd_rn(p, dots[r * n_units + u]);
      red[r * 33 + lane] = p;
    }
    __syncwarp();
    if (lane < kR && o + lane < a.n_out) {
      float s = 0.0f;
#pragma unroll 8
      for (int l = 0; l < 32; ++l) s = __fadd_rn(s, red[lane * 33 + l]);
      float* yr = reinterpret_cast<float*>(a.y.row(0));
      yr[o + lane] = a.bias != nullptr ? __fadd_rn(s, a.bias[o + lane]) : s;
    }
    __syncwarp();  // buf, dots and red are reused by the next row
  }
}

// Short rows (at most kLanes units: a Q8_0 row of up to 512 inputs, Q4_K / Q6_K up to 1024 with
// kLanes 16; the MoE experts' down projections), one activation row per grid row: a warp takes
// 32 / kLanes consecutive weight rows at a time, lane group g = lane / kLanes row o + g, lane j of
// the group unit j. Every slice of such a row holds at most one unit, so the canonical sum (top of
// cuda_units.cuh) is the units' partials acc(0, u) added in unit order: the group adds them down
// a shuffle chain. gemv_slice_kernel leaves half a warp idle on a 16-unit row and pays its 32-step
// final sum per row; here every lane has a unit and the sum is shared by the rows of the warp
// (the 8 agents' expert down projection, 64 pairs of 2048 x 512 Q8_0: 56.6 -> 27.7 us, run 75). The
// warp's rows are one contiguous run of bytes, staged by one bulk copy on an mbarrier per buffer
// (SliceArgs::bulk_rows) or by every lane's 16-byte cp.async, the next run in flight behind this
// one.
template <GgmlType T, int kLanes>
__global__ void __launch_bounds__(kSliceWarps * 32) gemv_short_kernel(SliceArgs a) {
  using U = Unit<T>;
  constexpr int kRows = 32 / kLanes;  // weight rows per warp and step
  extern __shared__ __align__(16) uint8_t smem[];
  const bool by_pair = a.ids != nullptr;
  const bool early = stages_early(a, by_pair);
  int64_t n_blocks;
  const int64_t bx = select_part(a, n_blocks);
  if (!early) pdl_enter();
  if (by_pair) {
    if (!select_pair(a)) return;
  } else {  // grid row t: activation row t
    const int64_t t = blockIdx.y;
    a.xq += t * a.n_in;
    a.xb += t * (a.n_in / 32);
    a.y.base = a.y.row(t);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / kLanes, j = lane % kLanes;
  const int n_units = static_cast<int>(a.n_in / U::kElems);
  const int64_t run_bytes = kRows * a.row_bytes;
  const int64_t slot = row_slot(run_bytes);
  uint8_t* bufs = smem + warp * 2 * slot;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kSliceWarps * 2 * slot) + 2 * warp;
  if (a.bulk_rows) {
    if (lane == 0) mbar_init(bars), mbar_init(bars + 1);
    __syncwarp();
  }
  const int64_t stride = n_blocks * kSliceWarps * kRows;
  int64_t o = (bx * kSliceWarps + warp) * kRows;
  // Rows o .. o + kRows - 1 (those below n_out) into buf, `skew` bytes in (stage_row's layout).
  const auto stage = [&](int64_t first, uint8_t* buf, uint64_t* bar) {
    const uint8_t* src = a.w + first * a.row_bytes;
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    const int64_t n16 = (skew + min64(kRows, a.n_out - first) * a.row_bytes + 15) / 16;
    if (a.bulk_rows) {
      if (lane == 0) {
        mbar_expect(bar, static_cast<unsigned>(16 * n16));
        bulk_copy(buf, src - skew, static_cast<unsigned>(16 * n16), bar);
      }
      return;
    }
    for (int64_t i = lane; i < n16; i += 32) cp_async16(buf + 16 * i, src - skew + 16 * i);
  };
  if (o < a.n_out) stage(o, bufs, bars);
  cp_async_commit();
  if (early) enter_early<2, 1>(a, o, lane);
  if (o >= a.n_out) return;  // uniform per warp; no block barriers
  for (int it = 0; o < a.n_out; o += stride, ++it) {
    uint8_t* buf = bufs + (it & 1) * slot;
    if (o + stride < a.n_out)
      stage(o + stride, bufs + ((it + 1) & 1) * slot, bars + ((it + 1) & 1));
    if (a.bulk_rows) {  // buffer it & 1's (it / 2)-th fill
      mbar_wait(bars + (it & 1), static_cast<unsigned>(it >> 1) & 1u);
    } else {
      cp_async_commit();
      cp_async_wait_1();
    }
    __syncwarp();
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(a.w + o * a.row_bytes) & 15);
    const int64_t r = o + g;
    const float y = short_row_dot<T, kLanes>(r < a.n_out ? buf + skew + g * a.row_bytes : nullptr,
                                             a.xq, a.xb, n_units, lane);
    if (j == 0 && r < a.n_out) {
      float* yr = reinterpret_cast<float*>(a.y.row(0));
      yr[r] = a.bias != nullptr ? __fadd_rn(y, a.bias[r]) : y;
    }
    __syncwarp();  // buf is restaged two steps on
  }
}

// Rows per warp of the unstaged Q4_K path for 1-4 activation rows (TEMPO9_CUDA_Q4K_ROWS=1|2,
// read once; default 2). The same bits either way.
int q4k_rows() {
  static const int n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_Q4K_ROWS");
    return e != nullptr && e[0] == '1' ? 1 : 2;
  }();
  return n;
}

// Blocks along the weight rows: one warp per kR rows, capped at what stays resident (with
// parts: shared among them, a.parts.block_first filled). A matmul_id launch has one grid row per
// pair: there the cap is shared by the pairs, so each warp walks several rows (the next row's
// copy in flight behind this one) instead of paying the block's set-up (pair lookup, activation
// packing) for one short row (512-input expert rows, 64 pairs on the H200: 85 -> 62.5 us;
// 2048-input rows 30 -> 28 us).
template <auto kKernel>
int64_t pair_blocks(SliceArgs& a, int smem, int rows_per_warp, int64_t grid_rows) {
  const int64_t rows_per_block = kSliceWarps * rows_per_warp;
  const int64_t needed = (a.n_out + rows_per_block - 1) / rows_per_block;
  const int64_t resident =
      resident_blocks<kKernel>(kSliceWarps * 32, smem, kMaxSliceSmem, INT64_MAX);
  if (a.parts.n > 0) return part_blocks(a.parts, rows_per_block, resident / grid_rows);
  if (a.ids == nullptr) return std::min(needed, resident);
  return std::max<int64_t>(1, std::min(needed, resident / grid_rows));
}

// Shared memory of a gemv_slice_kernel block: kBufs buffers of kR staged rows and the partials'
// kR x kTok x 33 floats per warp, then the packed activations.
template <GgmlType T, int kTok, bool kPacked, int kBufs, int kR>
int64_t slice_smem(const SliceArgs& a) {
  return kSliceWarps * (kBufs * kR * row_slot(a.row_bytes) + kR * kTok * 33 * 4) +
         kSliceBarBytes<kBufs> + (kPacked ? kTok * packed_x_bytes<T>(a.n_in) : 0);
}

// Weight rows per warp of the staged 4- and 8-row tiles: 4 while a block stays within
// kTile4Smem (three blocks per SM: 228 KB less 1 KB per block), else 2 within kTileRowsSmem (two
// blocks), else 1; TEMPO9_CUDA_SLICE_ROWS=1|2|4 (read once) caps it, for A/B runs. The same bits
// either way. The tiles are latency-bound (ncu run 109, the 35B's DeltaNet in-projection at 8
// rows: 2 warps per scheduler, 0.33 eligible, 7 cycles per instruction), so a third block per SM
// beats twice the rows per warp: that call 24 -> 19.4 us with kR 2 (three blocks of 64 KB)
// instead of 4 (two of 107.5 KB); 8 agents' ITL 7.9 -> 7.6-7.7 ms, 4 agents' 5.6 -> 5.3 (run
// 112, where kR 4 had the 110 KB bound too).
constexpr int64_t kTile4Smem = 75 << 10;
constexpr int64_t kTileRowsSmem = 110 << 10;
int slice_rows_cap() {
  static const int n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_SLICE_ROWS");
    const int v = e != nullptr ? std::atoi(e) : 4;
    return v >= 4 ? 4 : v >= 2 ? 2 : 1;
  }();
  return n;
}

template <GgmlType T, int kTok, bool kPacked, int kBufs, int kR = 1>
void launch_tile(const SliceArgs& a, Stream& stream) {
  constexpr auto kernel = gemv_slice_kernel<T, kTok, kPacked, kBufs, kR>;
  const int64_t smem64 = slice_smem<T, kTok, kPacked, kBufs, kR>(a);
  T9_CHECK(smem64 <= kMaxSliceSmem,
           "matmul: weight rows of {} bytes exceed the GEMV's shared memory", a.row_bytes);
  const int smem = static_cast<int>(smem64);
  const int64_t tok_groups = kTok == 1 ? one_row_grid_rows(a) : (a.n_tok + kTok - 1) / kTok;
  T9_CHECK(tok_groups <= 65535, "matmul: {} activation rows exceed the launch grid", a.n_tok);
  SliceArgs b = a;
  // The staged forms copy rows in bulk (run 178, two buffers: 35B single decode 375 / 378
  // against 362-368 tok/s, 8 agents 51.8k against 51.0k; run 179: the other forms even).
  b.bulk_rows = bulk_rows_for<kBufs>();
  const int64_t blocks = pair_blocks<kernel>(b, smem, kR, a.ids != nullptr ? tok_groups : 1);
  stream.launch(kernel, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(tok_groups)),
                kSliceWarps * 32, smem, b);
}

// Activations packed per lane in shared memory when they fit (always for one row and n_in up
// to ~90k; for tiles of 4 or 8 rows when n_in is small enough).
template <GgmlType T, int kTok>
void launch_tile(const SliceArgs& a, Stream& stream) {
  const bool packed = kTok * packed_x_bytes<T>(a.n_in) <= kMaxPackedX ||
                      (kTok == 1 && packed_x_bytes<T>(a.n_in) <= (96 << 10));
  // Rows over 4 KB (n_in > ~7k for Q4_K) take one buffer per warp. Aligned Q4_K rows: no
  // staging (TEMPO9_CUDA_Q4K_STAGED=1, read once: staged like the other types).
  const bool wide = a.row_bytes > (4 << 10);
  static const bool q4k_staged = std::getenv("TEMPO9_CUDA_Q4K_STAGED") != nullptr;
  if constexpr (T == GgmlType::Q4_K) {
    if (packed && !q4k_staged && a.row_bytes % 16 == 0 &&
        reinterpret_cast<uintptr_t>(a.w) % 16 == 0) {
      if (kTok <= 4 && q4k_rows() == 2) return launch_tile<T, kTok, true, 0, 2>(a, stream);
      return launch_tile<T, kTok, true, 0>(a, stream);
    }
  }
  const auto staged = [&](auto packed_c, auto bufs_c) {
    constexpr bool kP = decltype(packed_c)::value;
    constexpr int kB = decltype(bufs_c)::value;
    // One Q8_0 row (not by pair): two weight rows per warp where three blocks per SM fit, the
    // activation units read once for both (run 125: 2048 -> 151936 92.5-93.8 -> 88.2 us,
    // 2048 -> 12288 11.8-12.3 -> 11.4-11.9, the others 0-4%; 35B decode within its noise).
    // Expert pairs too (run 169): a pair's warps wait for the route before their first copy, so
    // each row a warp walks is a DRAM round trip in series; two rows per warp halve them.
    // TEMPO9_CUDA_TOK1_ROWS2=0 / TEMPO9_CUDA_PAIR_ROWS2=0 (read once): one row for plain rows /
    // pairs. The same bits either way.
    if constexpr (kTok == 1 && T == GgmlType::Q8_0) {
      static const bool one = env_off("TEMPO9_CUDA_TOK1_ROWS2");
      static const bool pair_one = env_off("TEMPO9_CUDA_PAIR_ROWS2");
      if (!(a.ids == nullptr ? one : pair_one) && slice_smem<T, 1, kP, kB, 2>(a) <= kTile4Smem)
        return launch_tile<T, 1, kP, kB, 2>(a, stream);
    }
    if constexpr (kTok > 1) {
      const int cap = slice_rows_cap();
      if (cap >= 4 && slice_smem<T, kTok, kP, kB, 4>(a) <= kTile4Smem)
        return launch_tile<T, kTok, kP, kB, 4>(a, stream);
      if (cap >= 2 && slice_smem<T, kTok, kP, kB, 2>(a) <= kTileRowsSmem)
        return launch_tile<T, kTok, kP, kB, 2>(a, stream);
    }
    launch_tile<T, kTok, kP, kB, 1>(a, stream);
  };
  using True = std::true_type;
  using False = std::false_type;
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (packed) return wide ? staged(True{}, One{}) : staged(True{}, Two{});
  wide ? staged(False{}, One{}) : staged(False{}, Two{});
}

template <GgmlType T, int kBufs, int kR, int kMinB>
void launch_coal_with(const SliceArgs& a, Stream& stream) {
  constexpr auto kernel = gemv_coal_kernel<T, kBufs, kR, kMinB>;
  const int64_t n_units = a.n_in / Unit<T>::kElems;
  const int64_t smem64 =
      kSliceWarps * (kBufs * row_slot(a.row_bytes) + 4 * (kR * n_units + kR * 33)) +
      kSliceBarBytes<kBufs>;
  T9_CHECK(smem64 <= kMaxSliceSmem,
           "matmul: weight rows of {} bytes exceed the GEMV's shared memory", a.row_bytes);
  const int smem = static_cast<int>(smem64);
  const int64_t pairs = a.ids != nullptr ? one_row_grid_rows(a) : 1;
  T9_CHECK(pairs <= 65535, "matmul_id: {} pairs exceed the launch grid", pairs);
  SliceArgs b = a;
  b.bulk_rows = bulk_rows_for<kBufs>();
  const int64_t blocks = pair_blocks<kernel>(b, smem, kR, pairs);
  stream.launch(kernel, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(pairs)),
                kSliceWarps * 32, smem, b);
}

// gemv_coal_kernel with its register bound (kCoalMinBlocks). TEMPO9_CUDA_COAL_MINB (read once;
// A/B runs): 0 = no bound; 6 = six blocks per SM for the unstaged Q4_K rows too. The same bits.
template <GgmlType T, int kBufs, int kR>
void launch_coal(const SliceArgs& a, Stream& stream) {
  static const int minb = [] {
    const char* e = std::getenv("TEMPO9_CUDA_COAL_MINB");
    return e != nullptr ? std::atoi(e) : -1;
  }();
  if (minb == 0) return launch_coal_with<T, kBufs, kR, 0>(a, stream);
  if constexpr (kBufs == 0) {
    if (minb == 6) return launch_coal_with<T, kBufs, kR, 6>(a, stream);
  }
  launch_coal_with<T, kBufs, kR, kCoalMinBlocks<kBufs>>(a, stream);
}

// Short rows (gemv_short_kernel) for one activation row per grid row: rows of at most 16 units
// unless TEMPO9_CUDA_SHORT_ROWS=0 (read once). The same bits either way.
template <GgmlType T>
bool try_short(const SliceArgs& a, Stream& stream) {
  static const bool off = env_off("TEMPO9_CUDA_SHORT_ROWS");
  const int64_t n_units = a.n_in / Unit<T>::kElems;
  if (off || n_units > 16) return false;
  const auto go = [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    constexpr auto kernel = gemv_short_kernel<T, kLanes>;
    const int smem =
        static_cast<int>(kSliceWarps * 2 * row_slot(32 / kLanes * a.row_bytes) + kSliceBarBytes<2>);
    const int64_t grid_rows = one_row_grid_rows(a);
    T9_CHECK(grid_rows <= 65535, "matmul: {} activation rows exceed the launch grid", grid_rows);
    SliceArgs b = a;
    b.bulk_rows = bulk_rows_on(BulkForm::kShort);
    const int64_t blocks = pair_blocks<kernel>(b, smem, 32 / kLanes, grid_rows);
    stream.launch(kernel, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(grid_rows)),
                  kSliceWarps * 32, smem, b);
  };
  if (n_units > 8)
    go(std::integral_constant<int, 16>{});
  else
    go(std::integral_constant<int, 8>{});
  return true;
}

// One Q4_K / Q6_K activation row through gemv_coal_kernel unless TEMPO9_CUDA_GEMV_SLICED=1
// (read once). Q8_0 keeps gemv_slice_kernel: faster there on the H200 (run 14: 4096x14336 25.3
// vs 27.9 us, 14336x4096 30.5 vs 33.9), slower for Q4_K (21.6 vs 20.2, 27.5 vs 18.6) and Q6_K
// (30.7 vs 29.9, 37.4 vs 32.6). The same bits either way. (Q8_0 could not take it now: its
// canonical acc fuses into the slice partial, cuda_units.cuh.)
template <GgmlType T>
bool try_coal(const SliceArgs& a, Stream& stream) {
  static const bool off = std::getenv("TEMPO9_CUDA_GEMV_SLICED") != nullptr;
  if (off || (a.n_tok != 1 && a.ids == nullptr)) return false;
  if constexpr (T == GgmlType::Q8_0) {
    return false;
  } else {
    if constexpr (T == GgmlType::Q4_K) {
      static const bool q4k_staged = std::getenv("TEMPO9_CUDA_Q4K_STAGED") != nullptr;
      if (!q4k_staged && a.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0) {
        launch_coal<T, 0, 2>(a, stream);
        return true;
      }
    }
    if (a.row_bytes > (4 << 10))
      launch_coal<T, 1, 1>(a, stream);
    else
      launch_coal<T, 2, 1>(a, stream);
    return true;
  }
}

// Activation rows up to which the sliced types take tok1_max_weight_bytes' one row per grid row
// (TEMPO9_CUDA_TOK1_SLICED_ROWS overrides, read once). Since the tiles stage several weight rows
// per warp, 8 rows over L2-resident weights are faster as one tile (ncu run 105, 35B at 8 rows:
// the 4096 -> 2048 Q8_0 23.6 -> 13.1 us, 2048 -> 9216 40.3 -> 17.8 us); the float kernels keep
// the bound at 8 rows (their router took 5.1 us per row and 22.4 us as a tile).
int64_t tok1_max_sliced_rows() {
  static const int64_t n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_TOK1_SLICED_ROWS");
    return e != nullptr ? std::atoll(e) : int64_t{2};
  }();
  return n;
}

}  // namespace

template <GgmlType T>
void launch_slice_gemv(const SliceArgs& a, Stream& stream) {
  const bool l2_weights =
      a.n_tok <= tok1_max_sliced_rows() && weight_rows(a) * a.row_bytes <= tok1_max_weight_bytes();
  const bool row_per_grid_row = a.n_tok == 1 || a.ids != nullptr || l2_weights;
  if (row_per_grid_row && try_short<T>(a, stream)) return;
  if (try_coal<T>(a, stream)) return;
  if (row_per_grid_row) return launch_tile<T, 1>(a, stream);
  if (a.n_tok <= 4) return launch_tile<T, 4>(a, stream);
  launch_tile<T, 8>(a, stream);
}

template void launch_slice_gemv<GgmlType::Q4_K>(const SliceArgs&, Stream&);
template void launch_slice_gemv<GgmlType::Q6_K>(const SliceArgs&, Stream&);
template void launch_slice_gemv<GgmlType::Q3_K>(const SliceArgs&, Stream&);
template void launch_slice_gemv<GgmlType::Q5_K>(const SliceArgs&, Stream&);
template void launch_slice_gemv<GgmlType::Q8_0>(const SliceArgs&, Stream&);

}  // namespace t9::cuda
