// EngineRunner: the engine's ModelRunner interface implemented by a Model. The engine owns the
// block ids (KvCacheManager); this adapter backs them in the model's KvPool and translates
// ForwardBatch into the model's Batch.
#pragma once

#include <unordered_map>

#include "engine/model_runner.h"
#include "model/model.h"

namespace t9::model {

class EngineRunner final : public engine::ModelRunner {
 public:
  explicit EngineRunner(Model& model) : model_(model) {}
  int n_vocab() const override { return model_.n_vocab(); }
  Result<engine::ForwardOutput> run(const engine::ForwardBatch& batch) override;
  bool grow_kv_blocks(int n_blocks_total) override;
  void release_sequence(uint64_t seq_id) override;
  bool has_recurrent_state() const override { return model_.recurrent() != nullptr; }

 private:
  Result<int> state_slot(const engine::ForwardSeq& s);

  Model& model_;
  std::vector<SeqInput> seqs_;  // reused between steps
  // Hybrid models: engine sequence id -> RecurrentState slot, taken on first sight.
  std::unordered_map<uint64_t, int> slots_;
};

}  // namespace t9::model
