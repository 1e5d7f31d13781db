// Internal to model/: the activations of one forward call, in one backend buffer that grows
// with the largest batch seen (never per call), plus a fixed buffer for the logits.
#pragma once

#include "model/model.h"

namespace t9::model {

struct Model::Scratch {
  // Activation tensors for the current call (views of `buf`; T = n_tokens, E = n_embd).
  Tensor ids;     // I32 [T]
  Tensor pos;     // I32 [T]
  Tensor seqs;    // I32 [n_seqs, 4] (AttnSeq)
  Tensor tables;  // I32 [n_block_ids]
  Tensor x;       // F32 [T, E] residual stream
  Tensor x2;      // F32 [T, E] the residual stream inside a layer (run_layer: out-of-place adds)
  Tensor h;       // F32 [T, E] normed input of a block
  Tensor q;       // F32 [T, n_head, d]
  Tensor k, v;    // F32 [T, n_head_kv, d]
  Tensor attn;    // F32 [T, n_head, d]
  Tensor o;       // F32 [T, E] block output
  Tensor gate;    // F32 [T, F]
  Tensor up;      // F32 [T, F]
  // Logits (R = max_logit_rows_per_call rows per backend call).
  Tensor row_ids;     // I32 [R]
  Tensor row_max;     // I32 [R]: the rows' argmax or sampled tokens (Batch::argmax_only, sampling)
  Tensor row_params;  // I32 [R, 6]: one RowSampling per row (Batch::sampling)
  // Batch::n_top_logprobs: F32 [R, 1 + kMaxTopLogprobs] and I32 [R, kMaxTopLogprobs], row r's
  // of a call at r * (1 + k) and r * k (Backend::logprobs' contiguous [n, 1 + k], [n, k]).
  Tensor row_logprobs;
  Tensor row_top_ids;
  Tensor sel;     // F32 [R, E]
  Tensor logits;  // F32 [R, n_vocab]

  Buffer* buf = nullptr;
  Buffer* logit_buf = nullptr;
  // Batch::edits and Batch::pending of one logits call (LogitEdit [n], then PendingEdit [m]).
  Buffer* edit_buf = nullptr;
  // Batch::n_top_logprobs with edits: the call's rows before the edits (F32 [R, n_vocab]),
  // taken on first need (a logprob request with a bias or penalties).
  Buffer* raw_buf = nullptr;
  size_t edit_bytes = 0;  // edit_buf's size
  int cap_tokens = 0, cap_seqs = 0, cap_block_ids = 0;
  const HParams* hp = nullptr;

  // Grows `buf` (and allocates logit_buf once) for at least these counts.
  Status reserve(Backend& be, const HParams& hp, const ModelConfig& cfg, int n_tokens, int n_seqs,
                 int n_block_ids);
  // Points the tensors at the layout for exactly these counts (<= the reserved ones); returns the
  // bytes the layout spans at the reserved capacities.
  size_t shape(int n_tokens, int n_seqs, int n_block_ids);
  void release(Backend& be);
  static Tensor reshape_rows(const Tensor& t);
};

}  // namespace t9::model
