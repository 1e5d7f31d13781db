// Helpers of the integration tests: the engine driving a real model (SmolLM2-135M on the CPU
// backend), synchronously on the test thread. One Model is loaded per process and shared by
// every Engine the tests build; each Engine starts with an empty prefix cache, and a block's
// stale KV from an earlier engine is never read (the engine writes a block before any sequence
// attends to it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace t9::integration {

using engine::TokenId;

inline constexpr const char* kSmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";

// $TEMPO9_MODELS, else ~/.cache/tempo9/models.
std::string models_dir();
std::string model_path(const std::string& file);

// The process-wide SmolLM2 model and tokenizer; loaded on first use. A missing or unreadable model
// is reported as an Error (the caller fails its test: never skips).
struct RealModel {
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
};
Result<RealModel*> smollm2();
// A second, independent instance of the same model (its own KV pool): for reference runs while
// an engine on smollm2() is alive (one engine per model at a time, see Model::claim_for_engine).
Result<RealModel*> smollm2_twin();

// An engine configuration the way `tempo9 run` builds one, with test switches.
struct EngineSetup {
  int prefill_chunk_tokens = 4096;  // >= every prompt: whole-prompt prefill
  int max_batch_tokens = 4096;
  int max_blocks = 512;
  int max_seqs = 64;
  bool prefix_cache = true;
  bool integrity_checks = true;  // check_integrity() after every step (off for timing)
  int spec_draft = 0;            // speculative prompt-lookup drafts per step (0 = off)
  // Requests ask for logprobs (and this many top ones): the backend's sampler returns them with
  // the tokens (Backend::logprobs), unless sample_on_host.
  bool logprobs = false;
  int top_logprobs = 0;
  // Every sampled row's logits come back and the engine samples on the host
  // (EngineRunner::set_sample_on_host): the reference for the backend's sampler.
  bool sample_on_host = false;
  // Sampling: temperature 0 (the default) is greedy; above it, request i gets seed + i.
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 1;
  float repetition_penalty = 1.0f;  // and presence: penalties for any temperature
  float presence_penalty = 0.0f;
  // Pipelined steps (EngineConfig::pipeline on; the CPU runner computes inside enqueue()).
  bool pipeline = false;
};
engine::EngineConfig make_engine_config(const EngineSetup& s, int block_size);

// What one request produced.
struct Output {
  std::vector<TokenId> tokens;  // generated ids, in order
  std::vector<float> logprobs;  // with EngineSetup::logprobs, one per token
  std::vector<std::vector<engine::TopLogprob>> top_logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string error;
  engine::Usage usage;
};

// A greedy (temperature 0) request for exactly max_tokens tokens (no stop ids).
engine::GenerateRequest greedy_request(const std::vector<TokenId>& prompt, int max_tokens);

// Submits every prompt at once (ids in order), steps the engine until idle and returns the outputs
// in prompt order. The engine is left alive so the caller can read stats or submit more.
class EngineSession {
 public:
  EngineSession(RealModel& rm, const EngineSetup& setup);
  std::vector<Output> run(const std::vector<std::vector<TokenId>>& prompts, int max_tokens);
  // Queues one greedy request; its Output fills in as the engine steps.
  std::shared_ptr<Output> submit(const std::vector<TokenId>& prompt, int max_tokens);
  engine::EngineStats stats() const { return engine_->stats(); }
  engine::Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<engine::ModelRunner> runner_;
  std::unique_ptr<engine::Engine> engine_;
  EngineSetup setup_;
  uint64_t n_submitted_ = 0;
};

// VmRSS of this process in KiB (from /proc/self/status); -1 when unreadable.
int64_t vm_rss_kib();

}  // namespace t9::integration
