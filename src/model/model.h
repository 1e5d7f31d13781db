// Model: one loaded GGUF (weights in backend memory, zero copy on CPU), its KV pool, and the
// forward pass over a batch of many sequences at once. Architectures differ only through
// ArchSpec (model/arch/); the forward pass is shared (model/forward.cpp).
//
// Threading: not thread-safe; one thread (the engine thread) calls forward().
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "core/sampling.h"
#include "gguf/gguf_file.h"
#include "model/arch/arch.h"
#include "model/extra_scratch.h"
#include "model/hparams.h"
#include "model/kv_pool.h"
#include "model/recurrent_state.h"
#include "model/weights.h"

namespace t9::model {

enum class LogitRows { kNone, kLast, kAll };

struct SeqInput {
  int first_token = 0;  // index of this sequence's first token in Batch::tokens
  int n_tokens = 0;     // > 0
  int n_past = 0;       // tokens already in the KV; the batch's tokens sit at n_past, n_past + 1...
  // Block i holds the KV of positions [i * block_size, (i + 1) * block_size); must cover
  // n_past + n_tokens and name blocks below kv().n_blocks().
  std::span<const int32_t> block_table;
  LogitRows logits = LogitRows::kNone;
  // Hybrid models (recurrent() != null): this sequence's slot in the RecurrentState, holding
  // its state after n_past tokens (a fresh slot, or n_past == 0, starts from zero). Ignored by
  // attention-only models.
  int state_slot = -1;
  // Hybrid models: also copy the state after this sequence's first snapshot_after tokens (0 <
  // snapshot_after < n_tokens; 0: none) into *snapshot, with the bits a step ending there would
  // leave (a prefix-cache checkpoint inside the step).
  int snapshot_after = 0;
  StateSnapshot* snapshot = nullptr;
};

struct Batch {
  // [n_tokens], sequences back to back. -1 - r (enqueue() only): the token the batch enqueued
  // before decided for its logit row r, read on the backend (Backend::take_tokens), not yet
  // known on the host; valid when that batch had argmax_only or sampling that settles on the
  // backend, and at most ModelConfig::max_logit_rows_per_call rows (previous_tokens()).
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;  // [n_tokens]; empty: n_past + j per sequence
  std::span<const SeqInput> seqs;      // [n_seqs]
  // Every logit row is wanted only as its argmax (greedy sampling): forward() returns
  // Logits::tokens and copies back 4 bytes a row instead of the vocabulary.
  bool argmax_only = false;
  // Or, one per logit row (in order): the row's token is decided on the backend (Backend::sample;
  // temperature 0: the argmax). forward() returns Logits::tokens; a row the backend cannot settle
  // (-1) brings its logits back too.
  std::span<const RowSampling> sampling{};
  // With sampling: the rows' logit bias and penalties, sorted by (logit row, token), applied on
  // the backend (Backend::adjust_logits) before the draw; and the tokens in flight of pipelined
  // rows (PendingEdit::input indexes `tokens`: a -1 - r entry reads the token there), sorted by
  // logit row.
  std::span<const LogitEdit> edits{};
  std::span<const PendingEdit> pending{};
  // With argmax_only or sampling: null, or whether logit row r may take token t (structured
  // output). A decided token it refuses comes back -1 with its logits (after the edits),
  // as a row the backend leaves undecided; the step is then waited for inside forward().
  std::function<bool(int r, int32_t t)> accepts{};
  // With accepts (or rows the backend may leave undecided): check and fetch those rows' logits in
  // wait() instead, when the caller has accepted the previous batch's tokens (pipelined steps:
  // the constraint is then at the row's state). The call's logit rows are copied to one of two
  // slots on the backend until then, and the next batch may read this one's decided tokens on
  // the backend, a refused one included (the caller drops the row that read it).
  bool check_at_wait = false;
  // With sampling, >= 0: also each row's log-probability of its token and its n_top_logprobs
  // best (Backend::logprobs; Logits::logprobs), at most kMaxTopLogprobs, of the raw rows (before
  // `edits`: a call with edits copies its rows first).
  int n_top_logprobs = -1;
};

struct Logits {
  // [n_rows, n_vocab]: rows of the sequences asking for logits, in batch order (kLast: one row,
  // kAll: n_tokens rows).
  // Empty with Batch::argmax_only or sampling, unless some token is -1: then those rows' logits
  // (the other rows zero).
  std::vector<float> data;
  // [n_rows] with Batch::argmax_only (each row's argmax) or sampling (each row's token, -1: sample
  // it from `data`).
  std::vector<int32_t> tokens;
  // With Batch::n_top_logprobs = k >= 0: [n_rows, 1 + k] each row's token log-probability (NaN
  // where the token is -1), then its k best; [n_rows, k] those tokens' ids.
  std::vector<float> logprobs;
  std::vector<int32_t> top_ids;
  int n_top = 0;
  int n_rows = 0;
  int n_vocab = 0;
  std::span<const float> row(int r) const {
    return {data.data() + static_cast<size_t>(r) * n_vocab, static_cast<size_t>(n_vocab)};
  }
};

struct ModelConfig {
  int kv_block_size = 16;
  GgmlType kv_type = GgmlType::F16;
  // Rows of the output projection computed per backend call (bounds the logits scratch:
  // gemma3's 262144-entry vocabulary costs 1 MiB per row).
  int max_logit_rows_per_call = 64;
  // Hybrid models: steps giving a sequence at least this many tokens run the chunked-parallel
  // delta rule, others the token-by-token recurrence. The default keeps every step recurrent:
  // then a sequence's logits are bitwise the same however its tokens are split into steps
  // (rule 7 of docs/ARCHITECTURE.md), which is what makes prefix-cache hits — a restored state
  // checkpoint plus the suffix — give exactly the outputs of an uncached run. On the CPU the
  // recurrence costs about the same FLOPs as the chunked form (~4 d_k d_v per token and head);
  // the chunked form pays on tensor cores. Tests set 2 to exercise it.
  int gdn_min_chunked_tokens = 1 << 30;
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& path, Backend& backend,
                                             const ModelConfig& cfg = {},
                                             const LoadProgress& progress = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const HParams& hparams() const { return hp_; }
  const ArchSpec& spec() const { return spec_; }
  const gguf::GgufFile& file() const { return file_; }
  const ModelConfig& config() const { return cfg_; }
  Backend& backend() { return backend_; }
  KvPool& kv() { return kv_; }
  // The Gated DeltaNet state store of a hybrid model; null for attention-only models.
  RecurrentState* recurrent() { return rs_.get(); }
  // At most one engine at a time may drive a model: an engine owns the model's KV block ids and
  // state slots, so two would overwrite each other's KV. EngineRunner claims and releases it.
  bool claim_for_engine() { return !std::exchange(engine_claimed_, true); }
  void release_from_engine() { engine_claimed_ = false; }
  int n_vocab() const { return hp_.n_vocab; }

  // Writes the batch's K/V into its blocks and returns the requested logits. Bad input (token id
  // out of range, block table too short or naming unbacked blocks) is an Error and changes
  // nothing; the call is batch-invariant (a sequence's logits do not depend on the others).
  Result<Logits> forward(const Batch& batch);

  // Pipelined steps: enqueue() records forward()'s work without waiting for it and keeps its
  // output; the caller may record more (state snapshots), then Backend::submit()s the unit.
  // wait() waits for the oldest submitted unit (Backend::wait_submitted) and returns the oldest
  // enqueued output. An error from enqueue() leaves nothing to wait for.
  Status enqueue(const Batch& batch);
  Result<Logits> wait();
  // Logit rows of the batch enqueued last whose tokens a batch may name (Batch::tokens).
  int previous_tokens() const { return prev_token_rows_; }

 private:
  Model(gguf::GgufFile file, Backend& backend, const ModelConfig& cfg, HParams hp, ArchSpec spec);
  struct Scratch;
  bool engine_claimed_ = false;
  // prev_rows: rows of the previous batch's tokens the batch may name (Batch::tokens).
  Status validate(const Batch& batch, int prev_rows) const;
  Status ensure_scratch(int n_tokens, int n_seqs, int n_block_ids);
  void upload_inputs(const Batch& batch, const std::vector<int32_t>& positions);
  void run_layer(int il, int n_tokens, int n_seqs, int max_ctx);
  void run_attention(int il, int n_seqs, int max_ctx);
  Status upload_recurrent_seqs(const Batch& batch);
  // Records the logits (or tokens) of the batch's rows; their downloads land in the result's
  // vectors after the next sync or wait.
  // check_slot: the slot (0, 1) its rows were copied to for a check at wait, or -1.
  Result<Logits> compute_logits(const Batch& batch, int* check_slot);
  // A check_at_wait batch's check, once its output arrived: refused tokens become -1, and every
  // -1 row's logits come from the slot.
  void finish_check(Logits& out, const std::function<bool(int, int32_t)>& accepts, int slot);
  // raw non-null: first copies lg's rows before the edits into the raw scratch (*raw: the copy)
  // when this call has edits; *raw is left as it was otherwise.
  // The batch's edits and pending tokens of logit rows [first, first + n).
  Status apply_edits(const Batch& b, int first, int n, const Tensor& lg, Tensor* raw = nullptr);
  // Every sampled row of the batch is decided on the backend (Backend::settles): none comes
  // back -1, so no logits are needed for it.
  bool settles(const Batch& batch) const;

  gguf::GgufFile file_;
  Backend& backend_;
  ModelConfig cfg_;
  HParams hp_;
  ArchSpec spec_;
  Weights w_;
  KvPool kv_;
  std::unique_ptr<Scratch> s_;
  std::unique_ptr<ExtraScratch> xs_;     // MoE / gated attention / Gated DeltaNet activations
  std::unique_ptr<RecurrentState> rs_;   // hybrid models only
  std::vector<LogitEdit> edit_staging_;  // apply_edits' padded host copies, reused
  std::vector<PendingEdit> pending_staging_;
  std::vector<int> rec_index_;  // [n_layer_main]: index among recurrent layers, or -1
  // This step's snapshots inside it (SeqInput::snapshot_after): slot and destination; the
  // Gated DeltaNet layers run those sequences' rows after the snapshot over gdn_tail_.
  std::vector<std::pair<int, StateSnapshot*>> mid_snaps_;
  Tensor gdn_tail_;  // I32 [n, 4] RecurrentSeq in xs_->rseqs_tail's storage
  // enqueue()d outputs, oldest first (their downloads' destinations: they must not move).
  std::deque<Logits> in_flight_;
  // For each of them: a check at wait (Batch::check_at_wait) and its slot, or none.
  struct PendingCheck {
    std::function<bool(int, int32_t)> accepts;
    int slot = -1;
  };
  std::deque<PendingCheck> checks_in_flight_;
  // Batch::check_at_wait's logit slots (F32 rows on the backend), alternating between batches.
  Buffer* check_buf_[2] = {nullptr, nullptr};
  size_t check_cap_[2] = {0, 0};
  int next_check_slot_ = 0;
  int prev_token_rows_ = 0;  // previous_tokens()
};

}  // namespace t9::model
