// Session: one sequence run without the engine (tests, benchmarks, tools). It takes fresh KV
// block ids from the model's pool as it grows and never gives them back; the engine's
// KvCacheManager is the real block owner in the server.
#pragma once

#include <span>
#include <vector>

#include "model/model.h"

namespace t9::model {

class Session {
 public:
  explicit Session(Model& model) : model_(model) {}
  ~Session();  // gives back the recurrent-state slot (hybrid models)
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends `tokens` (positions n_past() ...) and returns their logits (kLast: one row).
  Result<Logits> feed(std::span<const int32_t> tokens, LogitRows rows = LogitRows::kLast);
  int n_past() const { return n_past_; }
  const std::vector<int32_t>& block_table() const { return blocks_; }
  // Forgets the tokens (their blocks are reused from position 0).
  void reset() { n_past_ = 0; }

 private:
  Status ensure_blocks(int n_ctx);
  Model& model_;
  std::vector<int32_t> blocks_;
  int n_past_ = 0;
  int state_slot_ = -1;  // hybrid models: taken on the first feed
};

}  // namespace t9::model
