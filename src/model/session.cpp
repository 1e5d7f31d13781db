#include "model/session.h"

namespace t9::model {

Status Session::ensure_blocks(int n_ctx) {
  const int bs = model_.config().kv_block_size;
  const int need = (n_ctx + bs - 1) / bs;
  const int missing = need - static_cast<int>(blocks_.size());
  if (missing <= 0) return {};
  KvPool& kv = model_.kv();
  const int first = kv.n_blocks();
  T9_TRY(kv.reserve(first + missing));
  for (int i = 0; i < missing; ++i) blocks_.push_back(first + i);
  return {};
}

Session::~Session() {
  if (state_slot_ >= 0) model_.recurrent()->release(state_slot_);
}

Result<Logits> Session::feed(std::span<const int32_t> tokens, LogitRows rows) {
  if (tokens.empty()) return error("session: no tokens to feed");
  T9_TRY(ensure_blocks(n_past_ + static_cast<int>(tokens.size())));
  if (model_.recurrent() && state_slot_ < 0) {
    T9_ASSIGN_OR_RETURN(state_slot_, model_.recurrent()->acquire());
  }
  SeqInput seq;
  seq.first_token = 0;
  seq.n_tokens = static_cast<int>(tokens.size());
  seq.n_past = n_past_;
  seq.block_table = blocks_;
  seq.logits = rows;
  seq.state_slot = state_slot_;  // after reset(), n_past 0 restarts the state from zero
  Batch b;
  b.tokens = tokens;
  b.seqs = std::span<const SeqInput>(&seq, 1);
  T9_ASSIGN_OR_RETURN(Logits out, model_.forward(b));
  n_past_ += seq.n_tokens;
  return out;
}

}  // namespace t9::model
