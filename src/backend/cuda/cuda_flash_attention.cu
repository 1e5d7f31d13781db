// Tensor-core paged attention (F16 pools, head_dim 64 / 128 / 256), for prefill and decode alike.
//
// A block owns 64 "slots" (query row, q head) of one sequence and one KV head: the q heads of a
// GQA group side by side, then the next query rows (G = n_head / n_kv_head heads per row, 64 / G
// rows). It walks the keys in tiles of 64 (32 for head_dim 256), staged once in shared memory for
// all 64 slots (the old kernel re-read every key per (row, head): ~400 GB per layer on a 2k-row
// warm agent turn over a 12k prefix), and each warp computes its 16 slots' S = Q K^T and O += P V
// with mma.sync m16n8k16 (f16 in, f32 accumulate): Q is rounded to f16 once, P to f16 before the PV
// product.
//
// Bitwise rule (ARCHITECTURE.md rule 7). A slot's result must not depend on the batch, the other
// slots in its block, or whether the call split its keys. So:
//   - Keys are cut at absolute positions: tiles (FlashShape) inside chunks of 128 (kChunkKeys).
//   Inside a
//     chunk the slot runs the usual online softmax tile by tile, starting from (m = -inf, l = 0,
//     acc = 0) at the chunk's first tile; masked keys (causal, window, other rows' keys) score
//     -inf, weigh exactly 0 and change no sum.
//   - Chunks are merged by one left fold in chunk order (fold_chunk, explicit roundings). Either
//     the block folds them itself as it goes (the running sum lives in `out`, fp32, read back by
//     the same thread; the final division is the last step), or, when the batch has too few
//     blocks to fill the GPU, each chunk is its own block writing a partial, and
//     flash_combine_kernel (cuda_flash_combine.cu) folds the partials in the same order with the
//     same function (cuda_flash_fold.cuh). Both
//     paths compute the same bits; the choice is per call.
//   - An mma's output element depends only on its own A row and B column, so a slot's bits do not
//     depend on which fragment row it occupies or what the other rows hold.
// Head_dim 256 stages 32 keys per tile (registers), the others 64.
// Pipeline: K and V have two shared buffers each (tile t in buffer t % 2); the loads (cp.async) of
// tile t + 2 are issued as soon as tile t is done with the buffer, so two tiles of work cover a
// load's latency (page-table lookup, then L2 / HBM); the shared rows are padded by 16 bytes so
// ldmatrix is conflict-free.
//
// Row-warp form (kRow, FlashOptions::row_warps): when a call's tiles hold at most 16 slots (one
// decode row of G <= 16 heads), the plain form leaves every multiply to warp 0 (one tile: 64 of S's
// and 64 of O's mma on one warp, the other three idle at the barriers). There the four warps
// split the tile instead: each computes S for a quarter of the tile's keys (an element of S
// depends only on its Q row and K column, over the same 16-dim steps) and O for a quarter of the
// head dims (an element of O only on its P row and V column, over the same keys in the same
// steps); the tile's max goes through shared memory (fmaxf is exact and order-free), and so do
// the probabilities, from which every warp forms the whole P fragment and the row sums in the
// plain form's order. So the same bits, with a quarter of the serial multiplies.
//
// Decode calls of a few sequences (attn_prep_slots) also prepare q and the new K/V rows here
// (FlashPrep: Backend::rope_attention); every call loads its first tiles of earlier steps' keys
// before the dependent-launch wait (FlashArgs::early_keys).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_flash_attention.cuh"
#include "backend/cuda/cuda_flash_fold.cuh"
#include "backend/cuda/cuda_flash_mma.cuh"
#include "backend/cuda/cuda_flash_row.cuh"
#include "backend/cuda/cuda_flash_tiles.cuh"

#include <cmath>

#include "backend/cuda/cuda_backend.h"

namespace t9 {
namespace cuda {
namespace {

// Outputs (float2) per row whose loads the fold keeps in flight at once (kNT must be a multiple).
constexpr int kFoldBatch = 8;
constexpr int kThreads = 128;
constexpr int kChunkBucket = 16;  // split launches size their chunk dimension in these steps

template <int HD>
struct FlashShape {
  // Keys staged per step: 64, or 32 for head_dim 256, whose 128 accumulators per thread leave
  // no room for 64 scores (ptxas spilled ~1.1 KB per thread at 64).
  static constexpr int kTileKeys = HD == 256 ? 32 : 64;
  static constexpr int kTilesPerChunk = kChunkKeys / kTileKeys;
  static constexpr int kStride = HD + 8;  // halves per staged row: +16 B moves each row 4 banks
  static constexpr int kQ = kSlots * kStride;                        // halves
  static constexpr int kKV = kTileKeys * kStride;                    // halves, one of K and V
  static constexpr int kStages = 2;                                  // buffers of each of K and V
  static constexpr int kHalvesBytes = 2 * (kQ + 2 * kStages * kKV);  // a multiple of 16
  // Then the keys' byte offsets in the pools, one int64 per key and stage.
  static constexpr int kBytes = kHalvesBytes + kStages * kTileKeys * 8;
  static_assert(kChunkKeys % kTileKeys == 0);
};

// ---- the kernel ----

// Block (row tile x, KV head y, chunk z). kSplit false: gridDim.z = 1 and the block folds every
// chunk of its rows into `out`. kSplit true: the block computes chunk z only and writes its slots'
// partials [acc (head_dim, in part_pos order), m, l, 2 unused] to part[((row * n_head + head) *
// n_chunks + z) * part_stride(head_dim)].
// kSplit and kCap are template flags, not branches, because a decode block is bound by fetching
// its code: ncu run 127 (8B, one row over 640 keys, 17.3 us) put 40% of the warps' stalls on
// instruction fetch (no_inst), for a 101 KB kernel whose blocks run ~3,000 instructions each.
// kCap (soft-capped logits, a.softcap > 0) inlines tanhf for each of a tile's scores (~19 KB);
// kSplit = false carries the fold into `out` and the final division, kSplit = true the partials.
// With the softmax's exponentials branch-free (below), run 128 (cuda_attention_bench, same bits):
// 8B decode 1 row at 640 keys 16.2 -> 11.7 us, 35B 19.9 -> 16.4, 8B prefill chunk 512 at 8k 983
// -> 632 us, 35B warm turn (2048 rows over 12k) 4375 -> 3510 us, 8B 32 decode rows 368 -> 227 us.
// kRow (the row-warp form above): the launcher's tiles hold at most 16 slots and no cohort.
template <int HD, bool kSplit, bool kCap, bool kRow>
__global__ void __launch_bounds__(kThreads, 2)
    flash_attention_kernel(FlashArgs a, int64_t n_rows, int n_chunks, float* __restrict__ part,
                           int cohort_x0) {
  // No pdl_enter() here: the tile's bookkeeping and its first keys' loads come before the wait
  // (below), while the predecessor (the q/k rounding and the pools' write) still runs.
  using Lay = FlashShape<HD>;
  constexpr int S = Lay::kStride;
  constexpr int kTileKeys = Lay::kTileKeys, kTilesPerChunk = Lay::kTilesPerChunk;
  constexpr int kNK = kTileKeys / 8;  // 8-key n-tiles of S
  constexpr int kNT = HD / 8;         // 8-dim n-tiles of the output
  constexpr int kKS = HD / 16;        // 16-dim k-steps of Q K^T
  constexpr int kSegs = HD / 8;       // 16-byte segments per K/V row
  constexpr int kWarps = kThreads / 32;
  // This warp's n-tiles: of S (keys) and of O (head dims); kRow splits both over the warps.
  constexpr int kNKw = kRow ? kNK / kWarps : kNK;
  constexpr int kNTw = kRow ? kNT / kWarps : kNT;
  static_assert(!kRow || (HD >= 128 && kNK % kWarps == 0 && kNTw % 4 == 0),
                "row warps: whole key n-tiles and 32-dim blocks of O per warp");
  constexpr int kFB = kFoldBatch < kNTw ? kFoldBatch : kNTw;  // fold batch within a warp's dims
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* sq = reinterpret_cast<__half*>(smem_raw);
  __half* const sk0 = sq + Lay::kQ;                   // K buffers
  __half* const sv0 = sk0 + Lay::kStages * Lay::kKV;  // V buffers
  const auto sk = [&](int t) { return sk0 + (t % Lay::kStages) * Lay::kKV; };
  const auto sv = [&](int t) { return sv0 + (t % Lay::kStages) * Lay::kKV; };
  int64_t* const sofs0 = reinterpret_cast<int64_t*>(smem_raw + Lay::kHalvesBytes);
  const auto sofs = [&](int t) { return sofs0 + (t % Lay::kStages) * kTileKeys; };

  const int G = a.group.d, rows_per_tile = a.tile_rows.d;  // (the launcher's divisions)
  const int kvh = blockIdx.y;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // The tile's query rows: batch row and position of row i < n_tile_rows (a sequence's
  // consecutive rows, or a cohort's members); its keys [key_lo, key_hi] through the block table
  // at table_off. Positions and row indices fit 32 bits (checked by the launcher).
  __shared__ int s_qrow[kSlots], s_pos[kSlots], s_seq[kSlots];
  int n_tile_rows, table_off, key_lo, key_hi;
  // Keys before old_end were written by earlier steps, so they may be loaded before the wait:
  // this launch's predecessors write only the rows' own positions (a sequence's n_past on). The
  // tables and sequences were uploaded before the step's first kernel.
  int old_end;
  bool store_new = false;  // FlashPrep: this block stores its row's new k and v first
  int new_qrow = 0;        // (that row, at position old_end)
  if (!kRow && cohort_x0 >= 0 && static_cast<int>(blockIdx.x) >= cohort_x0) {  // split only
    const int c = blockIdx.z;
    const int first = (static_cast<int>(blockIdx.x) - cohort_x0) * rows_per_tile;
    n_tile_rows = cohort_members(a, n_rows, first, rows_per_tile, c, s_qrow, s_pos, s_seq);
    if (n_tile_rows == 0) return;
    table_off = a.seqs[s_seq[0]].block_table_offset;
    key_lo = c * kChunkKeys;
    key_hi = key_lo + kChunkKeys - 1;
    old_end = s_pos[0];  // members are decode rows: position = n_past
    for (int i = 1; i < n_tile_rows; ++i) old_end = min(old_end, s_pos[i]);
  } else {
    RowTile tile;
    if (!find_tile(a.seqs, a.n_seqs, a.tile_rows, n_rows, blockIdx.x, tile, a.err)) return;
    const AttnSeq s = a.seqs[tile.seq];
    const int pos_first = s.n_past + tile.row0;
    key_hi = pos_first + tile.n_rows - 1;
    key_lo = a.window > 0 ? max(0, pos_first - a.window + 1) : 0;
    if constexpr (kSplit) {
      const int c = blockIdx.z;
      if (key_hi / kChunkKeys >= n_chunks) atomicOr(a.err, kErrSeqRows);  // max_ctx too small
      if (c < key_lo / kChunkKeys || c > key_hi / kChunkKeys) return;
      if (!kRow && cohort_x0 >= 0 && s.n_q == 1) {  // a decode row: its cohort may take chunk c
        const int m = cohort_members(a, n_rows, a.tile_rows.div(tile.seq) * rows_per_tile,
                                     rows_per_tile, c, s_qrow, s_pos, s_seq);
        for (int i = 0; i < m; ++i)
          if (s_seq[i] == tile.seq) return;
        __syncthreads();  // s_qrow / s_pos are refilled below
      }
    }
    n_tile_rows = tile.n_rows;
    table_off = s.block_table_offset;
    old_end = s.n_past;
    if (a.prep.q_from.base != nullptr) {
      if (s.n_q != 1) {  // FlashPrep serves decode rows only (the launcher's condition)
        atomicOr(a.err, kErrSeqRows);
        return;
      }
      // This block stores the row's new k and v when it walks the row's own position.
      store_new = !kSplit || static_cast<int>(blockIdx.z) == s.n_past / kChunkKeys;
      new_qrow = s.q_begin;
    }
    if (tid < n_tile_rows) {
      s_qrow[tid] = s.q_begin + tile.row0 + tid;
      s_pos[tid] = pos_first + tid;
    }
  }
  int t_begin = key_lo / kTileKeys, t_end = key_hi / kTileKeys;  // inclusive
  if constexpr (kSplit) {
    const int c = blockIdx.z;
    t_begin = max(t_begin, c * kTilesPerChunk);
    t_end = min(t_end, c * kTilesPerChunk + kTilesPerChunk - 1);
  }

  // Tile t's key positions -> byte offsets in the pools (slot * nb2), -1 for a key outside the
  // rows' range or behind a bad table entry (flagged): one page-table lookup per key and tile,
  // by threads 0 .. kTileKeys - 1 into sofs(t), shared by the K and V loads of every thread.
  const auto key_offsets = [&](int t) {
    if (tid >= kTileKeys) return;
    const int p = t * kTileKeys + tid;
    int64_t off = -1;
    if (p >= key_lo && p <= key_hi) {
      const int blk = a.kv_block.div(p);
      const int64_t ti = static_cast<int64_t>(table_off) + blk;
      bool ok = ti >= 0 && ti < a.n_tables;
      if (ok) {
        const int64_t slot =
            static_cast<int64_t>(a.tables[ti]) * a.block_size + (p - blk * a.block_size);
        ok = slot >= 0 && slot < a.n_slots;
        if (ok) off = slot * a.nb2;
      }
      if (!ok) atomicOr(a.err, kErrKvSlot);
    }
    sofs(t)[tid] = off;
  };
  // Key loads: thread tid moves 16-byte segment (tid % kSegs) of keys tid / kSegs + j * kStep.
  constexpr int kStep = kThreads / kSegs;  // keys covered per pass (HD 256: 4, 128: 8, 64: 16)
  const int seg = tid % kSegs, key0 = tid / kSegs;
  const char* k_base = a.k_cache + kvh * a.nb1 + seg * 16;
  const char* v_base = a.v_cache + kvh * a.nb1 + seg * 16;
  const auto issue = [&](int t, const char* base, __half* dst) {
    const int64_t* offs = sofs(t);
#pragma unroll
    for (int j = key0; j < kTileKeys; j += kStep) {
      const int64_t off = offs[j];
      cp_async16_zfill(dst + j * S + seg * 8, off >= 0 ? base + off : base, off >= 0);
    }
  };
  // Commit groups, in order: K(t_begin), V(t_begin), K(t_begin + 1), V(t_begin + 1), then per
  // tile t one K(t + 2) and one V(t + 2) (empty past t_end: the count stays uniform). Tile
  // t + 2's offsets are written during tile t, after its QK^T (sofs(t) was last read when tile
  // t's loads were issued, two tiles before), and read after the barrier that follows.
  // The first tiles' loads go out before the wait when all their keys are old (a decode row's
  // chunks before its own position's; the tile holding it waits): they then overlap the
  // predecessor's run instead of following it. Uniform per block.
  const int t_first_end = min(t_end, t_begin + Lay::kStages - 1);
  const bool early = a.early_keys != 0 && min((t_first_end + 1) * kTileKeys - 1, key_hi) < old_end;
  // FlashPrep, before the wait: the norm weights (model weights) into shared memory and, for a
  // row tile (one decode row: one position), RoPE's (cos, sin) per pair from the step's uploaded
  // positions, so the work after the wait is the rows' loads, norms and rotations.
  __shared__ float s_prep[kThreads / 32][kQkRowMax];  // a warp's head row (norm_rope_row)
  __shared__ float s_wq[kQkRowMax], s_wk[kQkRowMax];
  __shared__ float2 s_cs[kQkRowMax / 2];
  const bool prep_q = a.prep.q_from.base != nullptr;
  const bool row_cs = prep_q && (cohort_x0 < 0 || static_cast<int>(blockIdx.x) < cohort_x0);
  if (prep_q) {
    const FlashPrep& pp = a.prep;
    for (int i = tid; i < HD; i += kThreads) {
      s_wq[i] = pp.norm != 0 ? pp.wq[i] : 0.0f;
      s_wk[i] = pp.norm != 0 ? pp.wk[i] : 0.0f;
    }
    if (row_cs) {
      const int32_t position = pp.positions[new_qrow];
      for (int kk = tid; kk < pp.rc.n_rot / 2; kk += kThreads) {
        const RopePair rp = rope_pair(pp.rc, kk, position);
        s_cs[kk] = make_float2(rp.c, rp.s);
      }
    }
    __syncthreads();  // uniform: prep_q is the launch's
  }
  // FlashPrep: the row's rotated k and its v into the pools, before any load of their tile (the
  // barrier below, or the loop's, orders them before the loads; warps 0 and 1).
  const auto store_new_kv = [&] {
    if (!store_new || warp > 1) return;
    const int qr = new_qrow, pos = old_end;
    const int blk = a.kv_block.div(pos);
    const int64_t ti = static_cast<int64_t>(table_off) + blk;
    int64_t slot = -1;
    if (ti >= 0 && ti < a.n_tables)
      slot = static_cast<int64_t>(a.tables[ti]) * a.block_size + (pos - blk * a.block_size);
    if (slot < 0 || slot >= a.n_slots) {
      if (lane == 0) atomicOr(a.err, kErrKvSlot);
      return;
    }
    const FlashPrep& pp = a.prep;
    const float* src;
    if (warp == 0) {  // k: normed and rotated as qk_norm_rope_kernel does
      norm_rope_row(reinterpret_cast<const float*>(pp.k.row(kvh, qr)), HD, s_wk, pp.norm != 0,
                    pp.eps, pp.weight_bias, pp.rc, 0, s_prep[0], lane, s_cs);
      src = s_prep[0];
    } else {
      src = reinterpret_cast<const float*>(pp.v.row(kvh, qr));
    }
    __half* dst = reinterpret_cast<__half*>(const_cast<char*>(warp == 0 ? a.k_cache : a.v_cache) +
                                            slot * a.nb2 + kvh * a.nb1);
    for (int i = lane; i < HD; i += 32) dst[i] = __float2half_rn(src[i]);
  };
  // With the fold (a.counters), the next kernel is scheduled only once this block's chunk is
  // done (the trigger after the main loop), not at the wait: run 197's trace had the output
  // projection's GEMV resident 25.5 µs a layer beside the folding attention against 11.2 µs
  // behind the combine kernel (its blocks start, and pull their weights, as soon as scheduled).
  // Written after runs 197-201; not yet measured (docs/CUDA.md stage 40).
  const bool trigger_after_loop = kSplit && a.counters != nullptr;
  const auto wait = [&] { trigger_after_loop ? pdl_wait() : pdl_enter(); };
  if (!early) {
    wait();
    store_new_kv();
  }
  for (int t = t_begin; t <= t_first_end; ++t) key_offsets(t);
  __syncthreads();
  for (int t = t_begin; t < t_begin + Lay::kStages; ++t) {
    if (t <= t_end) issue(t, k_base, sk(t));
    cp_commit();
    if (t <= t_end) issue(t, v_base, sv(t));
    cp_commit();
  }
  if (early) {  // q (and out, the partials) belong to this step
    wait();
    store_new_kv();  // its tile is loaded in the loop, after a barrier
  }

  // Stage Q (f16) while K and V land; slots past the tile's rows are zeros. Each thread moves
  // kQIter runs of 8 floats, kQBatch runs' loads in flight before any store (the stores to
  // shared memory would otherwise hold each run's loads behind the last run's stores).
  // The i0 loop stays rolled: this prologue runs once per block, and unrolled (with a 64-bit
  // row division per run) it was a third of the kernel's 197 KB of code, which a decode block
  // streams through the instruction cache once (docs/CUDA.md, stage 18).
  const int n_valid = n_tile_rows * G;  // (s_qrow / s_pos: written before the barrier above)
  // kRow: only warp 0's 16 slots are staged; the Q rows past them hold the warps' exchanges.
  constexpr int kQSlots = kRow ? 16 : kSlots;
  constexpr int kQIter = kQSlots * kSegs / kThreads, kQBatch = kQIter < 4 ? kQIter : 4;
  constexpr int kQSlotStep = kThreads / kSegs;  // a thread's runs are this many slots apart
  static_assert(kQSlots * kSegs % kThreads == 0 && kQIter % kQBatch == 0 && kThreads % kSegs == 0);
  const int q_d0 = (tid % kSegs) * 8;
  if (prep_q) {  // FlashPrep: a warp per slot, normed and rotated first
    const FlashPrep& pp = a.prep;
    for (int sl = warp; sl < kQSlots; sl += kThreads / 32) {
      __half* dst = sq + sl * S;
      if (sl < n_valid) {
        const int sg = a.group.div(sl), qr = s_qrow[sg];
        norm_rope_row(reinterpret_cast<const float*>(pp.q_from.row(kvh * G + sl - sg * G, qr)), HD,
                      s_wq, pp.norm != 0, pp.eps, pp.weight_bias, pp.rc,
                      row_cs ? 0 : pp.positions[qr], s_prep[warp], lane, row_cs ? s_cs : nullptr);
        for (int i = 2 * lane; i < HD; i += 64)
          *reinterpret_cast<uint32_t*>(dst + i) = pack_f16(s_prep[warp][i], s_prep[warp][i + 1]);
        __syncwarp();  // s_prep[warp] is read before the next slot's row overwrites it
      } else {
        for (int i = 8 * lane; i < HD; i += 256) *reinterpret_cast<uint4*>(dst + i) = uint4{};
      }
    }
  }
#pragma unroll 1
  for (int i0 = 0; !prep_q && i0 < kQIter; i0 += kQBatch) {
    float v[kQBatch][8];
#pragma unroll
    for (int b = 0; b < kQBatch; ++b) {
      const int sl = tid / kSegs + (i0 + b) * kQSlotStep;
      const float* qr = nullptr;
      if (sl < n_valid) {
        const int sg = a.group.div(sl);
        qr = reinterpret_cast<const float*>(a.q.row(kvh * G + sl - sg * G, s_qrow[sg])) + q_d0;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j)  // scalar loads: q rows may be views at any 4-byte offset
        v[b][j] = qr != nullptr ? qr[j] : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kQBatch; ++b) {
      const int sl = tid / kSegs + (i0 + b) * kQSlotStep;
      *reinterpret_cast<uint4*>(sq + sl * S + q_d0) =
          make_uint4(pack_f16(v[b][0], v[b][1]), pack_f16(v[b][2], v[b][3]),
                     pack_f16(v[b][4], v[b][5]), pack_f16(v[b][6], v[b][7]));
    }
  }

  // This thread's two fragment rows (slots warp * 16 + lane / 4 and + 8): position, window start,
  // and output row (-1: no such slot).
  // kRow: every warp works on warp 0's slots.
  const int w_slot0 = kRow ? 0 : warp * 16;
  int my_pos[2], my_lo[2], my_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int sl = w_slot0 + lane / 4 + 8 * h;
    my_row[h] = -1;
    my_pos[h] = -1;
    my_lo[h] = 0;
    if (sl < n_valid) {
      const int sg = a.group.div(sl);
      my_pos[h] = s_pos[sg];
      my_lo[h] = a.window > 0 ? max(0, my_pos[h] - a.window + 1) : 0;
      my_row[h] = s_qrow[sg] * a.n_head + kvh * G + sl - sg * G;
    }
  }
  const bool warp_live = w_slot0 < n_valid;
  // kRow: the first key n-tile of S and the first dim n-tile of O this warp owns; its exchanges
  // in the Q rows past warp 0's (kQSlots): the tile's max per (warp, slot row), then the tile's
  // probabilities p[slot row][key] (rows padded by 8 floats: two of a quad's 8 rows per bank set).
  const int nk0 = kRow ? warp * kNKw : 0, nt0 = kRow ? warp * kNTw : 0;
  constexpr int kPStride = kTileKeys + 8;
  float* const s_rmax = reinterpret_cast<float*>(sq + kQSlots * S);  // [kWarps][16]
  float* const s_p = s_rmax + kWarps * 16;                           // [16][kPStride]
  static_assert(!kRow || (kWarps * 16 + 16 * kPStride) * 4 <= (kSlots - 16) * S * 2,
                "the row warps' exchanges fit the unused Q rows");

  float acc[kNTw][4];
  float m[2], l[2];    // this chunk's running max and sum per fragment row
  float Mr[2], Lr[2];  // the fold over finished chunks (kSplit false)
  Mr[0] = Mr[1] = -INFINITY;
  Lr[0] = Lr[1] = 0.0f;
  const auto reset_chunk = [&] {
#pragma unroll
    for (int n = 0; n < kNTw; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
  };
  reset_chunk();

  for (int t = t_begin; t <= t_end; ++t) {
    cp_wait<3>();  // K(t) has landed (V(t), K(t + 1), V(t + 1) may still be in flight)
    __syncthreads();
    float sc[kNKw][4];  // S's n-tiles nk0 .. nk0 + kNKw - 1
#pragma unroll
    for (int n = 0; n < kNKw; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
    if (warp_live) {
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) {
        uint32_t qa[4];
        ldmatrix_x4(qa, sq + (w_slot0 + lane % 16) * S + ks * 16 + (lane / 16) * 8);
        if constexpr (kNKw == 1) {  // kRow at head_dim 256: one 8-key n-tile a warp
          uint32_t kb[2];
          ldmatrix_x2(kb, sk(t) + (nk0 * 8 + lane % 8) * S + ks * 16 + 8 * ((lane / 8) % 2));
          mma_f16(sc[0], qa, kb[0], kb[1]);
        } else {
#pragma unroll
          for (int np = 0; np < kNKw / 2; ++np) {
            uint32_t kb[4];
            ldmatrix_x4(kb, sk(t) + (nk0 * 8 + np * 16 + lane % 8 + 8 * (lane / 16)) * S + ks * 16 +
                                8 * ((lane / 8) % 2));
            mma_f16(sc[2 * np], qa, kb[0], kb[1]);
            mma_f16(sc[2 * np + 1], qa, kb[2], kb[3]);
          }
        }
      }
    }

    const auto next_keys = [&] {
      if (t + 2 <= t_end) key_offsets(t + 2);
      __syncthreads();  // every warp is done with sk(t); sofs(t + 2) (kRow: s_rmax) is written
      if (t + 2 <= t_end) issue(t + 2, k_base, sk(t + 2));
      cp_commit();
    };
    if constexpr (!kRow) next_keys();

    // Scores -> masked, scaled, capped logits; the tile's max per fragment row (kRow: this
    // warp's keys, then the warps' maxima after the barrier).
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kNKw; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i / 2;
        const int kp = t * kTileKeys + (nk0 + n) * 8 + 2 * (lane % 4) + i % 2;
        float v = __fmul_rn(sc[n][i], a.scale);
        if constexpr (kCap) v = __fmul_rn(a.softcap, tanhf(__fdiv_rn(v, a.softcap)));
        if (kp > my_pos[h] || kp < my_lo[h]) v = -INFINITY;
        sc[n][i] = v;
        tmax[h] = fmaxf(tmax[h], v);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
      if (kRow && lane % 4 == 0) s_rmax[warp * 16 + lane / 4 + 8 * h] = tmax[h];
    }
    if constexpr (kRow) {
      next_keys();
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
          tmax[h] = fmaxf(tmax[h], s_rmax[w * 16 + lane / 4 + 8 * h]);
    }

    float corr[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mn = fmaxf(m[h], tmax[h]);
      // 1 when no key is visible yet (mn = -inf), else exp(m - mn): 0 for m = -inf. Selects on
      // the argument, not around expf: a conditional expf compiles to a branch per call, and
      // the branches kept the 32 exponentials of a tile from overlapping.
      corr[h] = expf(mn == -INFINITY ? 0.0f : __fsub_rn(m[h], mn));
      m[h] = mn;
    }
    // exp(s - m), and 0 for a row with no visible key (m = -inf: its scores are all -inf, and
    // exp(-inf - 0) is exactly +0, the value the row contributes). Branch-free, as above.
    const float m_arg[2] = {m[0] == -INFINITY ? 0.0f : m[0], m[1] == -INFINITY ? 0.0f : m[1]};
    // p = exp(s - m) and the row sums, in the plain form's order: a thread's keys n-tile by
    // n-tile, then its quad. kRow: each warp has a quarter of the tile's keys, so the
    // probabilities go through s_p and every warp takes the whole fragment (pf) from there.
    float pf[kNK][4];
    float tsum[2] = {0.0f, 0.0f};
    const auto rescale = [&] {  // the row sums into l, the accumulators by corr
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tsum[h] = __fadd_rn(tsum[h], __shfl_xor_sync(0xffffffffu, tsum[h], 1));
        tsum[h] = __fadd_rn(tsum[h], __shfl_xor_sync(0xffffffffu, tsum[h], 2));
        l[h] = __fadd_rn(__fmul_rn(l[h], corr[h]), tsum[h]);
      }
      // Multiplying by 1 changes no bit: skip the HD / 2 products per thread when no row of the
      // warp saw its max move (most tiles after a chunk's first).
      if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
        for (int n = 0; n < kNTw; ++n) {
          acc[n][0] = __fmul_rn(acc[n][0], corr[0]);
          acc[n][1] = __fmul_rn(acc[n][1], corr[0]);
          acc[n][2] = __fmul_rn(acc[n][2], corr[1]);
          acc[n][3] = __fmul_rn(acc[n][3], corr[1]);
        }
      }
    };
    if constexpr (kRow) {
#pragma unroll
      for (int n = 0; n < kNKw; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(s_p + (lane / 4 + 8 * h) * kPStride + (nk0 + n) * 8 +
                                     2 * (lane % 4)) =
              make_float2(expf(__fsub_rn(sc[n][2 * h], m_arg[h])),
                          expf(__fsub_rn(sc[n][2 * h + 1], m_arg[h])));
    } else {
#pragma unroll
      for (int n = 0; n < kNK; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int h = i / 2;
          const float p = expf(__fsub_rn(sc[n][i], m_arg[h]));
          pf[n][i] = p;
          tsum[h] = __fadd_rn(tsum[h], p);
        }
      rescale();
    }

    cp_wait<3>();     // V(t) has landed (K(t + 1), V(t + 1), K(t + 2) may still be in flight)
    __syncthreads();  // (kRow: and every warp's probabilities are in s_p)
    if constexpr (kRow) {
#pragma unroll
      for (int n = 0; n < kNK; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 v = *reinterpret_cast<const float2*>(s_p + (lane / 4 + 8 * h) * kPStride +
                                                            n * 8 + 2 * (lane % 4));
          pf[n][2 * h] = v.x;
          pf[n][2 * h + 1] = v.y;
          tsum[h] = __fadd_rn(__fadd_rn(tsum[h], v.x), v.y);
        }
      rescale();
    }
    if (warp_live) {
#pragma unroll
      for (int j = 0; j < kNK / 2; ++j) {  // 16 keys per k-step
        const uint32_t pa[4] = {pack_f16(pf[2 * j][0], pf[2 * j][1]),
                                pack_f16(pf[2 * j][2], pf[2 * j][3]),
                                pack_f16(pf[2 * j + 1][0], pf[2 * j + 1][1]),
                                pack_f16(pf[2 * j + 1][2], pf[2 * j + 1][3])};
#pragma unroll
        for (int dp = 0; dp < kNTw / 2; ++dp) {
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, sv(t) + (j * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * S +
                                    (nt0 / 2 + dp) * 16 + 8 * (lane / 16));
          mma_f16(acc[2 * dp], pa, vb[0], vb[1]);
          mma_f16(acc[2 * dp + 1], pa, vb[2], vb[3]);
        }
      }
    }

    // End of a chunk: hand its partial on.
    if (t == t_end || (t + 1) % kTilesPerChunk == 0) {
      const int c = t / kTilesPerChunk;
      const int d_lane = 2 * (lane % 4);
      if constexpr (kSplit) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (my_row[h] < 0) continue;
          float* pr = part + (static_cast<int64_t>(my_row[h]) * n_chunks + c) * part_stride(HD);
#pragma unroll
          for (int n = 0; n < kNTw; n += 2)  // one float4 per two n-tiles (part_pos)
            *reinterpret_cast<float4*>(pr + (nt0 + n) * 8 + 2 * d_lane) = make_float4(
                acc[n][2 * h], acc[n][2 * h + 1], acc[n + 1][2 * h], acc[n + 1][2 * h + 1]);
          if (lane % 4 == 0 && (!kRow || warp == 0)) {
            pr[HD] = m[h];
            pr[HD + 1] = l[h];
          }
        }
      } else {
        // The running fold lives in `out` (read back by this thread): its loads are issued
        // kFoldBatch outputs per row at a time, both rows together, before any of them is
        // used, so a chunk waits for HD / (8 kFoldBatch) round trips to L2, not HD / 8 (written
        // load-use-store per output, the loads queued behind the stores: 59% of the prefill
        // kernel's cycles stalled on them, ncu run 95).
        bool live[2], first[2];
        float fa[2], fb[2];
        float* o[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          live[h] = my_row[h] >= 0 && m[h] != -INFINITY;
          first[h] = Mr[h] == -INFINITY;
          o[h] = live[h] ? out_row(a, my_row[h]) + nt0 * 8 + d_lane : nullptr;
          if (live[h]) fold_chunk(Mr[h], Lr[h], m[h], l[h], fa[h], fb[h]);
        }
#pragma unroll
        for (int n0 = 0; n0 < kNTw; n0 += kFB) {
          float2 A[2][kFB];
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int k = 0; k < kFB; ++k)
              A[h][k] = live[h] && !first[h] ? *reinterpret_cast<const float2*>(o[h] + (n0 + k) * 8)
                                             : make_float2(0.0f, 0.0f);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if (!live[h]) continue;
#pragma unroll
            for (int k = 0; k < kFB; ++k) {
              A[h][k].x = fold_acc(A[h][k].x, acc[n0 + k][2 * h], fa[h], fb[h]);
              A[h][k].y = fold_acc(A[h][k].y, acc[n0 + k][2 * h + 1], fa[h], fb[h]);
              *reinterpret_cast<float2*>(o[h] + (n0 + k) * 8) = A[h][k];
            }
          }
        }
      }
      reset_chunk();
    }
    __syncthreads();  // every warp is done with sv(t)
    if (t + 2 <= t_end) issue(t + 2, v_base, sv(t + 2));
    cp_commit();
  }

  if (trigger_after_loop) pdl_trigger();
  if constexpr (kSplit) {
    if (a.counters != nullptr) {  // the row's last block folds its partials (FlashArgs::counters)
      // Release / acquire through each row's counter: the barrier orders every thread's partial
      // stores before the counting thread's release fence (cumulative), and its acquire fence
      // before the barrier that lets the block read the other blocks' partials: one gpu-scope
      // fence.acq_rel per counting thread. (Off by default: with this form and with
      // __threadfence() in every thread alike, the 8B's decode lost 8-10%; docs/CUDA.md
      // stage 40.)
      __shared__ int s_last[kSlots], s_c0[kSlots], s_n_last;
      const int c = blockIdx.z;
      if (tid == 0) s_n_last = 0;
      __syncthreads();
      if (tid < n_tile_rows) {  // this chunk counts for row tid when it is in the row's range
        const int pos = s_pos[tid];
        const int c0 = (a.window > 0 ? max(0, pos - a.window + 1) : 0) / kChunkKeys;
        const int c1 = min(pos / kChunkKeys, n_chunks - 1);
        if (c >= c0 && c <= c1) {
          unsigned* cnt = a.counters + static_cast<int64_t>(s_qrow[tid]) * a.n_kv_head + kvh;
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
      const int n_last = s_n_last;
      for (int it = warp; it < n_last * G; it += kThreads / 32) {
        const int i = a.group.div(it);
        const int pos = s_pos[s_last[i]];
        fold_row_warp<HD>(part, a, s_qrow[s_last[i]], kvh * G + it - i * G, n_chunks, s_c0[i],
                          min(pos / kChunkKeys, n_chunks - 1), lane);
      }
    }
  }

  if constexpr (!kSplit) {  // out = A / L, the loads batched as in the fold
    static_assert(kFB % 4 == 0, "whole 32-element blocks (4 n-tiles) per batch");
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (my_row[h] < 0) continue;  // uniform per quad (one slot row)
      float* o = out_row(a, my_row[h]) + nt0 * 8 + 2 * (lane % 4);
      const bool gate = a.gate.base != nullptr;
      const float* gr = gate ? gate_row(a, my_row[h]) + nt0 * 8 + 2 * (lane % 4) : nullptr;
      // out's memory order is (q row, head, dim) = my_row * HD + dim (FlashArgs::out_q).
      const int64_t e0 = static_cast<int64_t>(my_row[h]) * HD + nt0 * 8;
#pragma unroll 1  // once per block: rolled, like Q's staging
      for (int n0 = 0; n0 < kNTw; n0 += kFB) {
        float2 A[kFB], G[kFB];  // the gate's loads beside A's: one round trip
#pragma unroll
        for (int k = 0; k < kFB; ++k) {
          A[k] = *reinterpret_cast<const float2*>(o + (n0 + k) * 8);
          G[k] = gate ? *reinterpret_cast<const float2*>(gr + (n0 + k) * 8) : make_float2(0, 0);
        }
#pragma unroll
        for (int k = 0; k < kFB; ++k) {
          A[k].x = __fdiv_rn(A[k].x, Lr[h]);
          A[k].y = __fdiv_rn(A[k].y, Lr[h]);
          if (gate) A[k].x = gated(A[k].x, G[k].x), A[k].y = gated(A[k].y, G[k].y);
          *reinterpret_cast<float2*>(o + (n0 + k) * 8) = A[k];
        }
        if (a.out_q != nullptr) {  // n-tiles 4b .. 4b + 3 are one 32-element block
#pragma unroll
          for (int b = 0; b < kFB / 4; ++b) {
            float v[4][2];
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j][0] = A[4 * b + j].x, v[j][1] = A[4 * b + j].y;
            const int64_t e = e0 + (n0 + 4 * b) * 8;
            quantize_quad(v, lane, a.out_q + e, a.out_b + e / 32);
          }
        }
      }
    }
  }
}

// Tiles of query rows a call launches: every sequence adds at most one partial tile.
int64_t tile_bound(int n_head, int n_kv_head, int n_seqs, int64_t n_rows) {
  const int rows_per_tile = kSlots / (n_head / n_kv_head);
  return n_seqs + (n_rows + rows_per_tile - 1) / rows_per_tile;
}
int chunk_count(int max_ctx) {
  return std::max(1, (max_ctx + kChunkKeys - 1) / kChunkKeys);
}
size_t partial_bytes(int64_t n_rows, int n_head, int n_chunks, int head_dim) {
  return static_cast<size_t>(n_rows) * n_head * n_chunks * part_stride(head_dim) * sizeof(float);
}
// Split the keys when the tiles alone leave most of the GPU idle (decode, short prefill chunks)
// and the partials stay modest; the bits are the same either way.
bool split_keys(int n_head, int n_kv_head, int n_seqs, int64_t n_rows, int max_ctx, int head_dim) {
  const int n_chunks = chunk_count(max_ctx);
  return n_chunks > 1 &&
         tile_bound(n_head, n_kv_head, n_seqs, n_rows) * n_kv_head < 2 * sm_count() &&
         partial_bytes(n_rows, n_head, n_chunks, head_dim) <= (size_t{1} << 30);
}

// The row-warp form's instantiations exist for head_dim 128 and 256 without soft-capping.
template <int HD>
constexpr bool kHasRowForm = HD >= 128;

template <int HD, bool kSplit, bool kCap, bool kRow>
constexpr auto kernel_of() {
  if constexpr (kRow && kHasRowForm<HD> && !kCap)
    return flash_attention_kernel<HD, kSplit, false, true>;
  else
    return flash_attention_kernel<HD, kSplit, kCap, false>;
}

template <int HD>
FlashLaunch launch(FlashArgs a, int64_t n_rows, int max_ctx, const FlashOptions& opt,
                   Scratch& scratch, Scratch& counters, Stream& stream) {
  constexpr int kSmem = FlashShape<HD>::kBytes;
  static const bool attr_set = [] {
    for (const auto kernel :
         {kernel_of<HD, false, false, false>(), kernel_of<HD, false, true, false>(),
          kernel_of<HD, true, false, false>(), kernel_of<HD, true, true, false>(),
          kernel_of<HD, false, false, true>(), kernel_of<HD, true, false, true>()}) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      // Two blocks per SM need ~200 KB of the unified L1 / shared memory as shared.
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
    }
    return true;
  }();
  (void)attr_set;
  const int64_t tiles = tile_bound(a.n_head, a.n_kv_head, a.n_seqs, n_rows);
  const bool split = split_keys(a.n_head, a.n_kv_head, a.n_seqs, n_rows, max_ctx, HD);
  // Split calls launch (and lay partials out for) a whole bucket of chunks; the blocks past a
  // tile's last chunk return at once. A decode step's launch then repeats for 16 x 128 keys, not
  // 128, so its CUDA graph is replayed instead of rebuilt (run 36: 57 graphs built, 0.4 s).
  const int n_chunks = split
                           ? (chunk_count(max_ctx) + kChunkBucket - 1) / kChunkBucket * kChunkBucket
                           : chunk_count(max_ctx);
  const size_t part_bytes = partial_bytes(n_rows, a.n_head, n_chunks, HD);
  T9_CHECK(tiles + a.n_seqs <= 0x7fffffff && a.n_kv_head <= 65535 && n_chunks <= 65535 &&
               n_rows * a.n_head <= 0x7fffffff,
           "attention: launch grid");
  float* part = split ? static_cast<float*>(scratch.reserve(part_bytes, stream)) : nullptr;
  // TEMPO9_CUDA_ATTN_EARLY_KEYS=0 (read once): every load after the wait (A/B runs; same bits).
  static const bool early_off = env_off("TEMPO9_CUDA_ATTN_EARLY_KEYS");
  a.early_keys = early_off ? 0 : 1;
  // Few rows over few chunks: each row's last block folds the row (no combine launch, ~3-5 us of
  // a decode step's chain per attention layer). Past that the fold's serial share, one warp a
  // (row, head) after the row's last chunk, would outweigh the launch.
  const bool fold_in_kernel =
      split && n_rows <= opt.fold_rows_max && n_chunks <= kInKernelFoldChunks;
  a.counters = fold_in_kernel ? static_cast<unsigned*>(counters.reserve_zeroed(
                                    static_cast<size_t>(n_rows) * a.n_kv_head * 4, stream))
                              : nullptr;
  // Split launches of several sequences add one cohort tile per 64 / G sequences after the row
  // tiles (cohort_members; TEMPO9_CUDA_ATTN_COHORTS=0, read once: none). The same bits either way.
  static const bool cohorts_off = env_off("TEMPO9_CUDA_ATTN_COHORTS");
  a.group = FastDiv::of(a.n_head / a.n_kv_head);
  a.kv_block = FastDiv::of(a.block_size);
  a.tile_rows = FastDiv::of(kSlots / a.group.d);
  a.heads = FastDiv::of(a.n_head);
  // Key positions (up to the last chunk's end), slot / fold indices (< 64 G), row counts
  // (find_tile: a sequence's rows plus a tile) and output rows (n_rows x n_head) divide exactly.
  T9_CHECK(a.kv_block.covers(int64_t{n_chunks} * kChunkKeys) &&
               a.group.covers(int64_t{kSlots} * kSlots) && a.tile_rows.covers(n_rows + kSlots) &&
               a.heads.covers(n_rows * a.n_head),
           "attention: {} chunks of {} keys over pages of {}, {} rows", n_chunks, kChunkKeys,
           a.block_size, n_rows);
  const int rows_per_tile = a.tile_rows.d;
  const bool cohorts = split && a.n_seqs >= 2 && !cohorts_off;
  const int64_t cohort_tiles = cohorts ? (a.n_seqs + rows_per_tile - 1) / rows_per_tile : 0;
  const dim3 grid(static_cast<unsigned>(tiles + cohort_tiles), static_cast<unsigned>(a.n_kv_head),
                  split ? static_cast<unsigned>(n_chunks) : 1u);
  const bool cap = a.softcap > 0.0f;
  // The row-warp form: every tile at most 16 slots (n_rows x G: a tile holds rows of one
  // sequence), no cohort tile.
  const bool row = opt.row_warps && kHasRowForm<HD> && !cap && !cohorts &&
                   n_rows * (a.n_head / a.n_kv_head) <= 16;
  const auto kernel =
      row     ? (split ? kernel_of<HD, true, false, true>() : kernel_of<HD, false, false, true>())
      : split ? (cap ? kernel_of<HD, true, true, false>() : kernel_of<HD, true, false, false>())
              : (cap ? kernel_of<HD, false, true, false>() : kernel_of<HD, false, false, false>());
  // The row form's split calls by whole chunks (cuda_flash_row.cu): the same partials (and
  // the same fold, when the call folds in the kernel), while its live blocks (one an SM: 61-72
  // registers x 512 threads, 96-175 KB of shared memory) fit one wave; past that the row-warp
  // kernel's two blocks an SM.
  // Live tiles: one sequence's rows fill tiles - 1 (tile_bound's extra tile returns at once).
  const int64_t live_tiles = a.n_seqs == 1 ? tiles - 1 : tiles;
  const bool chunk = row && opt.row_chunk && split && row_chunk_fits(HD, n_rows, a.group.d) &&
                     live_tiles * a.n_kv_head * chunk_count(max_ctx) <= sm_count();
  // Unsplit calls over one chunk (row_chunk_one): the chunk kernel stores the chunk's partial
  // and its block, the row's last, folds it through the counters as a split call's would. The
  // fold of one chunk (fold_chunk from M = -inf: A = acc, L = l, then A / L and the gate) is
  // what the unsplit kernels compute in their blocks, so the bits are the unsplit form's.
  const bool one_chunk = row && opt.row_chunk_one && !split && n_chunks == 1 &&
                         row_chunk_fits(HD, n_rows, a.group.d) &&
                         live_tiles * a.n_kv_head <= sm_count();
  if (one_chunk) {
    part = static_cast<float*>(scratch.reserve(partial_bytes(n_rows, a.n_head, 1, HD), stream));
    a.counters = static_cast<unsigned*>(
        counters.reserve_zeroed(static_cast<size_t>(n_rows) * a.n_kv_head * 4, stream));
  }
  if (chunk || one_chunk)
    flash_row_chunk(a, n_rows, n_chunks, part, grid, stream);
  else
    stream.launch(kernel, grid, kThreads, kSmem, a, n_rows, n_chunks, part,
                  cohorts ? static_cast<int>(tiles) : -1);
  if (split && !fold_in_kernel) flash_combine(part, a, n_rows, n_chunks, stream);
  return {fold_in_kernel || one_chunk, row, chunk || one_chunk};
}

}  // namespace

bool flash_attention_fits(bool f16_pool, int head_dim, int n_head, int n_kv_head) {
  return f16_pool && (head_dim == 64 || head_dim == 128 || head_dim == 256) && n_kv_head > 0 &&
         n_head % n_kv_head == 0 && n_head / n_kv_head <= kSlots;
}

}  // namespace cuda

CudaAttnPath cuda_attention_path(const AttnParams& p, GgmlType pool, int64_t n_rows) {
  if (!cuda::flash_attention_fits(pool == GgmlType::F16, p.head_dim, p.n_head, p.n_kv_head))
    return CudaAttnPath::kFloat;
  return cuda::split_keys(p.n_head, p.n_kv_head, p.n_seqs, n_rows, p.max_ctx, p.head_dim)
             ? CudaAttnPath::kTensorSplit
             : CudaAttnPath::kTensorFold;
}

namespace cuda {

FlashLaunch flash_attention(const FlashArgs& a, int64_t n_rows, int max_ctx,
                            const FlashOptions& opt, Scratch& scratch, Scratch& counters,
                            Stream& stream) {
  T9_CHECK(flash_attention_fits(true, a.head_dim, a.n_head, a.n_kv_head),
           "flash attention: head_dim {} n_head {} n_kv_head {}", a.head_dim, a.n_head,
           a.n_kv_head);
  T9_CHECK((reinterpret_cast<uintptr_t>(a.k_cache) | reinterpret_cast<uintptr_t>(a.v_cache) |
            static_cast<uintptr_t>(a.nb1) | static_cast<uintptr_t>(a.nb2)) %
                   16 ==
               0,
           "flash attention: pools must be 16-byte aligned");
  switch (a.head_dim) {
    case 64:
      return launch<64>(a, n_rows, max_ctx, opt, scratch, counters, stream);
    case 128:
      return launch<128>(a, n_rows, max_ctx, opt, scratch, counters, stream);
    default:
      return launch<256>(a, n_rows, max_ctx, opt, scratch, counters, stream);
  }
}

}  // namespace cuda
}  // namespace t9
