#include "engine/model_runner.h"

#include <utility>

namespace t9::engine {

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
  for (const ForwardSeq& s : batch.seqs) {
    if (s.token_from_row < 0) continue;
    if (s.n_tokens != 1 || static_cast<size_t>(s.token_from_row) >= prev.tokens.size() ||
        prev.tokens[static_cast<size_t>(s.token_from_row)] < 0) {
      computed_.push_back(error("sequence {}: no decided token in row {} of the previous step",
                                s.seq_id, s.token_from_row));
      return;
    }
    resolved.tokens[static_cast<size_t>(s.first_token)] =
        prev.tokens[static_cast<size_t>(s.token_from_row)];
    resolved.seqs[static_cast<size_t>(&s - batch.seqs.data())].token_from_row = -1;
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
