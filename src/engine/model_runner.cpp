#include "engine/model_runner.h"

#include <utility>

namespace t9::engine {

Result<TokenId> previous_token(const ForwardSeq& s, std::span<const int32_t> prev) {
  const auto r = static_cast<size_t>(s.token_from_row);
  if (s.n_tokens != 1 || s.token_from_row < 0 || r >= prev.size() || prev[r] < 0)
    return error("sequence {}: no decided token in row {} of the previous batch ({} rows)",
                 s.seq_id, s.token_from_row, prev.size());
  return prev[r];
}

// The synchronous form of the pipeline protocol: the batch is computed now and its output kept
// for wait(). A token_from_row row takes its token from the newest kept output, which is the
// batch enqueued just before (the protocol's order).
void ModelRunner::enqueue(const ForwardBatch& batch) {
  bool reads_previous = false;
  for (const ForwardSeq& s : batch.seqs) reads_previous = reads_previous || s.token_from_row >= 0;
  if (!reads_previous) {
    computed_.push_back(run(batch));
    return;
  }
  if (computed_.empty() || !computed_.back().ok()) {
    computed_.push_back(error("a pipelined step without its previous step's tokens"));
    return;
  }
  const ForwardOutput& prev = *computed_.back();
  ForwardBatch resolved = batch;
  for (ForwardSeq& s : resolved.seqs) {
    if (s.token_from_row < 0) continue;
    Result<TokenId> t = previous_token(s, prev.tokens);
    if (!t.ok()) {
      computed_.push_back(error("{}", t.message()));
      return;
    }
    resolved.tokens[static_cast<size_t>(s.first_token)] = *t;
    s.token_from_row = -1;
  }
  computed_.push_back(run(resolved));
}

Result<ForwardOutput> ModelRunner::wait() {
  if (computed_.empty()) return error("wait() without an enqueued step");
  Result<ForwardOutput> out = std::move(computed_.front());
  computed_.pop_front();
  return out;
}

}  // namespace t9::engine
