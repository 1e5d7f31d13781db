// Engine tests over FakeModelRunner, whose logits come from the token history it reads back from
// its fake KV: outputs equal FakeModelRunner::reference_generate (the history given directly)
// only if every block table, position and prefix hit was right.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "engine/token_channel.h"
#include "unit/engine/engine_harness.h"

namespace t9::engine {
namespace {

using testing::FakeModelRunner;
using testing::greedy;
using testing::Harness;
using testing::kVocab;
using testing::oracle;
using testing::prompt_of;
using testing::test_config;

// The checkpoint budget in bytes sets how many recurrent-state checkpoints the prefix cache keeps
// (tempo9 serve --state-memory): budget / bytes per checkpoint, at least 2; budget 0 keeps the
// count given; models without recurrent state keep none.
TEST(EngineConfig, StateCheckpointBudgetSetsTheCount) {
  FakeModelRunner runner(kVocab, 4);
  runner.recurrent = true;
  const auto per = static_cast<int64_t>(runner.state_checkpoint_bytes());
  ASSERT_GT(per, 0);
  EngineConfig c;
  c.kv.max_state_checkpoints = 7;
  c.state_checkpoint_budget_bytes = 10 * per + per / 2;
  EXPECT_TRUE(adapted_to(c, runner).kv.recurrent_checkpoints);
  EXPECT_EQ(adapted_to(c, runner).kv.max_state_checkpoints, 10);
  c.state_checkpoint_budget_bytes = 1;
  EXPECT_EQ(adapted_to(c, runner).kv.max_state_checkpoints, 2);
  c.state_checkpoint_budget_bytes = 0;
  EXPECT_EQ(adapted_to(c, runner).kv.max_state_checkpoints, 7);
  runner.recurrent = false;
  c.state_checkpoint_budget_bytes = 10 * per;
  EXPECT_FALSE(adapted_to(c, runner).kv.recurrent_checkpoints);
}

TEST(Engine, GreedyOutputMatchesTheOracle) {
  Harness h;
  auto p = prompt_of(10, 1);
  uint64_t id = h.submit(greedy(p, 12));
  h.run();
  const auto& r = h.result(id);
  EXPECT_EQ(r.tokens, oracle(p, 12));
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.usage.n_prompt_tokens, 10);
  EXPECT_EQ(r.usage.n_generated_tokens, 12);
  EXPECT_EQ(r.n_events_after_finish, 0);
  // Every prompt token once, every generated token but the last once.
  EXPECT_EQ(h.runner.n_tokens_computed, 10 + 11);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

// A runner that decides the tokens itself (ForwardSeq::sample_on_device: the batch's edits for
// bias and penalties, then the draw with the u the engine took when it built the batch), leaving
// every second row to the host with its edited logits, gives the same tokens as host sampling
// with the same seeds, in a batch mixing plain greedy, penalized greedy and sampled requests.
TEST(Engine, SampledRowsFromTheRunnerEqualHostSampling) {
  std::vector<TokenId> p;
  for (int i = 0; i < 30; ++i) p.push_back(static_cast<TokenId>(i % 5));
  constexpr int kRequests = 6;
  std::vector<std::vector<TokenId>> got[2];
  for (int runner_samples = 0; runner_samples < 2; ++runner_samples) {
    Harness h(test_config());
    h.runner.sample_when_asked = runner_samples == 1;
    std::vector<uint64_t> ids;
    for (int k = 0; k < kRequests; ++k) {
      auto r = greedy(p, 20);
      r.prompt.push_back(static_cast<TokenId>(k));
      if (k < 3 || k == 4) {  // request 3 stays greedy: argmax rows in the same steps
        r.sampling.temperature = 0.8f;
        r.sampling.top_p = k == 1 ? 0.9f : 1.0f;
        r.sampling.top_k = k == 2 ? 5 : 0;
        r.sampling.seed = 100 + static_cast<uint64_t>(k);
      }
      if (k >= 4) {  // 4: sampled with penalties and bias; 5: greedy with them
        r.sampling.repetition_penalty = 1.3f;
        r.sampling.presence_penalty = 0.4f;
        r.sampling.frequency_penalty = 0.2f;
        r.sampling.logit_bias = {{3, 1.5f}, {7, -2.0f}};
      }
      ids.push_back(h.submit(std::move(r)));
    }
    h.run();
    for (uint64_t id : ids) got[runner_samples].push_back(h.result(id).tokens);
    if (runner_samples == 1) {
      EXPECT_GT(h.runner.n_sample_runs, 0);
      EXPECT_GT(h.runner.n_sampled_rows, 10);
    }
  }
  auto q5 = p;
  q5.push_back(5);
  EXPECT_NE(got[0][5], oracle(q5, 20));  // the penalties change the greedy tokens
  for (int k = 0; k < kRequests; ++k) {
    EXPECT_EQ(got[0][static_cast<size_t>(k)].size(), 20u);
    EXPECT_EQ(got[1][static_cast<size_t>(k)], got[0][static_cast<size_t>(k)]) << "request " << k;
  }
  auto q0 = p;
  q0.push_back(0);
  EXPECT_NE(got[0][0], oracle(q0, 20));  // the draws depart from greedy somewhere
}

// Logprobs from a runner that decides the rows (ForwardSeq::n_top_logprobs: the row's raw
// log_softmax beside its token, as Backend::logprobs) equal the host's over the copied logits,
// bit for bit (the same row_logprobs on the same row), in steps mixing greedy and sampled rows,
// top lists of 0-5 and a plain greedy row (argmax) beside them; with every second row left to
// the host (-1) too. A request with penalties goes to the runner only when it settles every
// draw (its logprobs then of the row before the edits), else it keeps the host path.
TEST(Engine, LogprobsFromTheRunnerEqualHostLogprobs) {
  std::vector<TokenId> p;
  for (int i = 0; i < 24; ++i) p.push_back(static_cast<TokenId>((i * 5) % 11));
  struct Case {
    float temperature, top_p, repetition;
    bool logprobs;
    int n_top;
  };
  const std::vector<std::vector<Case>> batches = {
      {{0.0f, 1.0f, 1.0f, true, 3},
       {0.8f, 0.9f, 1.0f, true, 5},
       {0.7f, 1.0f, 1.0f, true, 0},
       {0.0f, 1.0f, 1.0f, false, 0}},
      {{0.8f, 1.0f, 1.3f, true, 2}, {0.0f, 1.0f, 1.0f, false, 0}}};
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    std::vector<testing::Collected>
        got[3];  // host, runner leaving every second row, runner settling all
    int64_t runner_rows[3] = {};
    for (int mode = 0; mode < 3; ++mode) {
      Harness h(test_config());
      h.runner.sample_when_asked = mode > 0;
      h.runner.settle_all = mode == 2;
      std::vector<uint64_t> ids;
      for (size_t k = 0; k < batches[bi].size(); ++k) {
        const Case& c = batches[bi][k];
        auto r = greedy(p, 12);
        r.prompt.push_back(static_cast<TokenId>(k));
        r.sampling.temperature = c.temperature;
        r.sampling.top_p = c.top_p;
        r.sampling.repetition_penalty = c.repetition;
        r.sampling.seed = 7 + k;
        r.logprobs = c.logprobs;
        r.n_top_logprobs = c.n_top;
        ids.push_back(h.submit(std::move(r)));
      }
      h.run();
      for (uint64_t id : ids) got[mode].push_back(h.result(id));
      runner_rows[mode] = h.runner.n_logprob_rows;
    }
    if (bi == 0) {
      EXPECT_GT(runner_rows[1], 10);  // the runner's logprobs were used
      EXPECT_GT(runner_rows[2], 3 * 11);
    } else {
      // Penalties: the runner's (of the rows before its edits) only where it settles every draw.
      EXPECT_EQ(runner_rows[1], 0);
      EXPECT_GT(runner_rows[2], 11);
    }
    for (int mode = 1; mode < 3; ++mode) {
      for (size_t k = 0; k < got[0].size(); ++k) {
        const testing::Collected &a = got[0][k], &b = got[mode][k];
        SCOPED_TRACE(::testing::Message()
                     << "batch " << bi << " request " << k << " mode " << mode);
        EXPECT_EQ(a.finish, FinishReason::kLength) << a.error;
        EXPECT_EQ(b.finish, FinishReason::kLength) << b.error;
        EXPECT_EQ(b.tokens, a.tokens);
        ASSERT_EQ(b.logprobs.size(), a.logprobs.size());
        ASSERT_EQ(b.top_logprobs.size(), a.top_logprobs.size());
        if (!batches[bi][k].logprobs) continue;
        for (size_t t = 0; t < a.logprobs.size(); ++t) {
          EXPECT_EQ(b.logprobs[t], a.logprobs[t]) << "token " << t;
          ASSERT_EQ(b.top_logprobs[t].size(), static_cast<size_t>(batches[bi][k].n_top));
          for (size_t j = 0; j < a.top_logprobs[t].size(); ++j) {
            EXPECT_EQ(b.top_logprobs[t][j].token, a.top_logprobs[t][j].token);
            EXPECT_EQ(b.top_logprobs[t][j].logprob, a.top_logprobs[t][j].logprob);
          }
        }
      }
    }
  }
}

// A runner that decides rows asked for logprobs but returns no logprobs fails those requests with
// a message instead of sending tokens without them.
TEST(Engine, DecidedTokensWithoutTheirLogprobsFailTheRequest) {
  Harness h(test_config());
  h.runner.sample_when_asked = true;
  h.runner.settle_all = true;
  h.runner.omit_logprobs = true;
  auto r = greedy(prompt_of(8, 3), 4);
  r.logprobs = true;
  const uint64_t id = h.submit(std::move(r));
  h.run();
  EXPECT_EQ(h.result(id).finish, FinishReason::kError);
  EXPECT_NE(h.result(id).error.find("without the logprobs"), std::string::npos)
      << h.result(id).error;
  EXPECT_TRUE(h.result(id).tokens.empty());
}

// A runner that hands back only each row's argmax when every sequence of the step asks for just
// that (greedy, no bias, penalties or logprobs: ForwardSeq::argmax_only), as the model does for
// the GPU: the oracle's tokens, speculative drafts verified from the ids. A request that wants
// logprobs keeps the logits path.
TEST(Engine, ArgmaxRowsFromTheRunnerGiveTheOracleTokens) {
  auto cfg = test_config();
  cfg.scheduler.spec = {4, 3, 1};
  Harness h(cfg);
  h.runner.argmax_when_asked = true;
  std::vector<TokenId> p;
  for (int i = 0; i < 40; ++i) p.push_back(static_cast<TokenId>(i % 7));
  std::vector<uint64_t> ids;
  for (int k = 0; k < 3; ++k) {
    auto q = p;
    q.push_back(static_cast<TokenId>(k));
    ids.push_back(h.submit(greedy(q, 24)));
  }
  h.run();
  for (int k = 0; k < 3; ++k) {
    auto q = p;
    q.push_back(static_cast<TokenId>(k));
    EXPECT_EQ(h.result(ids[k]).tokens, oracle(q, 24)) << k;
  }
  EXPECT_GT(h.runner.n_argmax_runs, 0);
  EXPECT_GT(h.engine->stats().n_draft_tokens, 0);

  Harness h2(cfg);
  h2.runner.argmax_when_asked = true;
  auto r = greedy(p, 10);
  r.logprobs = true;
  const uint64_t id = h2.submit(std::move(r));
  h2.run();
  EXPECT_EQ(h2.result(id).tokens, oracle(p, 10));
  EXPECT_EQ(h2.runner.n_argmax_runs, 0);
}

TEST(Engine, ChunkedPrefillGivesTheSameTokens) {
  auto p = prompt_of(300, 2);
  for (int chunk : {16, 128, 1000}) {
    Harness h(test_config(256, chunk, 512));
    uint64_t id = h.submit(greedy(p, 8));
    int n_steps = h.engine->run_until_idle(1000);
    EXPECT_EQ(h.result(id).tokens, oracle(p, 8)) << "chunk " << chunk;
    EXPECT_EQ(h.runner.n_tokens_computed, 300 + 7) << "chunk " << chunk;
    // ceil(300 / chunk) prompt steps (the last one samples token 1) + 7 decode steps.
    EXPECT_EQ(n_steps, (300 + chunk - 1) / chunk + 7) << "chunk " << chunk;
  }
}

TEST(Engine, BatchedRequestsProduceWhatEachProducesAlone) {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r = greedy(prompt_of(5 + 9 * i, 10 + i), 6 + i);
    if (i % 2) {  // seeded sampling: the request's own RNG, whatever else is in the batch
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 1000 + i;
    }
    reqs.push_back(r);
  }
  std::vector<std::vector<TokenId>> alone;
  for (const auto& r : reqs) {
    Harness h;
    uint64_t id = h.submit(r);
    h.run();
    alone.push_back(h.result(id).tokens);
  }
  Harness h(test_config(256, 16, 40));  // a small budget so batches mix prefill and decode
  std::vector<uint64_t> ids;
  for (const auto& r : reqs) ids.push_back(h.submit(r));
  h.run();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(h.result(ids[i]).tokens, alone[i]) << "request " << i;
    EXPECT_EQ(h.result(ids[i]).tokens.size(), static_cast<size_t>(reqs[i].max_tokens));
  }
  for (size_t i = 0; i < reqs.size(); i += 2) EXPECT_EQ(alone[i], oracle(reqs[i].prompt, 6 + i));
}

TEST(Engine, WarmPrefixCacheGivesTheSameTokensAndComputesOnlyTheSuffix) {
  Harness h;
  auto p = prompt_of(41, 3);
  uint64_t cold = h.submit(greedy(p, 5));
  h.run();
  int64_t cold_computed = h.runner.n_tokens_computed;
  EXPECT_EQ(cold_computed, 41 + 4);
  uint64_t warm = h.submit(greedy(p, 5));
  h.run();
  EXPECT_EQ(h.result(warm).tokens, h.result(cold).tokens);
  EXPECT_EQ(h.result(warm).tokens, oracle(p, 5));
  // 10 full blocks (40 tokens) are cached; token 41 is recomputed for its logits.
  EXPECT_EQ(h.result(warm).usage.n_cached_prompt_tokens, 40);
  EXPECT_EQ(h.result(cold).usage.n_cached_prompt_tokens, 0);
  EXPECT_EQ(h.runner.n_tokens_computed - cold_computed, 1 + 4);
  EXPECT_EQ(h.engine->stats().n_cached_prompt_tokens, 40);
  // A different suffix after a shared 20-token head reuses the 5 head blocks.
  auto q = p;
  q.resize(20);
  for (int i = 0; i < 9; ++i) q.push_back(static_cast<TokenId>(i * 5 % kVocab));
  uint64_t branch = h.submit(greedy(q, 3));
  h.run();
  EXPECT_EQ(h.result(branch).usage.n_cached_prompt_tokens, 20);
  EXPECT_EQ(h.result(branch).tokens, oracle(q, 3));
}

// Speculative decoding (prompt-lookup drafts, greedy verification) on the fake model: the tokens
// are the oracle's whatever was drafted; drafts were made and some kept (the period-5 prompt makes
// n-gram drafts; the oracle's pseudo-random choices accept a few), and a step with drafts computes
// more than one token. Logprobs stay the model's own.
TEST(Engine, SpeculativeDraftsNeverChangeTheTokens) {
  auto cfg = test_config();
  cfg.scheduler.spec = {4, 3, 1};
  Harness h(cfg);
  std::vector<TokenId> p;
  for (int i = 0; i < 60; ++i) p.push_back(static_cast<TokenId>(i % 5));
  std::vector<uint64_t> ids;
  for (int k = 0; k < 6; ++k) {
    auto q = p;
    q.push_back(static_cast<TokenId>(k));
    ids.push_back(h.submit(greedy(q, 40)));
  }
  h.run();
  for (int k = 0; k < 6; ++k) {
    auto q = p;
    q.push_back(static_cast<TokenId>(k));
    EXPECT_EQ(h.result(ids[k]).tokens, oracle(q, 40)) << k;
  }
  const EngineStats st = h.engine->stats();
  EXPECT_GT(st.n_draft_tokens, 0);
  EXPECT_LE(st.n_accepted_draft_tokens, st.n_draft_tokens);
  // The six prompts share 60 tokens: the first computes them, the others wait for its blocks
  // (Scheduler::defer_for_shared_prefix) and hit all 15 blocks.
  int64_t n_prompt_computed = 0;
  for (int k = 0; k < 6; ++k) {
    const int cached = h.result(ids[k]).usage.n_cached_prompt_tokens;
    EXPECT_EQ(cached, k == 0 ? 0 : 60) << k;
    n_prompt_computed += 61 - cached;
  }
  // Computed: each prompt's uncached part, then one real token per decode step plus its drafts.
  // A step emits its real token's successor and one more per accepted draft, so the 39 tokens
  // after the first took 39 - accepted steps (drafts never run past max_tokens, so none is
  // dropped).
  EXPECT_EQ(h.runner.n_tokens_computed,
            n_prompt_computed + 6 * 39 - st.n_accepted_draft_tokens + st.n_draft_tokens);
  std::printf("drafts %ld, accepted %ld\n", static_cast<long>(st.n_draft_tokens),
              static_cast<long>(st.n_accepted_draft_tokens));
}

TEST(Engine, NoPrefixCacheSwitchRecomputesEverything) {
  auto cfg = test_config();
  cfg.kv.enable_prefix_cache = false;
  Harness h(cfg);
  auto p = prompt_of(41, 3);
  h.submit(greedy(p, 5));
  h.run();
  uint64_t again = h.submit(greedy(p, 5));
  h.run();
  EXPECT_EQ(h.result(again).usage.n_cached_prompt_tokens, 0);
  EXPECT_EQ(h.runner.n_tokens_computed, 2 * (41 + 4));
  EXPECT_EQ(h.result(again).tokens, oracle(p, 5));
}

TEST(Engine, PreemptionUnderMemoryPressureKeepsOutputsExact) {
  Harness h(test_config(/*max_blocks=*/24, 32, 64));  // 96 tokens of KV for 4 x 45 tokens
  std::vector<uint64_t> ids;
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(prompt_of(15, 20 + i));
    ids.push_back(h.submit(greedy(prompts.back(), 30)));
  }
  h.run();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h.result(ids[i]).tokens, oracle(prompts[i], 30)) << "request " << i;
    EXPECT_EQ(h.result(ids[i]).finish, FinishReason::kLength);
  }
  EXPECT_GT(h.engine->stats().n_preemptions, 0);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

TEST(Engine, CancellationFreesBlocksWithinOneStep) {
  Harness h;
  auto req = greedy(prompt_of(20, 4), 100);
  auto flag = req.cancelled;
  uint64_t id = h.submit(req);
  uint64_t other = h.submit(greedy(prompt_of(9, 5), 3));
  for (int i = 0; i < 3; ++i) h.engine->step();
  EXPECT_GT(h.engine->stats().kv_blocks_used, 0);
  flag->store(true);
  h.engine->step();
  EXPECT_EQ(h.result(id).finish, FinishReason::kCancelled);
  EXPECT_EQ(h.result(id).tokens.size(), 3u);  // one token per step before the cancel
  EXPECT_EQ(h.result(other).finish, FinishReason::kLength);
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  // Cancelled before it ever ran: one event, no tokens.
  auto late = greedy(prompt_of(9, 6), 5);
  late.cancelled->store(true);
  uint64_t never = h.submit(late);
  h.run();
  EXPECT_EQ(h.result(never).finish, FinishReason::kCancelled);
  EXPECT_TRUE(h.result(never).tokens.empty());
  EXPECT_EQ(h.runner.n_tokens_computed, 20 + 2 + 9 + 2);
}

TEST(Engine, StopTokenIdsAndStopHookFinishWithStop) {
  Harness h;
  auto p = prompt_of(12, 7);
  auto expect = oracle(p, 10);
  auto r = greedy(p, 10);
  r.stop_token_ids = {expect[3]};
  // The first occurrence of expect[3] ends the request, stop token included.
  size_t first = std::find(expect.begin(), expect.end(), expect[3]) - expect.begin();
  uint64_t a = h.submit(r);
  auto r2 = greedy(p, 10);
  int seen = 0;
  r2.stop_hook = [&seen](TokenId) { return ++seen == 2; };
  uint64_t b = h.submit(r2);
  h.run();
  EXPECT_EQ(h.result(a).finish, FinishReason::kStop);
  EXPECT_EQ(h.result(a).tokens, std::vector<TokenId>(expect.begin(), expect.begin() + first + 1));
  EXPECT_EQ(h.result(b).finish, FinishReason::kStop);
  EXPECT_EQ(h.result(b).tokens, std::vector<TokenId>(expect.begin(), expect.begin() + 2));
}

TEST(Engine, LogprobsAreTheModelsLogSoftmax) {
  Harness h;
  auto p = prompt_of(6, 8);
  auto r = greedy(p, 1);
  r.logprobs = true;
  uint64_t id = h.submit(r);
  h.run();
  std::vector<float> l(kVocab);
  FakeModelRunner::reference_logits(p, kVocab, l.data());
  double sum = 0;
  for (float x : l) sum += std::exp(static_cast<double>(x));
  TokenId t = h.result(id).tokens.at(0);
  EXPECT_NEAR(h.result(id).logprobs.at(0), l[t] - std::log(sum), 1e-5);
}

TEST(Engine, SubmitRejectsBadRequestsNamingTheField) {
  Harness h(test_config(/*max_blocks=*/8));
  auto msg = [&](GenerateRequest r) {
    auto res = h.engine->submit(std::move(r));
    return res.ok() ? std::string("ok") : res.message();
  };
  EXPECT_EQ(msg(greedy({}, 4)), "prompt: must contain at least one token");
  EXPECT_EQ(msg(greedy({1, 99}, 4)), "prompt[1]: token id 99 outside the vocabulary [0, 64)");
  EXPECT_EQ(msg(greedy({1}, 0)), "max_tokens: must be >= 1, got 0");
  EXPECT_EQ(msg(greedy({1, 2}, 31)),
            "max_tokens: prompt (2 tokens) + max_tokens (31) exceeds the context of 32 tokens");
  auto r = greedy({1}, 4);
  r.sampling.top_p = 0.0f;
  EXPECT_EQ(msg(r), "top_p: must be in (0, 1], got 0");
  r = greedy({1}, 4);
  r.sampling.logit_bias = {{3, 1.0f}, {64, 1.0f}};
  EXPECT_EQ(msg(r), "logit_bias[1]: token id 64 outside the vocabulary [0, 64)");
  EXPECT_EQ(msg(greedy({1, 2}, 30)), "ok");
}

TEST(Engine, ModelFailureFailsTheBatchAndFreesItsBlocks) {
  Harness h;
  uint64_t a = h.submit(greedy(prompt_of(9, 9), 5));
  h.engine->step();
  h.runner.fail_next_run = true;
  h.engine->step();
  EXPECT_EQ(h.result(a).finish, FinishReason::kError);
  EXPECT_EQ(h.result(a).error, "model run failed: injected failure");
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  uint64_t b = h.submit(greedy(prompt_of(9, 9), 5));
  h.run();
  EXPECT_EQ(h.result(b).tokens, oracle(prompt_of(9, 9), 5));
  EXPECT_EQ(h.result(b).finish, FinishReason::kLength);
}

TEST(Engine, OutOfDeviceMemoryFailsOnlyWhatCannotFit) {
  Harness h(test_config(/*max_blocks=*/64));
  h.runner.grow_limit_blocks = 8;  // the runner cannot back more than 8 blocks (32 tokens)
  uint64_t big = h.submit(greedy(prompt_of(40, 10), 2));
  uint64_t small = h.submit(greedy(prompt_of(10, 11), 2));
  h.run();
  EXPECT_EQ(h.result(big).finish, FinishReason::kError);
  EXPECT_EQ(h.result(big).error, "the request does not fit in the KV cache");
  EXPECT_EQ(h.result(small).tokens, oracle(prompt_of(10, 11), 2));
  EXPECT_EQ(h.engine->stats().kv_blocks_total, 8);
}

TEST(Engine, StatsCountBlocksAndTokens) {
  Harness h;
  h.submit(greedy(prompt_of(17, 12), 4));
  h.run();
  EngineStats s = h.engine->stats();
  EXPECT_EQ(s.n_requests, 1);
  EXPECT_EQ(s.n_prompt_tokens, 17);
  EXPECT_EQ(s.n_generated_tokens, 4);
  EXPECT_EQ(s.n_computed_tokens, 17 + 3);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_cached, 5);  // 20 computed tokens = 5 full blocks
  EXPECT_EQ(s.kv_blocks_total, 8);   // one growth chunk
  EXPECT_EQ(s.kv_blocks_free, 256);
  EXPECT_EQ(s.n_waiting, 0);
  EXPECT_EQ(s.n_running, 0);
}

TEST(Engine, EngineThreadServesConcurrentSubmitters) {
  testing::FakeModelRunner runner(kVocab, testing::kBlock);
  Engine engine(test_config(64, 32, 64), runner);
  engine.start();
  constexpr int kThreads = 4;
  std::vector<std::vector<TokenId>> got(kThreads);
  std::vector<FinishReason> finish(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto ch = TokenChannel::create();
      auto r = greedy(prompt_of(10 + t, 30 + t), 20);
      r.on_event = ch->callback();
      ASSERT_TRUE(engine.submit(std::move(r)).ok());
      TokenEvent ev;
      while (ch->pop(&ev, std::chrono::seconds(10))) {
        if (ev.token >= 0) got[t].push_back(ev.token);
        if ((finish[t] = ev.finish) != FinishReason::kNone) break;
      }
    });
  }
  for (auto& th : threads) th.join();
  engine.stop();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(finish[t], FinishReason::kLength);
    EXPECT_EQ(got[t], oracle(prompt_of(10 + t, 30 + t), 20)) << "thread " << t;
  }
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace t9::engine
