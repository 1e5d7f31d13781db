// Internal to the CUDA backend: tensor-core paged attention (cuda_flash_attention.cu), used by
// CudaBackend::attention for F16 pools with head_dim 64, 128 or 256, every row count alike.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_rope.cuh"
#include "backend/cuda/cuda_units.cuh"  // ActBlock

namespace t9::cuda {

struct Scratch;  // cuda_backend.h

// Decode rows' q/k preparation in the attention kernel (Backend::rope_attention): q_from's head
// rows are QK-normed and rotated as qk_norm_rope_kernel does (norm_rope_row: the same bits) while
// they are staged, and the block whose chunk holds a row's own position first stores that row's
// rotated k and its v in the pools (kv head y of the grid). Every sequence has one query row.
struct FlashPrep {
  TensorDesc q_from = {};     // base null: off (q is read as it is)
  TensorDesc k = {}, v = {};  // F32 [rows, n_kv_head, head_dim]: this step's rows, as projected
  const float* wq = nullptr;  // QK-norm weights (norm != 0)
  const float* wk = nullptr;
  const int32_t* positions = nullptr;  // RoPE position of each query row
  RopeConsts rc = {};
  int norm = 0;  // (an int and the pad: no padding bytes in the launch's arguments)
  float eps = 0.0f, weight_bias = 0.0f;
  int pad = 0;
};

// One attention call as the kernel sees it. q and out are [rows, n_head, head_dim] F32; the pools
// are [slots, n_kv_head, head_dim] F16 with byte strides nb1 (one kv head) and nb2 (one slot).
struct FlashArgs {
  TensorDesc q, out;
  const char* k_cache;
  const char* v_cache;
  const AttnSeq* seqs;
  int n_seqs;
  const int32_t* tables;
  int64_t n_tables, n_slots;
  int64_t nb1, nb2;
  int n_head, n_kv_head, head_dim, block_size;
  float scale, softcap;
  int window;          // > 0: sliding window in keys
  int early_keys = 0;  // 1: keys of earlier steps may load before the dependent-launch wait
  unsigned* err;       // the backend's device error word
  // Non-null: out's int8 codes too (DerivedCache::produce: out contiguous), one per element in
  // out's memory order and one ActBlock per 32 elements, rounded as quantize_act_kernel rounds
  // the same floats, so the output projection reads them instead of launching the rounding.
  int8_t* out_q = nullptr;
  ActBlock* out_b = nullptr;
  // Non-null base: the gated attention's output gate, [rows, n_head, head_dim] (whole head rows,
  // any strides): out = (A / L) * sigmoid(gate) as mul_sigmoid rounds it, and the codes of that.
  TensorDesc gate = {};
  // Non-null (split launches, set by the launcher): one zeroed counter per (query row, KV head).
  // Each block counts its rows' chunks done there; the block that finishes a row's last chunk
  // folds that row's partials itself (as flash_combine_kernel would: the same bits) and zeroes
  // the counter again, so the call needs no combine launch.
  unsigned* counters = nullptr;
  FlashPrep prep = {};
  // Set by the launcher, so that the kernel divides by one multiply (FastDiv) instead of an
  // integer-division sequence at each site: the GQA group G = n_head / n_kv_head (slot indices
  // / G), a tile's query rows kSlots / G, block_size (key positions -> page-table entries) and
  // n_head (output rows -> query row and head: out_row).
  FastDiv group = {}, tile_rows = {}, kv_block = {}, heads = {};
};

// True when the tensor-core kernel serves this shape. The choice depends only on the pool type
// and the head shape, never on the batch, so a row always takes the same kernel (rule 7).
bool flash_attention_fits(bool f16_pool, int head_dim, int n_head, int n_kv_head);

// Forms a call may take; none changes a bit (CudaBackendConfig::attn_fold_rows, attn_row_warps).
struct FlashOptions {
  // Split calls of at most this many rows and kInKernelFoldChunks chunks fold their partials in
  // the attention kernel (FlashArgs::counters), the others launch flash_combine_kernel.
  int fold_rows_max = 0;
  // Calls whose tiles hold at most 16 (row, q head) slots (one decode row) split each tile's
  // multiplies over the block's four warps (head_dim 128 / 256, no soft-capping, no cohorts).
  bool row_warps = false;
  // Split calls that take the row-warp form run cuda_flash_row.cu's chunk kernel instead: a
  // 16-warp block per 128-key chunk, its tiles' scores at once (same bits; the in-kernel fold
  // too, fold_rows_max).
  bool row_chunk = false;
  // One-chunk calls of the row-warp form (unsplit, up to 128 keys) by the chunk kernel too: the
  // chunk's partial, folded by its own block (the counters' path), so no combine launch.
  bool row_chunk_one = false;
};
// What a call did.
struct FlashLaunch {
  bool folded = false;     // the rows' partials were folded in the kernel (no combine launch)
  bool row_warps = false;  // the row-warp form ran
  bool row_chunk = false;  // as the chunk kernel (cuda_flash_row.cu)
};

// out = attention over the pools for n_rows query rows; max_ctx bounds every sequence's
// n_past + n_q (AttnParams::max_ctx). `scratch` holds per-chunk partials when the call splits;
// `counters` the fold's counters (kept zeroed).
FlashLaunch flash_attention(const FlashArgs& a, int64_t n_rows, int max_ctx,
                            const FlashOptions& opt, Scratch& scratch, Scratch& counters,
                            Stream& stream);

}  // namespace t9::cuda
