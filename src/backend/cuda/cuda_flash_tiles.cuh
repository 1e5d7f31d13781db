// Internal to the tensor-core attention (cuda_flash_attention.cu): which query rows a block
// takes. A block owns kSlots (query row, q head) slots of one KV head: a row tile of one
// sequence's consecutive rows, or (split launches) a cohort of agents' decode rows that see a
// chunk through the same pages.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_flash_fold.cuh"

namespace t9::cuda {

constexpr int kSlots = 64;  // (query row, q head) pairs per block: 4 warps x 16

// ---- tiles of query rows ----

struct RowTile {
  int seq;     // index into the AttnSeq table
  int row0;    // first query row of the tile, relative to the sequence's q_begin
  int n_rows;  // rows in the tile (1 .. rows_per_tile)
};

// Tile t of the batch: sequences in order, each cut into ceil(n_q / rows_per_tile) tiles
// (rows_per_tile = kSlots / G, the launcher's FastDiv: FlashArgs::tile_rows). False past the last
// tile. Flags sequences whose rows fall outside the batch (as find_seq does).
__device__ inline bool find_tile(const AttnSeq* seqs, int n_seqs, FastDiv tile_rows, int64_t n_rows,
                                 int64_t t, RowTile& out, unsigned* err) {
  const int rows_per_tile = tile_rows.d;
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq s = seqs[i];
    if (s.q_begin < 0 || s.n_q < 0 || static_cast<int64_t>(s.q_begin) + s.n_q > n_rows) {
      atomicOr(err, kErrSeqRows);
      return false;
    }
    const int n_t = tile_rows.div(s.n_q + rows_per_tile - 1);  // (n_q checked just above)
    if (t < n_t) {
      out.seq = i;
      out.row0 = static_cast<int>(t) * rows_per_tile;
      out.n_rows = min(rows_per_tile, s.n_q - out.row0);
      return true;
    }
    t -= n_t;
  }
  return false;
}

// ---- key positions -> pool slots ----
// (cuda_flash_row.cu's. flash_attention_kernel keeps its own copies of these and of
// fold_finished_rows, and the chunk kernel a copy of its fragment rows' setup, until a device
// run times moving the plain kernel onto shared helpers: compiled through them, its default
// kernels' code moved by -8..+24 instructions, docs/CUDA.md stage 64.)

// Key position p's slot in the pools through a sequence's block table (starting at table_off);
// false behind a bad table entry or slot (the caller flags kErrKvSlot).
__device__ __forceinline__ bool pool_slot(const FlashArgs& a, int table_off, int p,
                                          int64_t& slot) {
  const int blk = a.kv_block.div(p);
  const int64_t ti = static_cast<int64_t>(table_off) + blk;
  slot = -1;
  if (ti >= 0 && ti < a.n_tables)
    slot = static_cast<int64_t>(a.tables[ti]) * a.block_size + (p - blk * a.block_size);
  return slot >= 0 && slot < a.n_slots;
}
// Key p's byte offset in the pools (slot * nb2), -1 outside [key_lo, key_hi] or behind a bad
// table entry (flagged): one lookup per key and tile, shared by the K and V loads.
__device__ __forceinline__ int64_t key_offset(const FlashArgs& a, int table_off, int key_lo,
                                              int key_hi, int p) {
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
  return off;
}

// ---- cohorts: decode rows over shared pages ----
//
// Agents re-send one system prompt, so their sequences' block tables start with the same pages
// (the prefix cache shares whole blocks). A decode row fills only G of a block's 64 slots, and
// every sequence's blocks re-read the shared keys. Split launches therefore add cohort tiles:
// for chunk c, the decode rows (n_q == 1) of sequences [k R, k R + R) (R = 64 / G rows per
// tile) that see the chunk whole (no causal or window mask inside it) through the same pages as
// the first of them, as one tile. Such a chunk's keys and values are the same bytes for every
// member, and an mma row's result does not depend on the other rows, so a member's partial has
// the bits its own tile would write; its own tile's block for that chunk returns at once. Both
// sides decide with cohort_members, the same function of the same arguments, so every (row,
// chunk) is computed once.

// The members for chunk c of cohort [first, first + n_max) (n_max <= kSlots): its sequences with
// one query row in the batch that see the chunk whole through the leader's pages (the leader: the
// first sequence that sees it whole), in order: batch row, position and sequence index into
// qrow / pos / seq (shared, kSlots each). Returns their count, or 0 when fewer than two. Thread i
// < n_max looks at sequence first + i: two rounds of loads (the sequence, then its table entries
// for the chunk), whatever the cohort's size. Called by every thread of the block (barriers
// inside; blockDim.x >= kSlots); uniform.
__device__ inline int cohort_members(const FlashArgs& a, int64_t n_rows, int first, int n_max,
                                     int c, int* qrow, int* pos, int* seq) {
  static_assert(kSlots == 64, "two warps' ballots below");
  __shared__ int s_lead, s_lead_tab;
  __shared__ unsigned s_ballot[2];
  const int i = threadIdx.x, lane = i % 32, warp = i / 32;
  const int k0 = c * kChunkKeys, k1 = k0 + kChunkKeys - 1;
  if (i == 0) s_lead = kSlots;
  __syncthreads();
  AttnSeq s{};
  bool ok = false;
  if (i < n_max && first + i < a.n_seqs) {
    s = a.seqs[first + i];
    ok = s.n_q == 1 && s.q_begin >= 0 && s.q_begin < n_rows && s.n_past >= k1 &&
         (a.window <= 0 || s.n_past - a.window + 1 <= k0);
    if (ok) atomicMin(&s_lead, i);
  }
  __syncthreads();
  if (ok && i == s_lead) s_lead_tab = s.block_table_offset;
  __syncthreads();
  if (ok) {
    const int b0 = a.kv_block.div(k0), b1 = a.kv_block.div(k1);  // (k1: a chunk's last key)
    for (int b = b0; b <= b1; ++b) {
      const int64_t ti = static_cast<int64_t>(s.block_table_offset) + b;
      const int64_t tl = static_cast<int64_t>(s_lead_tab) + b;
      ok = ok && ti >= 0 && ti < a.n_tables && tl >= 0 && tl < a.n_tables &&
           a.tables[ti] == a.tables[tl];
    }
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, ok);
  if (lane == 0 && warp < 2) s_ballot[warp] = ballot;
  __syncthreads();
  const int n = __popc(s_ballot[0]) + __popc(s_ballot[1]);
  if (n < 2) return 0;
  if (ok) {
    const int at = __popc(ballot & ((1u << lane) - 1u)) + (warp == 1 ? __popc(s_ballot[0]) : 0);
    qrow[at] = s.q_begin, pos[at] = s.n_past, seq[at] = first + i;
  }
  __syncthreads();
  return n;
}

}  // namespace t9::cuda
