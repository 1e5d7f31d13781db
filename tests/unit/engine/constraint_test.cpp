// TokenConstraint in the engine (structured output): a constrained request's tokens are the
// argmax (or draw) over the tokens the constraint leaves, it ends once the constraint is complete,
// its logprobs are of the raw row, and it keeps that through prompt-lookup drafts, pipelined
// neighbours and the recurrent fake model. The constraint here is a stand-in for the grammar
// filter: step i allows the tokens t with t % 3 == i % 3, complete after `complete_after` tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

class EveryThird : public TokenConstraint {
 public:
  explicit EveryThird(int complete_after, int refuse_all_at = -1)
      : complete_after_(complete_after), refuse_all_at_(refuse_all_at) {}
  bool mask(std::span<float> logits) override {
    if (n_taken_ == refuse_all_at_) return false;
    for (size_t t = 0; t < logits.size(); ++t)
      if (!allowed(static_cast<int32_t>(t))) logits[t] = -std::numeric_limits<float>::infinity();
    return true;
  }
  bool accept(int32_t token) override {
    if (!allowed(token)) return false;
    ++n_taken_;
    return true;
  }
  bool complete() const override { return n_taken_ >= complete_after_; }

 private:
  bool allowed(int32_t t) const { return t % 3 == n_taken_ % 3; }
  int complete_after_;
  int refuse_all_at_;
  int n_taken_ = 0;
};

// The fake model's greedy continuation with step i's row restricted to t % 3 == i % 3.
std::vector<TokenId> constrained_oracle(std::vector<TokenId> history, int n) {
  std::vector<TokenId> out;
  std::vector<float> row(kVocab);
  for (int i = 0; i < n; ++i) {
    FakeModelRunner::reference_logits(history, kVocab, row.data());
    int best = -1;
    for (int t = 0; t < kVocab; ++t)
      if (t % 3 == i % 3 && (best < 0 || row[t] > row[best])) best = t;
    out.push_back(best);
    history.push_back(best);
  }
  return out;
}

TEST(Constraint, GreedyTokensAreTheArgmaxOfTheAllowedOnesAndCompletionStops) {
  Harness h;
  const std::vector<TokenId> prompt = prompt_of(9, 2);
  GenerateRequest r = greedy(prompt, 20);
  r.constraint = std::make_shared<EveryThird>(7);
  const uint64_t id = h.submit(std::move(r));
  const uint64_t plain = h.submit(greedy(prompt_of(6, 3), 5));
  h.run();
  EXPECT_EQ(h.result(id).tokens, constrained_oracle(prompt, 7));
  EXPECT_EQ(h.result(id).finish, FinishReason::kStop);  // complete after 7 of 20
  EXPECT_EQ(h.result(plain).tokens, oracle(prompt_of(6, 3), 5));
  // The unconstrained oracle differs: the constraint did something.
  EXPECT_NE(h.result(id).tokens, oracle(prompt, 7));
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

TEST(Constraint, LogprobsAreOfTheRawRow) {
  Harness h;
  const std::vector<TokenId> prompt = prompt_of(5, 4);
  GenerateRequest r = greedy(prompt, 3);
  r.logprobs = true;
  r.constraint = std::make_shared<EveryThird>(100);
  const uint64_t id = h.submit(std::move(r));
  h.run();
  const std::vector<TokenId> want = constrained_oracle(prompt, 3);
  ASSERT_EQ(h.result(id).tokens, want);
  std::vector<TokenId> history = prompt;
  std::vector<float> row(kVocab);
  for (int i = 0; i < 3; ++i) {
    FakeModelRunner::reference_logits(history, kVocab, row.data());
    double sum = 0;
    float mx = row[0];
    for (float l : row) mx = std::max(mx, l);
    for (float l : row) sum += std::exp(static_cast<double>(l) - mx);
    const float lp = row[want[i]] - (mx + static_cast<float>(std::log(sum)));
    EXPECT_NEAR(h.result(id).logprobs[i], lp, 1e-5f) << i;  // float rounding of one log-sum-exp
    history.push_back(want[i]);
  }
}

// Drafts are verified row by row through the constraint, so the output stays exact with them;
// with pipelining on, steps are enqueued ahead only once the constrained row is gone (its token
// needs the host), and the neighbour's output is exact either way.
TEST(Constraint, ExactWithDraftsOrBesidePipelinedRows) {
  for (bool recurrent : {false, true}) {
    for (bool drafts : {true, false}) {
      EngineConfig cfg = test_config();
      if (drafts) cfg.scheduler.spec = {4, 3, 1};
      cfg.pipeline = drafts ? StepPipeline::kOff : StepPipeline::kOn;
      Harness h(cfg);
      h.runner.recurrent = recurrent;
      h.runner.deferred = true;
      h.runner.argmax_when_asked = true;
      h.engine = std::make_unique<Engine>(cfg, h.runner);
      // A repetitive prompt so prompt lookup proposes drafts.
      std::vector<TokenId> prompt;
      for (int i = 0; i < 24; ++i) prompt.push_back(static_cast<TokenId>((i % 6) * 3));
      GenerateRequest r = greedy(prompt, 30);
      r.constraint = std::make_shared<EveryThird>(25);
      const uint64_t id = h.submit(std::move(r));
      const uint64_t other = h.submit(greedy(prompt_of(7, 5), 60));
      h.run();
      SCOPED_TRACE(::testing::Message() << "recurrent " << recurrent << " drafts " << drafts);
      EXPECT_EQ(h.result(id).tokens, constrained_oracle(prompt, 25));
      EXPECT_EQ(h.result(id).finish, FinishReason::kStop);
      EXPECT_EQ(h.result(other).tokens, oracle(prompt_of(7, 5), 60));
      const EngineStats st = h.engine->stats();
      if (drafts) {
        EXPECT_GT(st.n_draft_tokens, 0);
      } else {
        // 60 tokens for the neighbour, 25 of them beside the constrained row: at most 35 steps
        // can be planned ahead, and the last ~30 are.
        EXPECT_GT(st.n_pipelined_steps, 25);
        EXPECT_LE(st.n_pipelined_steps, 35);
      }
      EXPECT_EQ(st.kv_blocks_used, 0);
    }
  }
}

TEST(Constraint, RefusingEveryTokenFailsOnlyThatRequest) {
  Harness h;
  GenerateRequest r = greedy(prompt_of(5, 6), 10);
  r.constraint = std::make_shared<EveryThird>(100, /*refuse_all_at=*/2);
  const uint64_t id = h.submit(std::move(r));
  const uint64_t plain = h.submit(greedy(prompt_of(5, 7), 6));
  h.run();
  EXPECT_EQ(h.result(id).tokens, constrained_oracle(prompt_of(5, 6), 2));
  EXPECT_EQ(h.result(id).finish, FinishReason::kError);
  EXPECT_NE(h.result(id).error.find("no token can continue"), std::string::npos)
      << h.result(id).error;
  EXPECT_EQ(h.result(id).n_events_after_finish, 0);
  EXPECT_EQ(h.result(plain).tokens, oracle(prompt_of(5, 7), 6));
  EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace t9::engine
