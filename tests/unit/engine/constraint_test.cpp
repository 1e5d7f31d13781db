// TokenConstraint in the engine (structured output): a constrained request's tokens are the
// argmax (or draw) over the tokens the constraint leaves, it ends once the constraint is complete,
// its logprobs are of the raw row, and it keeps that through prompt-lookup drafts, pipelined
// neighbours and the recurrent fake model. The constraint here is a stand-in for the grammar
// filter: step i allows the tokens t with t % 3 == i % 3, complete after `complete_after` tokens.
// A runner that decides rows (a GPU's) checks its token against the constraint and sends a refused
// row back for the host to mask.
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
    n_masks++;
    if (n_taken_ == refuse_all_at_) return false;
    for (size_t t = 0; t < logits.size(); ++t)
      if (!allowed(static_cast<int32_t>(t))) logits[t] = -std::numeric_limits<float>::infinity();
    return true;
  }
  bool allows(int32_t token) override { return n_taken_ != refuse_all_at_ && allowed(token); }
  bool accept(int32_t token) override {
    if (!allowed(token)) return false;
    ++n_taken_;
    return true;
  }
  bool complete() const override { return n_taken_ >= complete_after_; }
  // Proposes the next `forced.size() - n_taken` tokens of `forced` (right or wrong).
  std::vector<int32_t> forced_tokens(int max_tokens) override {
    std::vector<int32_t> out;
    for (size_t i = static_cast<size_t>(n_taken_);
         i < forced.size() && static_cast<int>(out.size()) < max_tokens; ++i)
      out.push_back(forced[i]);
    return out;
  }
  std::vector<int32_t> forced;
  int n_masks = 0;  // rows masked on the host

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
      } else if (recurrent) {
        // 60 tokens for the neighbour, 25 of them beside the constrained row, which a recurrent
        // model does not plan ahead: at most 35 steps can be, and the last ~30 are.
        EXPECT_GT(st.n_pipelined_steps, 25);
        EXPECT_LE(st.n_pipelined_steps, 35);
      } else {
        // The checked row is planned ahead too (its check waits for the engine's accept): more
        // than the neighbour's 35 steps alone, fewer than all 60 (a refused token, whose
        // lookahead row is dropped, breaks the pipeline for one step).
        EXPECT_GT(st.n_pipelined_steps, 35);
        EXPECT_LT(st.n_pipelined_steps, 60);
      }
      EXPECT_EQ(st.kv_blocks_used, 0);
    }
  }
}

// Forced tokens are the next step's draft: right ones let one step emit several tokens, wrong
// ones are rejected, and the output is the same either way (also on the recurrent fake model,
// whose rejected drafts undo the step), for a greedy and a seeded sampled request.
TEST(Constraint, ForcedTokensAreDraftsThatNeverChangeTheOutput) {
  const std::vector<TokenId> prompt = prompt_of(7, 8);
  const std::vector<TokenId> want = constrained_oracle(prompt, 20);
  for (bool recurrent : {false, true}) {
    for (int mode = 0; mode < 3; ++mode) {  // no forced tokens, the right ones, wrong ones
      Harness h;
      h.runner.recurrent = recurrent;
      h.engine = std::make_unique<Engine>(test_config(), h.runner);  // sees the runner's settings
      GenerateRequest r = greedy(prompt, 20);
      auto c = std::make_shared<EveryThird>(100);
      if (mode == 1) c->forced = want;
      if (mode == 2)
        for (TokenId t : want) c->forced.push_back((t + 3) % kVocab);  // allowed, but not chosen
      r.constraint = c;
      const uint64_t id = h.submit(std::move(r));
      h.run();
      SCOPED_TRACE(::testing::Message() << "recurrent " << recurrent << " mode " << mode);
      EXPECT_EQ(h.result(id).tokens, want) << h.result(id).error;
      const EngineStats st = h.engine->stats();
      // The 7-token prompt takes one step, two on the recurrent model (a step ends at its last
      // block boundary, 4, for the checkpoint there).
      const int prompt_steps = recurrent ? 2 : 1;
      if (mode == 1) {
        // Then steps of 9, 9 and 1 tokens: 8 forced tokens accepted in each of the first two
        // (kMaxForcedDraft), none in the last (a draft stops at max_tokens).
        EXPECT_EQ(st.n_accepted_forced_tokens, 16);
        EXPECT_EQ(st.n_steps, prompt_steps + 3);
      } else {
        EXPECT_EQ(st.n_accepted_forced_tokens, 0);
        EXPECT_EQ(st.n_steps, prompt_steps + 19);
        // Wrong ones: after token g (1..18) a draft of min(8, 19 - g) (never past max_tokens);
        // on the recurrent model a rejected draft undoes its step, so the next one has two
        // tokens pending and no draft: about every other step proposes.
        int proposed = 0;
        for (int g = 1; g <= 18; ++g) proposed += std::min(8, 19 - g);
        if (mode == 0) {
          EXPECT_EQ(st.n_forced_tokens, 0);
        } else if (!recurrent) {
          EXPECT_EQ(st.n_forced_tokens, proposed);
        } else {
          EXPECT_GT(st.n_forced_tokens, 0);
          EXPECT_LT(st.n_forced_tokens, proposed);
        }
      }
      EXPECT_EQ(st.n_draft_tokens, 0);  // prompt lookup is off
      EXPECT_EQ(st.kv_blocks_used, 0);
    }
  }
}

// A step that emits several tokens (right forced tokens) and completes the constraint with its last
// one: every token is emitted and the request stops there, not at the first of them (completion is
// the state after each token, not after the step: a GBNF `answer "."` ended after "no", its forced
// "." dropped).
TEST(Constraint, CompletionInsideAMultiTokenStepKeepsTheStepsTokens) {
  const std::vector<TokenId> prompt = prompt_of(7, 8);
  for (int complete_after : {3, 5, 9}) {
    Harness h;
    GenerateRequest r = greedy(prompt, 20);
    auto c = std::make_shared<EveryThird>(complete_after);
    c->forced = constrained_oracle(prompt, 20);
    r.constraint = c;
    const uint64_t id = h.submit(std::move(r));
    h.run();
    SCOPED_TRACE(::testing::Message() << "complete after " << complete_after);
    EXPECT_EQ(h.result(id).tokens, constrained_oracle(prompt, complete_after))
        << h.result(id).error;
    EXPECT_EQ(h.result(id).finish, FinishReason::kStop);
    EXPECT_GT(h.engine->stats().n_accepted_forced_tokens, 0);  // a multi-token step happened
    EXPECT_EQ(h.engine->stats().kv_blocks_used, 0);
  }
}

// A runner that decides rows (argmax on the device) has its token checked (ForwardSeq::check):
// an allowed argmax is the masked row's argmax; a refused row comes back and the next best tokens
// are checked in turn, never masking the row here (a third of the vocabulary is allowed, so one of
// the 16 best is). Same tokens as masking every row; the constrained rows never pipeline.
TEST(Constraint, TheRunnersArgmaxIsCheckedAndOnlyRefusedRowsAreMasked) {
  for (bool recurrent : {false, true}) {
    EngineConfig cfg = test_config();
    cfg.pipeline = StepPipeline::kOn;
    Harness h(cfg);
    h.runner.recurrent = recurrent;
    h.runner.deferred = true;
    h.runner.argmax_when_asked = true;
    h.engine = std::make_unique<Engine>(cfg, h.runner);
    const std::vector<TokenId> prompt = prompt_of(9, 2);
    GenerateRequest r = greedy(prompt, 40);
    auto c = std::make_shared<EveryThird>(30);
    r.constraint = c;
    const uint64_t id = h.submit(std::move(r));
    const uint64_t other = h.submit(greedy(prompt_of(6, 3), 8));
    h.run();
    SCOPED_TRACE(::testing::Message() << "recurrent " << recurrent);
    EXPECT_EQ(h.result(id).tokens, constrained_oracle(prompt, 30)) << h.result(id).error;
    EXPECT_EQ(h.result(id).finish, FinishReason::kStop);
    EXPECT_EQ(h.result(other).tokens, oracle(prompt_of(6, 3), 8));
    // About two thirds of the raw argmaxes fall outside the allowed third: some refused, not all
    // (planned ahead, a row that read a refused token is checked too, and then dropped).
    EXPECT_GT(h.runner.n_refused_checks, 5);
    EXPECT_LT(h.runner.n_refused_checks, recurrent ? 30 : 60);
    EXPECT_EQ(c->n_masks, 0);
    EXPECT_EQ(h.engine->stats().n_constraint_masks, 0);
    const EngineStats st = h.engine->stats();
    if (recurrent) {
      // A recurrent model never plans a checked row ahead (a dropped row would have moved the
      // state); every step ran with the constrained row.
      EXPECT_EQ(st.n_pipelined_steps, 0);
    } else {
      // Checked at the wait, the row is planned ahead; each refused token's lookahead row is
      // dropped (its position computed again from the host's token).
      EXPECT_GT(st.n_pipelined_steps, 10);
      EXPECT_GT(st.n_discarded_tokens, 0);
    }
    EXPECT_EQ(st.kv_blocks_used, 0);
  }
}

// A draw without cuts is kept when the constraint allows it and drawn again when not, which is the
// masked distribution (Engine::redraw_constrained): over 6,000 seeds the first token's frequencies
// match softmax over the allowed tokens. With a cut (top-k) the row is masked on the host first
// and the runner decides nothing. A constraint that allows one token makes the retries give up
// and the mask decide: still that token.
TEST(Constraint, ARefusedDrawIsRedrawnFromTheMaskedRow) {
  const std::vector<TokenId> prompt = prompt_of(5, 3);
  std::vector<float> row(kVocab);
  FakeModelRunner::reference_logits(prompt, kVocab, row.data());
  std::vector<double> want(kVocab, 0.0);
  double z = 0.0, total = 0.0;
  for (int t = 0; t < kVocab; t += 3) z += (want[t] = std::exp(static_cast<double>(row[t])));
  for (int t = 0; t < kVocab; ++t) total += std::exp(static_cast<double>(row[t]));
  for (double& w : want) w /= z;
  const double refused = 1.0 - z / total;  // a draw's chance to fall outside the allowed third
  constexpr int kDraws = 6000;
  for (bool cut : {false, true}) {
    Harness h;
    h.runner.sample_when_asked = true;
    h.runner.settle_all = true;
    h.engine = std::make_unique<Engine>(test_config(), h.runner);
    std::vector<uint64_t> ids;
    std::vector<std::shared_ptr<EveryThird>> cs;
    for (int i = 0; i < (cut ? 50 : kDraws); ++i) {
      GenerateRequest r = greedy(prompt, 1);
      r.sampling.temperature = 1.0f;
      if (cut) r.sampling.top_k = 8;
      r.sampling.seed = 1000 + i;
      cs.push_back(std::make_shared<EveryThird>(100));
      r.constraint = cs.back();
      ids.push_back(h.submit(std::move(r)));
    }
    h.run();
    SCOPED_TRACE(::testing::Message() << "cut " << cut);
    std::vector<int> seen(kVocab, 0);
    int masks = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(h.result(ids[i]).tokens.size(), 1u) << h.result(ids[i]).error;
      const TokenId t = h.result(ids[i]).tokens[0];
      ASSERT_EQ(t % 3, 0) << t;
      seen[t]++;
      masks += cs[i]->n_masks;
    }
    if (cut) {
      EXPECT_EQ(h.runner.n_refused_checks, 0);  // no row was decided by the runner
      EXPECT_EQ(masks, 50);
      continue;
    }
    // The runner's draw and 16 retries all refused: the mask decides, (refused)^17 of the time.
    // Both counts within 5 standard deviations of their binomial means.
    const double refusals = kDraws * refused, all_refused = kDraws * std::pow(refused, 17);
    EXPECT_NEAR(h.runner.n_refused_checks, refusals, 5.0 * std::sqrt(refusals) + 1.0);
    EXPECT_NEAR(masks, all_refused, 5.0 * std::sqrt(all_refused) + 1.0);
    EXPECT_EQ(h.engine->stats().n_constraint_masks, masks);
    // Each frequency within 5 standard deviations of its binomial expectation (a false failure
    // about once in 1.7 million per token).
    for (int t = 0; t < kVocab; t += 3) {
      const double mean = kDraws * want[t];
      EXPECT_NEAR(seen[t], mean, 5.0 * std::sqrt(mean * (1.0 - want[t])) + 1.0) << t;
    }
  }
}

// Allows exactly one token at each step (the row's least likely one, so no retry finds it).
class LeastLikely : public TokenConstraint {
 public:
  explicit LeastLikely(std::vector<TokenId> history) : history_(std::move(history)) {}
  bool mask(std::span<float> logits) override {
    n_masks++;
    for (size_t t = 0; t < logits.size(); ++t)
      if (static_cast<int32_t>(t) != want()) logits[t] = -std::numeric_limits<float>::infinity();
    return true;
  }
  bool allows(int32_t token) override { return token == want(); }
  bool accept(int32_t token) override {
    if (token != want()) return false;
    history_.push_back(token);
    return true;
  }
  bool complete() const override { return false; }
  int32_t want() const {
    std::vector<float> row(kVocab);
    FakeModelRunner::reference_logits(history_, kVocab, row.data());
    return static_cast<int32_t>(std::min_element(row.begin(), row.end()) - row.begin());
  }
  int n_masks = 0;

 private:
  std::vector<TokenId> history_;
};

TEST(Constraint, RetriesThatFindNothingLeaveItToTheMask) {
  for (float temperature : {0.0f, 1.0f}) {
    Harness h;
    h.runner.argmax_when_asked = true;
    h.runner.sample_when_asked = true;
    h.runner.settle_all = true;
    h.engine = std::make_unique<Engine>(test_config(), h.runner);
    const std::vector<TokenId> prompt = prompt_of(6, 5);
    GenerateRequest r = greedy(prompt, 6);
    r.sampling.temperature = temperature;
    auto c = std::make_shared<LeastLikely>(prompt);
    r.constraint = c;
    const uint64_t id = h.submit(std::move(r));
    h.run();
    SCOPED_TRACE(::testing::Message() << "temperature " << temperature);
    ASSERT_EQ(h.result(id).tokens.size(), 6u) << h.result(id).error;
    std::vector<TokenId> history = prompt;
    for (TokenId t : h.result(id).tokens) {
      EXPECT_EQ(t, LeastLikely(history).want());
      history.push_back(t);
    }
    // The least likely of 64 is never among the 16 best; a draw finds it 16 times in a row
    // with probability ~(1/64)-ish per try: masks for (nearly) every token.
    EXPECT_GE(c->n_masks, temperature == 0.0f ? 6 : 4);
    EXPECT_EQ(h.engine->stats().n_constraint_masks, c->n_masks);
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
