// ModelRunner: the interface between the engine (pure bookkeeping) and a model (tensors).
// The engine builds one ForwardBatch per step from the StepPlan; the runner writes the KV of the
// batch's tokens into the given blocks and returns logits for the sequences that need them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/sampling.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "engine/token_constraint.h"

namespace t9::engine {

struct ForwardSeq {
  int first_token = 0;  // index of this sequence's first token in ForwardBatch::tokens
  int n_tokens = 0;     // tokens of this sequence in the batch
  int n_past = 0;       // tokens already in the KV; the batch's tokens sit at n_past, n_past + 1...
  // Block i holds the KV of positions [i*block_size, (i+1)*block_size). Covers n_past + n_tokens.
  std::span<const BlockId> block_table;
  bool need_logits = false;  // produce logits for this sequence's last token
  // With need_logits: logits for the last n_logits tokens (1, or all n_tokens of a speculative
  // step: the real token and the drafts after it), one row each in position order.
  int n_logits = 1;
  // The engine's sequence id (Sequence::id, never 0 for a real sequence). Runners of models
  // with per-sequence recurrent state (hybrid Gated DeltaNet models) key that state by it;
  // 0 = not supplied.
  uint64_t seq_id = 0;
  // Recurrent models (has_recurrent_state()), ids of state checkpoints, 0 = none:
  // load this checkpoint into the sequence's state before computing (a prefix hit: n_past is
  // where it was taken), and after computing save the state into this one (creating or
  // overwriting it). The engine frees ids with drop_checkpoints().
  uint64_t restore_checkpoint = 0;
  uint64_t save_checkpoint = 0;
  // Save the state into this checkpoint BEFORE computing (after any restore): the undo point of
  // a speculative step, restored when its drafts are rejected.
  uint64_t snapshot_before = 0;
  // Runners with supports_mid_step_checkpoints(): also save the state after the first
  // save_mid_tokens (0 < save_mid_tokens < n_tokens) of this step's tokens into this checkpoint
  // (0: none), as a step ending there would have saved it.
  uint64_t save_mid_checkpoint = 0;
  int save_mid_tokens = 0;
  // With need_logits: the sampler needs only each row's argmax (greedy, no bias, penalties or
  // logprobs: argmax_suffices()). When every such sequence of a batch says so, a runner may
  // return ForwardOutput::tokens instead of the logits (a GPU then copies back 4 bytes a row,
  // not the vocabulary).
  bool argmax_only = false;
  // With need_logits, no drafts, no logprobs and not argmax_only: the runner may decide the token
  // itself: the row's ForwardBatch::edits (logit bias and penalties), then `sampling`
  // (core/sampling.h; temperature 0: the argmax; `sampling.u` is the request's uniform draw for
  // this token, taken when the batch was built). It returns the token in ForwardOutput::tokens,
  // or -1 with the row's logits after the edits: the engine then samples that row on the host
  // with the same u.
  bool sample_on_device = false;
  RowSampling sampling{};
  // With sample_on_device, >= 0 (a request asking for logprobs): the runner also returns the
  // row's log-probability of its token and its n_top_logprobs best (ForwardOutput::logprob /
  // top), of the raw row (before the edits), for the rows it decides. A row with edits has
  // settings the runner always settles (decides()): it never comes back -1.
  int n_top_logprobs = -1;
  // With argmax_only or sample_on_device (structured output): the runner's token must be one
  // this constraint allows (TokenConstraint::allows); a token it refuses comes back -1 with the
  // row's logits (after the edits), and the engine then masks the row and draws on the host.
  TokenConstraint* check = nullptr;
  // Pipelined steps (ModelRunner::enqueue): >= 0 when this sequence's one token is the token the
  // previously enqueued batch decided for its logit row `token_from_row` (on the device already,
  // not yet known to the engine); ForwardBatch::tokens holds 0 in its place. The engine's
  // pipelined batches hold the previous batch's sequences that go on, in the same order (the
  // rows increase), so a GPU runner gathers its input ids from the previous token output.
  int token_from_row = -1;
};

// The token a token_from_row sequence reads: prev[s.token_from_row], prev being the previous
// batch's decided tokens (ForwardOutput::tokens); an error where that row has none (out of range,
// or -1: left to the host) or the sequence is not one token.
Result<TokenId> previous_token(const ForwardSeq& s, std::span<const int32_t> prev);

struct ForwardBatch {
  std::vector<TokenId> tokens;     // [n_tokens], sequences back to back
  std::vector<int32_t> positions;  // [n_tokens]
  std::vector<ForwardSeq> seqs;    // [n_seqs]
  int block_size = 0;              // tokens per KV block
  // The sample_on_device rows' bias and penalties, sorted by (row, token) (the logit row in batch
  // order), and the token in flight of each token_from_row row with penalties (PendingEdit::input
  // indexes `tokens`), sorted by row: the runner applies both before the draw
  // (Backend::adjust_logits, core/sampling.h's apply_logit_edits).
  std::vector<LogitEdit> edits;
  std::vector<PendingEdit> pending;
  int n_logit_rows() const;
  // True when some sequence needs logits and every one that does has argmax_only.
  bool all_argmax_only() const;
  // True when some sequence needs logits and every one that does has argmax_only or
  // sample_on_device, and at least one has sample_on_device.
  bool all_sampled_by_runner() const;
};

struct ForwardOutput {
  // [n_rows, n_vocab]: the rows of the sequences with need_logits, in batch order (n_logits each).
  // Empty when `tokens` holds the rows instead, unless some token is -1.
  std::vector<float> logits;
  // [n_rows] or empty: each row's token decided by the runner, only when every sequence with
  // need_logits had argmax_only (the first index of the largest logit) or sample_on_device (the
  // draw; -1: not decided, the row's logits are in `logits`, which is then n_rows long).
  std::vector<int32_t> tokens;
  // With `tokens` and some sequence's n_top_logprobs >= 0: [n_rows] each decided row's
  // log-probability of its token, and [n_rows, n_top] its best tokens, most likely first
  // (n_top >= every such sequence's n_top_logprobs). Rows left -1 are the engine's to compute.
  std::vector<float> logprob;
  std::vector<TopLogprob> top;
  int n_top = 0;
  int n_rows = 0;
  int n_vocab = 0;
  std::span<const float> row(int r) const {
    return {logits.data() + static_cast<size_t>(r) * n_vocab, static_cast<size_t>(n_vocab)};
  }
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual int n_vocab() const = 0;
  // Computes the batch. An error (device failure) fails the batch's requests, not the process.
  virtual Result<ForwardOutput> run(const ForwardBatch& batch) = 0;

  // Pipelined steps: enqueue() starts a batch, wait() returns the output of the oldest batch
  // enqueued and not yet waited for (an error there fails that batch's requests). At most two
  // batches are in flight; a batch with token_from_row rows is enqueued right after the batch
  // whose tokens it reads, before that one is waited for. Sequences of a batch in flight keep
  // their state until it is waited for (release_sequence comes after), and a batch's block
  // tables are read before enqueue() returns.
  // The default computes the batch inside enqueue() (with run()), so every runner speaks the
  // protocol; a runner whose enqueue() returns before the work is done (a GPU's queue) says so
  // with overlaps_steps(), and the engine then plans the next decode step while it runs.
  virtual void enqueue(const ForwardBatch& batch);
  virtual Result<ForwardOutput> wait();
  virtual bool overlaps_steps() const { return false; }
  // Whether ForwardSeq::check is applied when the batch is waited for (by then the engine has
  // accepted the previous batch's tokens, so the constraint is at the row's state) rather than
  // when it is enqueued: a checked row may then be planned ahead. A refused row's token is the
  // one the next batch (enqueued already) read; the engine drops that sequence's row there.
  virtual bool checks_when_waited() const { return false; }
  // Whether a sample_on_device row with these settings always gets its token from the runner
  // (never -1): only such rows (and argmax rows) can be followed by a pipelined step, whose
  // input is that token.
  virtual bool decides(const RowSampling& sampling) const {
    (void)sampling;
    return false;
  }

  // Backs KV block ids [0, n_blocks_total) with storage, keeping the existing blocks' contents.
  // False = out of memory; the engine then evicts and preempts instead of growing.
  virtual bool grow_kv_blocks(int n_blocks_total) = 0;
  // The sequence finished (or was dropped): per-sequence model state keyed by seq_id can go.
  virtual void release_sequence(uint64_t seq_id) { (void)seq_id; }
  // True for models with per-sequence recurrent state (Gated DeltaNet hybrids). The engine then
  // pairs every prefix hit with a state checkpoint (ForwardSeq::restore/save_checkpoint): a
  // cached KV prefix without the matching state would compute from a wrong state.
  virtual bool has_recurrent_state() const { return false; }
  // Bytes one state checkpoint holds (for the checkpoint budget); 0 when unknown.
  virtual size_t state_checkpoint_bytes() const { return 0; }
  // True when run() honours ForwardSeq::save_mid_checkpoint: the engine then lets a step run on
  // past a planned checkpoint instead of ending it there (a warm agent turn's prompt then takes
  // one step, not a second one for the tokens after its last block boundary).
  virtual bool supports_mid_step_checkpoints() const { return false; }
  // The engine will never restore these checkpoints again: their memory can go.
  virtual void drop_checkpoints(std::span<const uint64_t> ids) { (void)ids; }

 private:
  std::deque<Result<ForwardOutput>> computed_;  // the default enqueue()'s outputs, oldest first
};

inline bool ForwardBatch::all_sampled_by_runner() const {
  bool any = false;
  for (const ForwardSeq& s : seqs) {
    if (!s.need_logits) continue;
    if (!s.argmax_only && !s.sample_on_device) return false;
    any = any || s.sample_on_device;
  }
  return any;
}

inline bool ForwardBatch::all_argmax_only() const {
  bool any = false;
  for (const ForwardSeq& s : seqs) {
    if (!s.need_logits) continue;
    if (!s.argmax_only) return false;
    any = true;
  }
  return any;
}

inline int ForwardBatch::n_logit_rows() const {
  int n = 0;
  for (const ForwardSeq& s : seqs) n += s.need_logits ? s.n_logits : 0;
  return n;
}

}  // namespace t9::engine
