// Test helpers: an Engine over a FakeModelRunner that collects every request's events.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "engine/engine.h"
#include "unit/engine/fake_model_runner.h"

namespace t9::engine::testing {

constexpr int kVocab = 64;
constexpr int kBlock = 4;

struct Collected {
  std::vector<TokenId> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TopLogprob>> top_logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string error;
  Usage usage;
  int n_events_after_finish = 0;
};

inline EngineConfig test_config(int max_blocks = 256, int chunk = 512, int batch = 512) {
  EngineConfig c;
  c.kv.pool.block_size_tokens = kBlock;
  c.kv.pool.grow_chunk_blocks = 8;
  c.kv.pool.max_blocks = max_blocks;
  c.scheduler.max_batch_tokens = batch;
  c.scheduler.prefill_chunk_tokens = chunk;
  c.scheduler.max_seqs = 16;
  c.max_context_tokens = 1 << 20;
  c.check_every_step = true;  // integrity after every step, also in Release test builds
  return c;
}

inline std::vector<TokenId> prompt_of(int n, int seed) {
  std::vector<TokenId> p(n);
  for (int i = 0; i < n; ++i) p[i] = static_cast<TokenId>((seed * 131 + i * 7 + i * i) % kVocab);
  return p;
}

// Greedy continuation of `prompt` for n tokens, straight from the fake model's oracle.
inline std::vector<TokenId> oracle(const std::vector<TokenId>& prompt, int n) {
  return FakeModelRunner::reference_generate(prompt, n, kVocab);
}

inline GenerateRequest greedy(std::vector<TokenId> prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

class Harness {
 public:
  explicit Harness(const EngineConfig& config = test_config())
      : runner(kVocab, config.kv.pool.block_size_tokens),
        engine(std::make_unique<Engine>(config, runner)) {}

  uint64_t submit(GenerateRequest r) {
    auto out = std::make_shared<Collected>();
    r.on_event = [out](const TokenEvent& ev) {
      if (out->finish != FinishReason::kNone) out->n_events_after_finish++;
      if (ev.token >= 0) {
        out->tokens.push_back(ev.token);
        out->logprobs.push_back(ev.logprob);
        out->top_logprobs.push_back(ev.top_logprobs);
      }
      out->finish = ev.finish;
      out->error = ev.error;
      out->usage = ev.usage;
    };
    Result<uint64_t> id = engine->submit(std::move(r));
    EXPECT_TRUE(id.ok()) << id.message();
    results[*id] = out;
    return *id;
  }

  Collected& result(uint64_t id) { return *results.at(id); }
  void run() { engine->run_until_idle(100000); }

  FakeModelRunner runner;
  std::unique_ptr<Engine> engine;
  std::map<uint64_t, std::shared_ptr<Collected>> results;
};

}  // namespace t9::engine::testing
