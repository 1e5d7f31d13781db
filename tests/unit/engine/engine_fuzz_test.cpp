// Randomized engine test: thousands of arrivals with random lengths, shared prefixes, sampling
// settings, stop tokens, cancellations, tiny and failing KV memory and random scheduler limits,
// constrained greedy requests, for several fixed seeds. After every step: check_integrity(). At
// the end: no leaked block, every request finished exactly once, and every request's tokens
// equal an independent reference (the fake model's logits on the plain token history, masked
// for a constrained one, + the request's own RNG).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "unit/engine/fake_model_runner.h"

namespace t9::engine {
namespace {

using testing::FakeModelRunner;

constexpr int kVocab = 48;

// A structured-output stand-in for greedy requests: token i of the output must be = i (mod 3).
// The runner's argmax is checked against it (refused about two times in three, then masked on
// the host), and with pipelined steps a refused token's lookahead row is dropped.
class ModThree : public TokenConstraint {
 public:
  bool mask(std::span<float> logits) override {
    for (size_t t = 0; t < logits.size(); ++t)
      if (!allows(static_cast<int32_t>(t))) logits[t] = -std::numeric_limits<float>::infinity();
    return true;
  }
  bool allows(int32_t token) override { return token % 3 == n_taken_ % 3; }
  bool accept(int32_t token) override {
    if (!allows(token)) return false;
    ++n_taken_;
    return true;
  }
  bool complete() const override { return false; }

 private:
  int n_taken_ = 0;
};

struct Tracked {
  GenerateRequest req;  // a copy without the callback
  std::vector<TokenId> tokens;
  FinishReason finish = FinishReason::kNone;
  int n_finish_events = 0;
  int n_kv_tokens = 0;  // KV the request needs at most: prompt + max_tokens - 1
};

// What the request must produce: sampling on the oracle's logits with the request's own RNG.
std::vector<TokenId> reference(const GenerateRequest& req, uint64_t id) {
  std::vector<TokenId> hist = req.prompt, out;
  Rng rng(req.sampling.seed.value_or(0));
  EXPECT_TRUE(req.sampling.seed.has_value()) << id;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < req.max_tokens; ++i) {
    FakeModelRunner::reference_logits(hist, kVocab, logits.data());
    if (req.constraint)  // ModThree's mask, then the usual (greedy) sampling
      for (int t = 0; t < kVocab; ++t)
        if (t % 3 != i % 3) logits[t] = -std::numeric_limits<float>::infinity();
    std::span<const TokenId> all(hist);
    TokenId t = sample_token(logits, req.sampling, all.first(req.prompt.size()),
                             all.subspan(req.prompt.size()), rng, false, 0)
                    .token;
    out.push_back(t);
    hist.push_back(t);
    if (std::count(req.stop_token_ids.begin(), req.stop_token_ids.end(), t)) break;
  }
  return out;
}

// decode_heavy: mostly greedy requests without penalties, whose steps can be pipelined.
GenerateRequest random_request(std::mt19937& rng, const std::vector<std::vector<TokenId>>& bases,
                               bool decode_heavy = false) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  GenerateRequest r;
  // Half the prompts extend a shared base (prefix-cache hits, partial and whole-block).
  if (uni(0, 1)) {
    const auto& base = bases[uni(0, static_cast<int>(bases.size()) - 1)];
    r.prompt.assign(base.begin(), base.begin() + uni(1, static_cast<int>(base.size())));
  }
  int n_extra = uni(r.prompt.empty() ? 1 : 0, 24);
  for (int i = 0; i < n_extra; ++i) r.prompt.push_back(uni(0, kVocab - 1));
  r.max_tokens = uni(1, decode_heavy ? 40 : 16);
  r.sampling.seed = rng();
  // Greedy: 1 in 3; decode-heavy 9 in 10 (a step is pipelined only when all its rows are).
  const int t = decode_heavy ? uni(0, 9) : uni(0, 2);
  r.sampling.temperature = (decode_heavy ? t != 0 : t == 0) ? 0.0f : 0.7f;
  r.sampling.top_k = uni(0, 1) ? 0 : uni(1, 10);
  r.sampling.top_p = uni(0, 1) ? 1.0f : 0.8f;
  r.sampling.repetition_penalty = uni(0, decode_heavy ? 19 : 3) == 0 ? 1.3f : 1.0f;
  r.sampling.frequency_penalty = uni(0, decode_heavy ? 19 : 3) == 0 ? 0.4f : 0.0f;
  if (uni(0, 3) == 0) r.stop_token_ids = {uni(0, kVocab - 1), uni(0, kVocab - 1)};
  // One greedy request in four is constrained (its reference masks the same way).
  if (r.sampling.temperature == 0.0f && uni(0, 3) == 0) r.constraint = std::make_shared<ModThree>();
  return r;
}

EngineConfig random_config(std::mt19937& rng, int block_size, bool decode_heavy = false) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  EngineConfig c;
  c.kv.pool.block_size_tokens = block_size;
  c.kv.pool.grow_chunk_blocks = uni(1, 8);
  c.kv.pool.max_blocks = decode_heavy ? uni(16, 128) : uni(8, 48);
  c.kv.enable_prefix_cache = uni(0, 3) != 0;
  c.scheduler.max_batch_tokens = uni(1, 96);
  c.scheduler.prefill_chunk_tokens = uni(1, 40);
  c.scheduler.max_seqs = uni(1, 8);
  // Speculative drafts (greedy requests only): verification must keep the tokens exact.
  c.scheduler.spec = {uni(0, decode_heavy ? 1 : 3) == 0 ? 0 : uni(1, 5), 3, uni(1, 2)};
  c.max_context_tokens = 1 << 20;
  c.check_every_step = false;  // checked by the test after every step, with the seed named
  return c;
}

// What a run exercised, summed over seeds to show the test reaches the interesting paths.
struct Coverage {
  int64_t n_preemptions = 0, n_cached_prompt_tokens = 0, n_cancelled = 0, n_stopped = 0,
          n_errors = 0, n_requests = 0, n_drafts = 0, n_prefix_waits = 0, n_mid_saves = 0,
          n_pipelined_steps = 0, n_discarded_tokens = 0, n_refused_checks = 0;
};

// recurrent: the fake runner plays a hybrid model (recurrent state, checkpointed prefix hits).
// pipelined: pipelined steps on a runner that computes in wait() (FakeModelRunner::deferred),
// deciding every row itself (the argmax, or the draw with the request's u), as the CUDA runner
// does.
void run_fuzz(uint32_t seed, int n_arrivals, Coverage* cov, bool recurrent = false,
              bool pipelined = false) {
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int block_size = std::array{1, 2, 4, 8}[uni(0, 3)];
  EngineConfig cfg = random_config(rng, block_size, pipelined);
  FakeModelRunner runner(kVocab, block_size);
  runner.recurrent = recurrent;
  runner.mid_step = seed % 2 == 0;  // half the seeds: checkpoints saved inside steps
  if (pipelined) {
    cfg.pipeline = StepPipeline::kOn;
    runner.deferred = true;
    runner.argmax_when_asked = true;
    runner.sample_when_asked = true;
    runner.settle_all = true;
  }
  if (recurrent) {
    cfg.state_checkpoint_budget_bytes = 0;  // the count below is the budget
    cfg.kv.max_state_checkpoints = uni(0, 8);
  }
  // Sometimes the device runs out before the configured cap.
  if (uni(0, 2) == 0) runner.grow_limit_blocks = uni(2, cfg.kv.pool.max_blocks / 2);
  const int capacity_tokens =
      std::min(runner.grow_limit_blocks, cfg.kv.pool.max_blocks) * block_size;
  Engine engine(cfg, runner);
  std::vector<std::vector<TokenId>> bases;
  for (int b = 0; b < 4; ++b) {
    bases.emplace_back();
    for (int i = 0; i < 40; ++i) bases.back().push_back(uni(0, kVocab - 1));
  }
  std::map<uint64_t, std::shared_ptr<Tracked>> live;
  std::vector<std::pair<uint64_t, std::shared_ptr<Tracked>>> all;
  int n_arrived = 0;
  for (int step = 0; n_arrived < n_arrivals || engine.stats().n_running + engine.stats().n_waiting;
       ++step) {
    ASSERT_LT(step, 200000) << "seed " << seed << ": no progress";
    // Pipelined runs: arrivals in bursts with quiet steps between them (an arrival ends the
    // pipeline for a step, so that the normal schedule admits it).
    const int n_new = pipelined ? (uni(0, 9) == 0 ? uni(1, 6) : 0) : uni(0, 2);
    for (int k = n_new; k > 0 && n_arrived < n_arrivals; --k, ++n_arrived) {
      GenerateRequest r = random_request(rng, bases, pipelined);
      auto t = std::make_shared<Tracked>();
      t->req = r;
      t->n_kv_tokens = static_cast<int>(r.prompt.size()) + r.max_tokens - 1;
      r.on_event = [t](const TokenEvent& ev) {
        if (ev.token >= 0) t->tokens.push_back(ev.token);
        if (ev.finish != FinishReason::kNone) {
          t->finish = ev.finish;
          t->n_finish_events++;
        }
      };
      Result<uint64_t> id = engine.submit(std::move(r));
      if (!id.ok()) {  // only over-long requests are refused
        ASSERT_GT(t->n_kv_tokens + 1, cfg.kv.pool.max_blocks * block_size) << id.message();
        continue;
      }
      live[*id] = t;
      all.emplace_back(*id, t);
    }
    if (!live.empty() && uni(0, 39) == 0) {  // cancel a random live request
      auto it = std::next(live.begin(), uni(0, static_cast<int>(live.size()) - 1));
      it->second->req.cancelled->store(true);
    }
    engine.step();
    Status s = engine.check_integrity();
    ASSERT_TRUE(s.ok()) << "seed " << seed << " step " << step << ": " << s.message();
    std::erase_if(live, [](const auto& kv) { return kv.second->finish != FinishReason::kNone; });
  }
  EngineStats st = engine.stats();
  EXPECT_EQ(st.kv_blocks_used, 0) << "seed " << seed;
  cov->n_preemptions += st.n_preemptions;
  cov->n_cached_prompt_tokens += st.n_cached_prompt_tokens;
  cov->n_requests += st.n_requests;
  cov->n_drafts += st.n_draft_tokens;
  cov->n_mid_saves += runner.n_mid_saves;
  cov->n_prefix_waits += st.n_prefix_waits;
  cov->n_pipelined_steps += st.n_pipelined_steps;
  cov->n_discarded_tokens += st.n_discarded_tokens;
  cov->n_refused_checks += runner.n_refused_checks;
  EXPECT_EQ(runner.n_checkpoints_held(), st.n_state_checkpoints) << "seed " << seed;
  EXPECT_EQ(runner.n_states_held(), 0) << "seed " << seed;
  EXPECT_EQ(engine.kv().pool().n_free(), engine.kv().pool().n_blocks()) << "seed " << seed;
  for (const auto& [id, t] : all) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " request " << id);
    ASSERT_EQ(t->n_finish_events, 1);
    std::vector<TokenId> want = reference(t->req, id);
    cov->n_cancelled += t->finish == FinishReason::kCancelled;
    cov->n_stopped += t->finish == FinishReason::kStop;
    cov->n_errors += t->finish == FinishReason::kError;
    switch (t->finish) {
      case FinishReason::kCancelled:  // whatever came before the cancel is still right
        ASSERT_LE(t->tokens.size(), want.size());
        EXPECT_TRUE(std::equal(t->tokens.begin(), t->tokens.end(), want.begin()));
        break;
      case FinishReason::kError:  // only when it cannot fit in the memory the device has
        EXPECT_GT(t->n_kv_tokens, capacity_tokens);
        break;
      default:
        EXPECT_EQ(t->tokens, want);
        EXPECT_EQ(t->finish, want.size() < static_cast<size_t>(t->req.max_tokens) ||
                                     std::count(t->req.stop_token_ids.begin(),
                                                t->req.stop_token_ids.end(), want.back())
                                 ? FinishReason::kStop
                                 : FinishReason::kLength);
    }
  }
}

TEST(EngineFuzz, RandomTrafficKeepsInvariantsAndExactOutputs) {
  Coverage cov;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    run_fuzz(seed, 400, &cov);
    if (HasFatalFailure()) return;
  }
  std::printf(
      "requests %ld preemptions %ld cached prompt tokens %ld prefix waits %ld cancelled %ld "
      "stopped %ld errors %ld\n",
      cov.n_requests, cov.n_preemptions, cov.n_cached_prompt_tokens, cov.n_prefix_waits,
      cov.n_cancelled, cov.n_stopped, cov.n_errors);
  EXPECT_GT(cov.n_requests, 3000);  // accepted ones; a few are too long for the cache
  EXPECT_GT(cov.n_preemptions, 0);
  EXPECT_GT(cov.n_cached_prompt_tokens, 0);
  EXPECT_GT(cov.n_prefix_waits, 0);  // requests waited for a running one's shared prefix
  EXPECT_GT(cov.n_cancelled, 0);
  EXPECT_GT(cov.n_stopped, 0);
  EXPECT_GT(cov.n_errors, 0);
}

// The same traffic on a model with recurrent state: every prefix hit restores a checkpoint, which
// the fake runner verifies against the KV; any wrong restore fails a request, and the check
// above accepts errors only for requests that cannot fit.
TEST(EngineFuzz, RecurrentModelRandomTrafficKeepsInvariantsAndExactOutputs) {
  Coverage cov;
  for (uint32_t seed = 101; seed <= 112; ++seed) {
    run_fuzz(seed, 400, &cov, /*recurrent=*/true);
    if (HasFatalFailure()) return;
  }
  std::printf(
      "recurrent: requests %ld preemptions %ld cached prompt tokens %ld prefix waits %ld "
      "drafts %ld\n",
      cov.n_requests, cov.n_preemptions, cov.n_cached_prompt_tokens, cov.n_prefix_waits,
      cov.n_drafts);
  EXPECT_GT(cov.n_drafts, 0);     // speculative steps (and their undo) ran on the recurrent model
  EXPECT_GT(cov.n_mid_saves, 0);  // and checkpoints saved inside steps
  EXPECT_GT(cov.n_requests, 3000);
  EXPECT_GT(cov.n_preemptions, 0);
  EXPECT_GT(cov.n_cached_prompt_tokens, 0);
  EXPECT_GT(cov.n_prefix_waits, 0);
}

// Pipelined steps under the same traffic, with the "device" computing each step only when it is
// waited for: the next step's plan, stop tokens, cancels and length limits land while a step is
// in flight. Outputs must equal the reference exactly, and nothing may leak.
TEST(EngineFuzz, PipelinedStepsKeepInvariantsAndExactOutputs) {
  for (const bool recurrent : {false, true}) {
    Coverage cov;
    for (uint32_t seed = 201; seed <= 212; ++seed) {
      run_fuzz(seed, 400, &cov, recurrent, /*pipelined=*/true);
      if (HasFatalFailure()) return;
    }
    std::printf(
        "pipelined%s: requests %ld pipelined steps %ld discarded tokens %ld refused checks %ld "
        "cancelled %ld stopped %ld preemptions %ld cached prompt tokens %ld\n",
        recurrent ? " recurrent" : "", cov.n_requests, cov.n_pipelined_steps,
        cov.n_discarded_tokens, cov.n_refused_checks, cov.n_cancelled, cov.n_stopped,
        cov.n_preemptions, cov.n_cached_prompt_tokens);
    EXPECT_GT(cov.n_refused_checks, 0);  // constrained rows checked by the runner, some refused
    EXPECT_GT(cov.n_requests, 3000);
    EXPECT_GT(cov.n_pipelined_steps, 0);
    EXPECT_GT(cov.n_discarded_tokens, 0);  // rows computed past a stop token or a cancel
    EXPECT_GT(cov.n_preemptions, 0);
    EXPECT_GT(cov.n_cached_prompt_tokens, 0);
  }
}

}  // namespace
}  // namespace t9::engine
