// EngineRunner: the engine's ModelRunner interface implemented by a Model. The engine owns the
// block ids (KvCacheManager); this adapter backs them in the model's KvPool and translates
// ForwardBatch into the model's Batch.
#pragma once

#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "model/model.h"
#include "model/recurrent_state.h"

namespace t9::model {

class EngineRunner final : public engine::ModelRunner {
 public:
  // CHECK-fails when another EngineRunner already drives `model` (see Model::claim_for_engine).
  explicit EngineRunner(Model& model);
  ~EngineRunner() override;
  EngineRunner(const EngineRunner&) = delete;
  EngineRunner& operator=(const EngineRunner&) = delete;
  int n_vocab() const override { return model_.n_vocab(); }
  Result<engine::ForwardOutput> run(const engine::ForwardBatch& batch) override;
  // The model's enqueue() and the backend's submit(): a pipelined step's input tokens are read
  // on the backend from the previous step's argmax (Batch::tokens), or, where the model does not
  // hold them (more rows than one logits call), taken on the host after waiting for that step.
  void enqueue(const engine::ForwardBatch& batch) override;
  Result<engine::ForwardOutput> wait() override;
  // The CUDA backend overlaps (Backend::asynchronous): `auto` pipelines there (docs/CUDA.md,
  // stage 35: greedy output identical, decode +1-2% on the H200 where the device is the bound).
  bool overlaps_steps() const override { return model_.backend().asynchronous(); }
  // The backend's sampler settles these settings (Backend::settles), unless sampling on the host
  // was asked for (set_sample_on_host, or TEMPO9_SAMPLE_ON_HOST in the environment).
  bool decides(const RowSampling& sampling) const override;
  // ForwardSeq::check is applied in wait() (Batch::check_at_wait), so checked rows may be
  // planned ahead.
  bool checks_when_waited() const override { return true; }
  // Every sampled row's logits come back and the engine samples (and takes logprobs) on the
  // host: a measurement switch, and the reference the backend's sampler is tested against.
  void set_sample_on_host(bool on) { sample_on_host_ = on; }
  bool grow_kv_blocks(int n_blocks_total) override;
  void release_sequence(uint64_t seq_id) override;
  bool has_recurrent_state() const override { return model_.recurrent() != nullptr; }
  // Model::forward copies the state at SeqInput::snapshot_after.
  bool supports_mid_step_checkpoints() const override { return has_recurrent_state(); }
  size_t state_checkpoint_bytes() const override;
  void drop_checkpoints(std::span<const uint64_t> ids) override;

 private:
  Result<int> state_slot(const engine::ForwardSeq& s);
  Status save_checkpoints(const engine::ForwardBatch& batch);
  // Records the batch on the model (no wait), then the state snapshots it asks for; on_model:
  // whether the model holds an output of it to wait for (also when a snapshot failed).
  Status start(const engine::ForwardBatch& batch, bool* on_model);
  // The output of the oldest started batch (waits for it).
  Result<engine::ForwardOutput> finish_oldest();

  // Started batches, oldest first: an error of start() (nothing on the model to wait for unless
  // on_model), or an output already taken (the host needed its tokens early).
  struct Started {
    Status status;
    bool on_model = false;
    std::optional<Result<engine::ForwardOutput>> output;
  };
  std::deque<Started> started_;
  bool sample_on_host_ = false;
  std::vector<int32_t> tokens_;  // a pipelined batch's tokens (-1 - row where read on the backend)

  Model& model_;
  std::vector<SeqInput> seqs_;         // reused between steps
  std::vector<RowSampling> sampling_;  // Batch::sampling, reused between steps
  // Hybrid models: engine sequence id -> RecurrentState slot, taken on first sight.
  std::unordered_map<uint64_t, int> slots_;
  // The checkpoint `id`, made on first use from a spare one when there is one.
  StateSnapshot& checkpoint(uint64_t id);

  // State checkpoints by id, in backend memory (RecurrentState::snapshot). Dropped ones are kept
  // as spares and reused: no allocation or free while serving (a free costs the CUDA backend
  // its cached graphs, cuda_stream.cuh).
  std::unordered_map<uint64_t, StateSnapshot> checkpoints_;
  std::vector<StateSnapshot> spare_;
};

}  // namespace t9::model
