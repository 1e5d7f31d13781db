// Internal to the CUDA backend: tensor-core paged attention (cuda_flash_attention.cu), used by
// CudaBackend::attention for F16 pools with head_dim 64, 128 or 256, every row count alike.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_units.cuh"  // ActBlock

namespace t9::cuda {

struct Scratch;  // cuda_backend.h

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
  int window;     // > 0: sliding window in keys
  unsigned* err;  // the backend's device error word
  // Non-null: out's int8 codes too (DerivedCache::produce: out contiguous), one per element in
  // out's memory order and one ActBlock per 32 elements, rounded as quantize_act_kernel rounds
  // the same floats, so the output projection reads them instead of launching the rounding.
  int8_t* out_q = nullptr;
  ActBlock* out_b = nullptr;
  // Non-null base: the gated attention's output gate, [rows, n_head, head_dim] (whole head rows,
  // any strides): out = (A / L) * sigmoid(gate) as mul_sigmoid rounds it, and the codes of that.
  TensorDesc gate = {};
};

// True when the tensor-core kernel serves this shape. The choice depends only on the pool type
// and the head shape, never on the batch, so a row always takes the same kernel (rule 7).
bool flash_attention_fits(bool f16_pool, int head_dim, int n_head, int n_kv_head);

// out = attention over the pools for n_rows query rows; max_ctx bounds every sequence's
// n_past + n_q (AttnParams::max_ctx). `scratch` holds per-chunk partials when the call splits.
void flash_attention(const FlashArgs& a, int64_t n_rows, int max_ctx, Scratch& scratch,
                     Stream& stream);

}  // namespace t9::cuda
