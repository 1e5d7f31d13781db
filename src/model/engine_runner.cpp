#include "model/engine_runner.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"

namespace t9::model {

EngineRunner::EngineRunner(Model& model)
    : sample_on_host_(std::getenv("TEMPO9_SAMPLE_ON_HOST") != nullptr), model_(model) {
  T9_CHECK(model_.claim_for_engine(),
           "a second engine on one model: both would write the same KV blocks and state slots");
}

EngineRunner::~EngineRunner() {
  for (const auto& [seq_id, slot] : slots_) model_.recurrent()->release(slot);
  model_.release_from_engine();
}

bool EngineRunner::decides(const RowSampling& sampling) const {
  return !sample_on_host_ && model_.backend().settles(sampling);
}

Result<engine::ForwardOutput> EngineRunner::run(const engine::ForwardBatch& batch) {
  enqueue(batch);
  return wait();
}

void EngineRunner::enqueue(const engine::ForwardBatch& batch) {
  Started st;
  st.status = start(batch, &st.on_model);
  model_.backend().submit();
  started_.push_back(std::move(st));
}

Result<engine::ForwardOutput> EngineRunner::wait() {
  if (started_.empty()) return error("wait() without an enqueued batch");
  Result<engine::ForwardOutput> out = finish_oldest();
  started_.pop_front();
  return out;
}

Result<engine::ForwardOutput> EngineRunner::finish_oldest() {
  Started& st = started_.front();
  if (st.output) return std::move(*st.output);
  if (!st.status.ok()) {
    if (st.on_model) (void)model_.wait();  // its output is void with the error
    return error("{}", st.status.message());
  }
  T9_ASSIGN_OR_RETURN(Logits lg, model_.wait());
  engine::ForwardOutput out;
  out.logits = std::move(lg.data);
  out.tokens = std::move(lg.tokens);
  out.n_rows = lg.n_rows;
  out.n_vocab = lg.n_vocab;
  if (!lg.logprobs.empty()) {  // [n_rows, 1 + k] and [n_rows, k]
    const size_t k = static_cast<size_t>(lg.n_top);
    out.n_top = lg.n_top;
    out.logprob.resize(static_cast<size_t>(lg.n_rows));
    out.top.resize(static_cast<size_t>(lg.n_rows) * k);
    for (size_t r = 0; r < out.logprob.size(); ++r) {
      out.logprob[r] = lg.logprobs[r * (1 + k)];
      for (size_t j = 0; j < k; ++j)
        out.top[r * k + j] = {lg.top_ids[r * k + j], lg.logprobs[r * (1 + k) + 1 + j]};
    }
  }
  return out;
}

Status EngineRunner::start(const engine::ForwardBatch& batch, bool* on_model) {
  if (batch.block_size != model_.config().kv_block_size)
    return error("engine block size {} != model KV block size {}", batch.block_size,
                 model_.config().kv_block_size);
  std::span<const int32_t> tokens = batch.tokens;
  if (std::any_of(batch.seqs.begin(), batch.seqs.end(),
                  [](const engine::ForwardSeq& s) { return s.token_from_row >= 0; })) {
    // The previous batch's tokens: read on the backend where the model keeps them, else on the
    // host once that batch is done (it is the newest started one).
    tokens_.assign(batch.tokens.begin(), batch.tokens.end());
    for (const engine::ForwardSeq& s : batch.seqs) {
      if (s.token_from_row < 0) continue;
      if (s.token_from_row < model_.previous_tokens()) {
        tokens_[static_cast<size_t>(s.first_token)] = -1 - s.token_from_row;
        continue;
      }
      if (started_.empty()) return error("a pipelined batch without its previous batch");
      Started& prev = started_.back();
      if (!prev.output) {
        // finish_oldest() works on the front: the previous batch must be the only one left.
        if (started_.size() != 1) return error("a pipelined batch behind two unfinished ones");
        prev.output = finish_oldest();
      }
      if (!prev.output->ok()) return error("the previous batch failed");
      const std::vector<int32_t>& prev_tokens = (*prev.output)->tokens;
      if (s.token_from_row < static_cast<int>(prev_tokens.size()) && s.n_tokens == 1 &&
          prev_tokens[static_cast<size_t>(s.token_from_row)] == -1) {
        // Refused by its check (the backend's token is not on the host): any token will do, the
        // engine drops this row (Engine::note_stale_lookahead).
        tokens_[static_cast<size_t>(s.first_token)] = 0;
        continue;
      }
      T9_ASSIGN_OR_RETURN(tokens_[static_cast<size_t>(s.first_token)],
                          engine::previous_token(s, prev_tokens));
    }
    tokens = tokens_;
  }
  seqs_.clear();
  for (const engine::ForwardSeq& s : batch.seqs) {
    SeqInput q;
    q.first_token = s.first_token;
    q.n_tokens = s.n_tokens;
    q.n_past = s.n_past;
    q.block_table = s.block_table;
    q.logits = s.need_logits ? LogitRows::kLast : LogitRows::kNone;
    if (s.need_logits && s.n_logits > 1) {
      // A speculative step: rows for the real token and every draft, i.e. all of its tokens.
      if (s.n_logits != s.n_tokens)
        return error("{} logit rows asked for a step of {} tokens", s.n_logits, s.n_tokens);
      q.logits = LogitRows::kAll;
    }
    if (model_.recurrent()) {
      T9_ASSIGN_OR_RETURN(q.state_slot, state_slot(s));
      if (s.save_mid_checkpoint != 0) {
        q.snapshot_after = s.save_mid_tokens;
        q.snapshot = &checkpoint(s.save_mid_checkpoint);  // map nodes stay put
      }
    }
    seqs_.push_back(q);
  }
  Batch b;
  b.tokens = tokens;
  b.positions = batch.positions;
  b.seqs = seqs_;
  b.argmax_only = batch.all_argmax_only();
  sampling_.clear();
  if (!b.argmax_only && !sample_on_host_ && batch.all_sampled_by_runner()) {
    for (const engine::ForwardSeq& s : batch.seqs) {
      if (!s.need_logits) continue;
      // argmax_only rows: temperature 0 (the argmax); sample_on_device rows: one row each.
      for (int j = 0; j < s.n_logits; ++j)
        sampling_.push_back(s.sample_on_device ? s.sampling : RowSampling{});
      // One top count for the call: the largest asked (the others' rows are cut on the host).
      if (s.sample_on_device) b.n_top_logprobs = std::max(b.n_top_logprobs, s.n_top_logprobs);
    }
    b.sampling = sampling_;
    b.edits = batch.edits;
    b.pending = batch.pending;
  }
  if (b.argmax_only || !b.sampling.empty()) {
    // The checks by logit row, kept with this batch's check (made in wait(): checks_when_waited,
    // so a batch enqueued behind this one has its own); built only for a batch that has one.
    const bool checked = std::any_of(batch.seqs.begin(), batch.seqs.end(), [](const auto& s) {
      return s.need_logits && s.check != nullptr;
    });
    if (checked) {
      auto checks = std::make_shared<std::vector<engine::TokenConstraint*>>();
      for (const engine::ForwardSeq& s : batch.seqs)
        if (s.need_logits) checks->insert(checks->end(), static_cast<size_t>(s.n_logits), s.check);
      b.accepts = [checks](int r, int32_t t) {
        engine::TokenConstraint* c = (*checks)[static_cast<size_t>(r)];
        return c == nullptr || c->allows(t);
      };
    }
    b.check_at_wait = true;
  }
  T9_TRY(model_.enqueue(b));
  *on_model = true;
  if (model_.recurrent()) T9_TRY(save_checkpoints(batch));
  return {};
}

// The state continues from the slot's contents, or from a restored checkpoint (a prefix hit);
// n_past == 0 restarts it (Model::forward). A sequence first seen at n_past > 0 without a
// checkpoint would compute from a wrong state: refused.
Result<int> EngineRunner::state_slot(const engine::ForwardSeq& s) {
  if (s.seq_id == 0)
    return error(
        "hybrid model: the engine did not supply ForwardSeq::seq_id for the recurrent "
        "state");
  RecurrentState& rs = *model_.recurrent();
  int slot = -1;
  if (auto it = slots_.find(s.seq_id); it != slots_.end()) {
    slot = it->second;
  } else {
    if (s.n_past != 0 && s.restore_checkpoint == 0)
      return error(
          "hybrid model: sequence {} starts at position {} without a recurrent-state "
          "checkpoint",
          s.seq_id, s.n_past);
    T9_ASSIGN_OR_RETURN(slot, rs.acquire());
    slots_.emplace(s.seq_id, slot);
  }
  if (s.restore_checkpoint != 0) {
    auto ck = checkpoints_.find(s.restore_checkpoint);
    if (ck == checkpoints_.end())
      return error("hybrid model: sequence {}: state checkpoint {} is unknown", s.seq_id,
                   s.restore_checkpoint);
    T9_TRY(rs.restore(slot, ck->second));
  }
  if (s.snapshot_before != 0) T9_TRY(rs.snapshot(slot, checkpoint(s.snapshot_before)));
  return slot;
}

StateSnapshot& EngineRunner::checkpoint(uint64_t id) {
  auto it = checkpoints_.find(id);
  if (it != checkpoints_.end()) return it->second;
  StateSnapshot snap;
  if (!spare_.empty()) {
    snap = std::move(spare_.back());
    spare_.pop_back();
  }
  return checkpoints_.emplace(id, std::move(snap)).first->second;
}

Status EngineRunner::save_checkpoints(const engine::ForwardBatch& batch) {
  for (const engine::ForwardSeq& s : batch.seqs) {
    if (s.save_checkpoint == 0) continue;
    T9_TRY(model_.recurrent()->snapshot(slots_.at(s.seq_id), checkpoint(s.save_checkpoint)));
  }
  return {};
}

size_t EngineRunner::state_checkpoint_bytes() const {
  const RecurrentState* rs = model_.recurrent();
  return rs ? rs->slot_floats() * sizeof(float) : 0;
}

void EngineRunner::drop_checkpoints(std::span<const uint64_t> ids) {
  for (uint64_t id : ids) {
    auto it = checkpoints_.find(id);
    if (it == checkpoints_.end()) continue;
    spare_.push_back(std::move(it->second));
    checkpoints_.erase(it);
  }
}

void EngineRunner::release_sequence(uint64_t seq_id) {
  auto it = slots_.find(seq_id);
  if (it == slots_.end()) return;
  model_.recurrent()->release(it->second);
  slots_.erase(it);
}

bool EngineRunner::grow_kv_blocks(int n_blocks_total) {
  return model_.kv().reserve(n_blocks_total).ok();
}

}  // namespace t9::model
