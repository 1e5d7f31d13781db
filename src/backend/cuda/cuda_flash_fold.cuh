// Internal to the tensor-core attention (cuda_flash_attention.cu, cuda_flash_combine.cu): the
// split form's partials, the left fold over 128-key chunks that the attention kernel's blocks and
// the combine kernel both run (the same operations in the same order: the same bits), the row's
// last block's fold of them, and the combine kernel's launcher.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_flash_attention.cuh"

namespace t9::cuda {

// Keys per fold unit (absolute positions: a multiple of tiles). It trades a decode block's serial
// chain of tiles (2 or 4 tiles at 128 keys) against the prefill fold's read-modify-write of `out`
// (once per chunk) and the split partials' size.
// 256 (run 87): prefill attention 1.3-1.6x faster (2048 rows over 12k: 9.75 -> 6.04 ms; fold's
// read-modify-write of `out` and the split partials halve), 8 agents 35.8k -> 38.6k effective
// tok/s, but one decode row at 640 keys 23.4 -> 34.9 us and 35B single decode 273 -> 258 tok/s.
constexpr int kChunkKeys = 128;

// ---- the split form's partials ----

// Floats per (row, head, chunk) partial: head_dim accumulators, m, l, and two unused, so that
// every partial starts on a 16-byte boundary.
__host__ __device__ constexpr int part_stride(int head_dim) {
  return head_dim + 4;
}
// Where dim d of a partial's accumulator sits: the kernel writes each lane's two n-tiles (dims
// 16j + 2q, +1 and 16j + 8 + 2q, +1 for lane q = lane % 4) as one float4 at 16j + 4q (half the
// store instructions of one float2 per n-tile: the partial stores throttled the 160-row split
// calls, ncu run 97); the combine reads dim d from here.
__device__ __forceinline__ int part_pos(int d) {
  const int w = d % 16;
  return d - w + 4 * ((w % 8) / 2) + 2 * (w / 8) + w % 2;
}

// ---- the fold (shared by the block-local path and the combine kernel: same bits) ----

// Merges a chunk's (m, l) into the running (M, L); fa and fb scale the running and the chunk's
// accumulators. A chunk with no visible key (m = -inf) must be skipped by the caller.
__device__ __forceinline__ void fold_chunk(float& M, float& L, float m, float l, float& fa,
                                           float& fb) {
  const float mn = fmaxf(M, m);
  fa = M == -INFINITY ? 0.0f : expf(__fsub_rn(M, mn));
  fb = expf(__fsub_rn(m, mn));
  L = __fadd_rn(__fmul_rn(L, fa), __fmul_rn(l, fb));
  M = mn;
}
__device__ __forceinline__ float fold_acc(float A, float a, float fa, float fb) {
  return __fadd_rn(__fmul_rn(A, fa), __fmul_rn(a, fb));
}

// Output row `row` = q row * n_head + head of out ([rows, n_head, head_dim], the launcher checks
// three dimensions): one 32-bit division where TensorDesc::row(int64_t) would take 64-bit ones.
__device__ __forceinline__ float* out_row(const FlashArgs& a, int row) {
  const int q_row = a.heads.div(row), head = row - q_row * a.n_head;
  return reinterpret_cast<float*>(a.out.row(head, q_row));
}

// The gate row of output row `row` (FlashArgs::gate), as out_row.
__device__ __forceinline__ const float* gate_row(const FlashArgs& a, int row) {
  const int q_row = a.heads.div(row), head = row - q_row * a.n_head;
  return reinterpret_cast<const float*>(a.gate.row(head, q_row));
}

// mul_sigmoid_kernel's expression: the attention's float times the gate's sigmoid.
__device__ __forceinline__ float gated(float v, float g) {
  return v * sigmoid(g);
}

// ---- the split form's partials folded by the row's last block ----

// Chunks a split call may have and still fold in the kernel (FlashArgs::counters): one warp
// folds a (row, head), a chunk per lane for the prefix max, so past 32 chunks a row's fold
// (serial on one warp, after the row's last chunk) would cost more than the combine launch.
constexpr int kInKernelFoldChunks = 32;

// flash_combine_kernel's fold of row r, head h (chunks c0 .. c1 <= c0 + 31 of part), on one warp:
// lane l owns dims l + 32 e. Chunk c's factors come from the max of the earlier chunks' m (lane
// c's exclusive prefix max, fmaxf being exact and order-free), L's chain and each dim's fold run
// in chunk order with fold_chunk's / fold_acc's operations: the combine kernel's bits. Partials
// are read through L2 (__ldcg): other blocks wrote them during this launch.
template <int HD>
__device__ void fold_row_warp(const float* __restrict__ part, const FlashArgs& a, int r, int h,
                              int n_chunks, int c0, int c1, int lane) {
  constexpr int kE = HD / 32;                // dims per lane
  constexpr int kLoads = HD == 256 ? 4 : 8;  // chunks whose partials are in flight at once
  const float* pr = part + (static_cast<int64_t>(r) * a.n_head + h) * n_chunks * part_stride(HD);
  const bool gate = a.gate.base != nullptr;
  float g[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e)
    g[e] = gate ? reinterpret_cast<const float*>(a.gate.row(h, r))[lane + 32 * e] : 0.0f;
  const int nb = c1 + 1 - c0;  // <= kInKernelFoldChunks (the launcher's condition)
  float mc = -INFINITY, lc = 0.0f;
  if (lane < nb) {
    mc = __ldcg(pr + (c0 + lane) * part_stride(HD) + HD);
    lc = __ldcg(pr + (c0 + lane) * part_stride(HD) + HD + 1);
  }
  float incl = mc;  // max over chunks c0 .. c0 + lane
#pragma unroll
  for (int k = 1; k < 32; k *= 2) {
    const float o = __shfl_up_sync(0xffffffffu, incl, k);
    if (lane >= k) incl = fmaxf(incl, o);
  }
  const float up = __shfl_up_sync(0xffffffffu, incl, 1);
  const float before = lane > 0 ? up : -INFINITY;  // max over the chunks before this lane's
  float fa = 0.0f, fb = 0.0f;
  if (lane < nb && mc != -INFINITY) {
    const float mn = fmaxf(before, mc);
    fa = before == -INFINITY ? 0.0f : expf(__fsub_rn(before, mn));
    fb = expf(__fsub_rn(mc, mn));
  }
  float L = 0.0f, A[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) A[e] = 0.0f;
  for (int c = 0; c < nb; c += kLoads) {
    float p[kLoads][kE];
#pragma unroll
    for (int k = 0; k < kLoads; ++k)
#pragma unroll
      for (int e = 0; e < kE; ++e)
        p[k][e] = c + k < nb ? __ldcg(pr + (c0 + c + k) * part_stride(HD) + part_pos(lane + 32 * e))
                             : 0.0f;
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const int src = min(c + k, 31);  // past nb: not used
      const float mk = __shfl_sync(0xffffffffu, mc, src);
      const float fak = __shfl_sync(0xffffffffu, fa, src);
      const float fbk = __shfl_sync(0xffffffffu, fb, src);
      const float lk = __shfl_sync(0xffffffffu, lc, src);
      if (c + k >= nb || mk == -INFINITY) continue;  // uniform
      L = __fadd_rn(__fmul_rn(L, fak), __fmul_rn(lk, fbk));
#pragma unroll
      for (int e = 0; e < kE; ++e) A[e] = fold_acc(A[e], p[k][e], fak, fbk);
    }
  }
  float* o = reinterpret_cast<float*>(a.out.row(h, r));
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    const float q = __fdiv_rn(A[e], L);
    const float v = gate ? gated(q, g[e]) : q;
    o[lane + 32 * e] = v;
    if (a.out_q != nullptr) {  // dims 32 e .. 32 e + 31: one block of out's codes
      const int64_t b0 = (static_cast<int64_t>(r) * a.n_head + h) * HD + 32 * e;
      quantize_value(v, lane, a.out_q + b0, a.out_b + b0 / 32);
    }
  }
}

// The split form's in-kernel fold (FlashArgs::counters), after a block has stored its partials
// of chunk `chunk` for a tile's query rows (batch row qrow[i], position pos[i], i < n_rows, in
// shared memory): each row whose range holds the chunk counts it on its (row, KV head) counter,
// and the block that counts a row's last chunk zeroes the counter and folds the row's partials
// into out (fold_row_warp: a (row, head) a warp). Release / acquire through each row's counter:
// the barrier orders every thread's partial stores before the counting thread's release fence
// (cumulative), and its acquire fence before the barrier that lets the block read the other
// blocks' partials: one gpu-scope fence.acq_rel per counting thread. Called by every thread of
// the block (kWarps warps; barriers inside).
struct FoldTile {
  int chunk, kvh, n_chunks, n_rows;
  const int* qrow;
  const int* pos;
};
template <int HD, int kMaxRows, int kWarps>
__device__ void fold_finished_rows(const float* __restrict__ part, const FlashArgs& a,
                                   const FoldTile& f) {
  __shared__ int s_last[kMaxRows], s_c0[kMaxRows], s_n_last;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) s_n_last = 0;
  __syncthreads();
  if (tid < f.n_rows) {  // the chunk counts for row tid when it is in the row's range
    const int pos = f.pos[tid];
    const int c0 = (a.window > 0 ? max(0, pos - a.window + 1) : 0) / kChunkKeys;
    const int c1 = min(pos / kChunkKeys, f.n_chunks - 1);
    if (f.chunk >= c0 && f.chunk <= c1) {
      unsigned* cnt = a.counters + static_cast<int64_t>(f.qrow[tid]) * a.n_kv_head + f.kvh;
      fence_acq_rel_gpu();
      if (atomicAdd(cnt, 1u) + 1u == static_cast<unsigned>(c1 - c0 + 1)) {
        fence_acq_rel_gpu();
        *cnt = 0u;  // every chunk of the row has counted: ready for the next call
        const int at = atomicAdd(&s_n_last, 1);
        s_last[at] = tid;
        s_c0[at] = c0;
      }
    }
  }
  __syncthreads();
  const int n_last = s_n_last, G = a.group.d;
  for (int it = warp; it < n_last * G; it += kWarps) {
    const int i = a.group.div(it);
    const int pos = f.pos[s_last[i]];
    fold_row_warp<HD>(part, a, f.qrow[s_last[i]], f.kvh * G + it - i * G, f.n_chunks, s_c0[i],
                      min(pos / kChunkKeys, f.n_chunks - 1), lane);
  }
}

// out = the fold of each row's chunk partials in `part` (n_chunks a (row, head)) divided by its
// sum, gated and rounded as FlashArgs asks: one block per (row, head) (cuda_flash_combine.cu).
void flash_combine(const float* part, const FlashArgs& a, int64_t n_rows, int n_chunks,
                   Stream& stream);

}  // namespace t9::cuda
