// Pipelined steps (EngineConfig::pipeline): the engine enqueues decode step N+1, whose input is
// "the token step N samples", before it waits for step N. The fake runner in deferred mode
// computes a step only when it is waited for (as a GPU would finish it), so every test here
// checks that the bookkeeping done between enqueue and wait leaves outputs, KV and recurrent
// state exactly as unpipelined decoding leaves them.
#include <gtest/gtest.h>

#include <algorithm>

#include "unit/engine/engine_harness.h"

namespace t9::engine {
namespace {

using testing::Collected;
using testing::greedy;
using testing::Harness;
using testing::kVocab;
using testing::oracle;
using testing::prompt_of;
using testing::test_config;

std::unique_ptr<Harness> harness(bool pipelined, bool recurrent = false) {
  EngineConfig cfg = test_config();
  cfg.pipeline = pipelined ? StepPipeline::kOn : StepPipeline::kOff;
  auto h = std::make_unique<Harness>(cfg);
  h->runner.recurrent = recurrent;
  h->runner.deferred = true;
  h->runner.argmax_when_asked = true;
  h->engine = std::make_unique<Engine>(cfg, h->runner);  // sees the runner's settings
  return h;
}

// One request of 6 tokens: the prompt's step is enqueued, and each of the 5 steps after it is
// planned and enqueued while the one before computes; none computes past the request's end
// (the last token's step plans nothing after it: max_tokens ends the request there).
TEST(Pipeline, DecodeStepsAreEnqueuedAheadWithExactTokens) {
  auto h = harness(true);
  const std::vector<TokenId> prompt = prompt_of(5, 1);
  const uint64_t id = h->submit(greedy(prompt, 6));
  h->run();
  EXPECT_EQ(h->result(id).tokens, oracle(prompt, 6));
  EXPECT_EQ(h->result(id).finish, FinishReason::kLength);
  const EngineStats st = h->engine->stats();
  EXPECT_EQ(st.n_pipelined_steps, 5);
  EXPECT_EQ(h->runner.n_token_from_row, 5);
  EXPECT_EQ(st.n_discarded_tokens, 0);
  EXPECT_EQ(st.n_steps, 6);
  EXPECT_EQ(h->runner.n_enqueued, 6);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// Two requests decoding side by side, one shorter: the step planned behind the shorter one's last
// step has only the other's row (its token input is the second output row of the step before),
// nothing is discarded, and both are exact.
TEST(Pipeline, ARowPastItsLengthIsDiscardedBesideALongerOne) {
  auto h = harness(true);
  const std::vector<TokenId> a = prompt_of(5, 9), b = prompt_of(8, 10);
  const uint64_t ia = h->submit(greedy(a, 3));
  const uint64_t ib = h->submit(greedy(b, 8));
  h->run();
  EXPECT_EQ(h->result(ia).tokens, oracle(a, 3));
  EXPECT_EQ(h->result(ib).tokens, oracle(b, 8));
  const EngineStats st = h->engine->stats();
  EXPECT_EQ(st.n_discarded_tokens, 0);
  EXPECT_EQ(st.n_pipelined_steps, 7);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

// Sampled rows the runner always decides (ModelRunner::decides) are pipelined too: each step's
// draw is taken when it is planned, in the same order as unpipelined, so a seeded request gives
// the same tokens. With penalties too: the next step's edits count the token in flight where
// the runner reads it (PendingEdit), so the draws are those of the unpipelined steps, which
// know it.
TEST(Pipeline, SampledRowsThatTheRunnerDecidesArePipelined) {
  struct Penalties {
    float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
  };
  const auto sampled = [](uint64_t seed, const Penalties& pen) {
    GenerateRequest r = greedy(prompt_of(7, 14), 12);
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 20;
    r.sampling.seed = seed;
    r.sampling.repetition_penalty = pen.repetition;
    r.sampling.presence_penalty = pen.presence;
    r.sampling.frequency_penalty = pen.frequency;
    return r;
  };
  std::vector<std::vector<TokenId>> by_penalty;
  for (const Penalties& pen :
       {Penalties{}, Penalties{1.3f}, Penalties{1.0f, 1.5f, 1.0f}, Penalties{1.3f, 0.0f, 0.5f}}) {
    SCOPED_TRACE(::testing::Message()
                 << "penalties " << pen.repetition << " " << pen.presence << " " << pen.frequency);
    std::vector<std::vector<TokenId>> out;
    for (const bool pipelined : {false, true}) {
      auto h = harness(pipelined);
      h->runner.sample_when_asked = true;
      h->runner.settle_all = true;
      const uint64_t a = h->submit(sampled(7, pen));
      const uint64_t b = h->submit(greedy(prompt_of(5, 15), 12));
      h->run();
      out.push_back(h->result(a).tokens);
      EXPECT_EQ(h->result(b).tokens, oracle(prompt_of(5, 15), 12));
      EXPECT_EQ(h->engine->stats().n_pipelined_steps, pipelined ? 11 : 0);
    }
    ASSERT_EQ(out[0].size(), 12u);
    EXPECT_EQ(out[0], out[1]);
    by_penalty.push_back(out[0]);
  }
  // The penalties changed the draws (else the equality above would not test their edits).
  for (size_t i = 1; i < by_penalty.size(); ++i) EXPECT_NE(by_penalty[i], by_penalty[0]) << i;
}

// The runner's own setting decides by default: a runner that computes inside enqueue() gains
// nothing from planning ahead, so kAuto leaves it unpipelined.
TEST(Pipeline, AutoFollowsTheRunner) {
  for (const bool deferred : {false, true}) {
    Harness h;
    h.runner.deferred = deferred;
    h.runner.argmax_when_asked = true;
    h.engine = std::make_unique<Engine>(test_config(), h.runner);
    const uint64_t id = h.submit(greedy(prompt_of(5, 2), 4));
    h.run();
    EXPECT_EQ(h.result(id).tokens, oracle(prompt_of(5, 2), 4));
    EXPECT_EQ(h.engine->stats().n_pipelined_steps, deferred ? 3 : 0);
  }
}

// A stop token ends the request while the step after it is already in flight: that step's row is
// computed and discarded, the sequence's blocks and state go only after it is back, and nothing
// is emitted past the stop.
TEST(Pipeline, StopTokenDiscardsTheStepInFlight) {
  auto h = harness(true);
  const std::vector<TokenId> prompt = prompt_of(7, 3);
  const std::vector<TokenId> want = oracle(prompt, 10);
  GenerateRequest r = greedy(prompt, 10);
  r.stop_token_ids = {want[2]};
  ASSERT_EQ(std::count(want.begin(), want.begin() + 2, want[2]), 0) << "pick another prompt";
  const uint64_t id = h->submit(std::move(r));
  h->run();
  EXPECT_EQ(h->result(id).tokens, std::vector<TokenId>(want.begin(), want.begin() + 3));
  EXPECT_EQ(h->result(id).finish, FinishReason::kStop);
  EXPECT_EQ(h->result(id).n_events_after_finish, 0);
  const EngineStats st = h->engine->stats();
  EXPECT_EQ(st.n_discarded_tokens, 1);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(h->runner.n_states_held(), 0);
}

// A cancel arriving between steps: the request ends with the tokens it had, its row in the step in
// flight is discarded (the step planned behind it has none), and another request decoding beside
// it is not disturbed.
TEST(Pipeline, CancelBetweenStepsLeavesTheOtherRowExact) {
  auto h = harness(true);
  const std::vector<TokenId> a = prompt_of(6, 4), b = prompt_of(9, 5);
  GenerateRequest ra = greedy(a, 12);
  auto cancel = ra.cancelled;
  const uint64_t ia = h->submit(std::move(ra));
  const uint64_t ib = h->submit(greedy(b, 12));
  for (int i = 0; i < 4; ++i) h->engine->step();
  cancel->store(true);
  h->run();
  const std::vector<TokenId> want_a = oracle(a, 12);
  const Collected& ca = h->result(ia);
  EXPECT_EQ(ca.finish, FinishReason::kCancelled);
  ASSERT_LE(ca.tokens.size(), want_a.size());
  EXPECT_TRUE(std::equal(ca.tokens.begin(), ca.tokens.end(), want_a.begin()));
  EXPECT_EQ(h->result(ib).tokens, oracle(b, 12));
  EXPECT_EQ(h->engine->stats().n_discarded_tokens, 1);
  EXPECT_EQ(h->engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h->runner.n_states_held(), 0);
}

// A step that fails on the device while the next one is already enqueued: its requests fail, the
// step behind it (whose input tokens never came) is discarded with them, every block and state
// is freed, and the engine serves the next request normally.
TEST(Pipeline, AFailedStepFailsItsRequestsAndTheStepBehindIt) {
  auto h = harness(true, /*recurrent=*/true);
  const uint64_t ia = h->submit(greedy(prompt_of(6, 11), 9));
  const uint64_t ib = h->submit(greedy(prompt_of(7, 12), 9));
  for (int i = 0; i < 3; ++i) h->engine->step();
  h->runner.fail_next_run = true;
  h->run();
  for (uint64_t id : {ia, ib}) {
    EXPECT_EQ(h->result(id).finish, FinishReason::kError);
    EXPECT_NE(h->result(id).error.find("injected failure"), std::string::npos);
  }
  EXPECT_EQ(h->engine->stats().n_discarded_tokens, 2);
  EXPECT_EQ(h->engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(h->runner.n_states_held(), 0);
  const uint64_t ic = h->submit(greedy(prompt_of(5, 13), 4));
  h->run();
  EXPECT_EQ(h->result(ic).tokens, oracle(prompt_of(5, 13), 4));
  EXPECT_EQ(h->runner.n_checkpoints_held(), h->engine->stats().n_state_checkpoints);
}

// A request arriving while decode steps are pipelined is admitted at the next step (the pipeline
// drains for one step), and both outputs are exact.
TEST(Pipeline, ArrivalDrainsThePipelineForItsAdmission) {
  auto h = harness(true);
  const std::vector<TokenId> a = prompt_of(6, 6), b = prompt_of(11, 7);
  const uint64_t ia = h->submit(greedy(a, 10));
  for (int i = 0; i < 3; ++i) h->engine->step();
  const uint64_t ib = h->submit(greedy(b, 5));
  h->run();
  EXPECT_EQ(h->result(ia).tokens, oracle(a, 10));
  EXPECT_EQ(h->result(ib).tokens, oracle(b, 5));
  EXPECT_EQ(h->result(ib).usage.n_cached_prompt_tokens, 0);
}

// A hybrid model's conversation whose first reply stops at each offset in turn: wherever the
// discarded step falls relative to a block boundary (where it saves the state into the
// sequence's spare checkpoint), the checkpoint the ended sequence publishes is the state at its
// last computed block boundary. The second turn re-sends the history; the fake runner fails any
// step whose restored state disagrees with the KV, and the hit must be as long as unpipelined.
TEST(Pipeline, HybridStopsPublishTheRightCheckpointAtEveryOffset) {
  const std::vector<TokenId> prompt = prompt_of(10, 8);
  const std::vector<TokenId> reply = oracle(prompt, 12);
  for (int stop_at = 1; stop_at <= 9; ++stop_at) {
    SCOPED_TRACE(::testing::Message() << "stop after " << stop_at << " tokens");
    if (std::count(reply.begin(), reply.begin() + stop_at - 1, reply[stop_at - 1])) continue;
    std::vector<int> cached;
    for (const bool pipelined : {false, true}) {
      auto h = harness(pipelined, /*recurrent=*/true);
      GenerateRequest r = greedy(prompt, 12);
      r.stop_token_ids = {reply[stop_at - 1]};
      const uint64_t first = h->submit(std::move(r));
      h->run();
      ASSERT_EQ(h->result(first).tokens,
                std::vector<TokenId>(reply.begin(), reply.begin() + stop_at));
      std::vector<TokenId> history = prompt;
      history.insert(history.end(), reply.begin(), reply.begin() + stop_at);
      for (int i = 0; i < 6; ++i) history.push_back(static_cast<TokenId>((i * 7 + 3) % kVocab));
      const uint64_t second = h->submit(greedy(history, 5));
      h->run();
      EXPECT_EQ(h->result(second).error, "");
      EXPECT_EQ(h->result(second).tokens, oracle(history, 5));
      cached.push_back(h->result(second).usage.n_cached_prompt_tokens);
      EXPECT_EQ(h->runner.n_checkpoints_held(), h->engine->stats().n_state_checkpoints);
      EXPECT_EQ(h->runner.n_states_held(), 0);
      EXPECT_EQ(h->engine->stats().n_discarded_tokens, pipelined ? 1 : 0);
    }
    EXPECT_EQ(cached[0], cached[1]);
    EXPECT_GT(cached[1], 0);
  }
}

}  // namespace
}  // namespace t9::engine
