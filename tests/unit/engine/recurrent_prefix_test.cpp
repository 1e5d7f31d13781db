// Prefix caching for models with recurrent state (hybrid Gated DeltaNet): every hit restores a
// state checkpoint taken exactly where the hit ends. The fake runner (recurrent mode) fails any
// step whose state does not match the tokens in the KV, so exact outputs here mean the restored
// states were right, and the token counters show what was recomputed.
#include <gtest/gtest.h>

#include "unit/engine/engine_harness.h"

namespace t9::engine {
namespace {

using testing::greedy;
using testing::Harness;
using testing::kBlock;
using testing::kVocab;
using testing::oracle;
using testing::prompt_of;
using testing::test_config;

std::unique_ptr<Harness> recurrent_harness(EngineConfig cfg = test_config(),
                                           bool mid_step = false) {
  auto h = std::make_unique<Harness>(cfg);
  h->runner.recurrent = true;
  h->runner.mid_step = mid_step;
  h->engine = std::make_unique<Engine>(cfg, h->runner);  // sees has_recurrent_state() now
  return h;
}

std::vector<TokenId> user_turn(int turn) {
  std::vector<TokenId> t;
  for (int i = 0; i < 5 + 3 * turn; ++i)
    t.push_back(static_cast<TokenId>((turn * 17 + i * 11) % kVocab));
  return t;
}

// Agent `agent`'s prompt: the shared system prompt, then 9 tokens of its own.
std::vector<TokenId> agent_prompt(const std::vector<TokenId>& system, int agent) {
  std::vector<TokenId> p = system;
  for (int i = 0; i < 9; ++i) p.push_back(static_cast<TokenId>((agent * 13 + i * 5 + 1) % kVocab));
  return p;
}

// Checks every agent's 4 generated tokens against the oracle; the cached prompt tokens of each.
std::vector<int> agents_cached(Harness& h, const std::vector<uint64_t>& ids,
                               const std::vector<std::vector<TokenId>>& prompts) {
  std::vector<int> cached;
  for (size_t agent = 0; agent < ids.size(); ++agent) {
    EXPECT_EQ(h.result(ids[agent]).tokens, oracle(prompts[agent], 4)) << "agent " << agent;
    cached.push_back(h.result(ids[agent]).usage.n_cached_prompt_tokens);
  }
  return cached;
}

struct Turn {
  std::vector<TokenId> prompt, output;
  int n_cached = 0;
  int64_t n_computed = 0;  // tokens the model computed during this turn
  int64_t n_steps = 0;     // the model's steps during this turn
};

// An agent loop: every turn re-sends the whole history (previous prompt + reply + a new user
// message), as chat clients do.
std::vector<Turn> converse(Harness& h, int n_turns, int n_gen) {
  std::vector<Turn> turns;
  std::vector<TokenId> history = prompt_of(37, 5);  // "system prompt + first user message"
  for (int t = 0; t < n_turns; ++t) {
    if (t > 0) {
      history.insert(history.end(), turns.back().output.begin(), turns.back().output.end());
      auto u = user_turn(t);
      history.insert(history.end(), u.begin(), u.end());
    }
    const int64_t before = h.runner.n_tokens_computed, runs_before = h.runner.n_runs;
    uint64_t id = h.submit(greedy(history, n_gen));
    h.run();
    Turn turn;
    turn.prompt = history;
    turn.output = h.result(id).tokens;
    turn.n_cached = h.result(id).usage.n_cached_prompt_tokens;
    turn.n_computed = h.runner.n_tokens_computed - before;
    turn.n_steps = h.runner.n_runs - runs_before;
    EXPECT_EQ(h.result(id).finish, FinishReason::kLength) << h.result(id).error;
    turns.push_back(turn);
  }
  return turns;
}

TEST(RecurrentPrefixCache, FiveTurnConversationComputesOnlyTheSuffixAndMatchesNoCache) {
  constexpr int kGen = 7;
  auto cached = recurrent_harness();
  auto cfg = test_config();
  cfg.kv.enable_prefix_cache = false;
  auto plain = recurrent_harness(cfg);
  const std::vector<Turn> a = converse(*cached, 5, kGen);
  const std::vector<Turn> b = converse(*plain, 5, kGen);
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(::testing::Message() << "turn " << t);
    EXPECT_EQ(a[t].output, b[t].output);
    EXPECT_EQ(a[t].output, oracle(a[t].prompt, kGen));
    EXPECT_EQ(b[t].n_cached, 0);
    EXPECT_EQ(b[t].n_computed, static_cast<int64_t>(a[t].prompt.size()) + kGen - 1);
    if (t == 0) {
      EXPECT_EQ(a[t].n_cached, 0);
      continue;
    }
    // The previous turn computed its prompt and all but its last generated token; its state at
    // the last block boundary of that was kept, so only what lies after it is computed again.
    const int prev_computed = static_cast<int>(a[t - 1].prompt.size()) + kGen - 1;
    EXPECT_EQ(a[t].n_cached, prev_computed / kBlock * kBlock);
    EXPECT_EQ(a[t].n_computed, static_cast<int64_t>(a[t].prompt.size()) - a[t].n_cached + kGen - 1);
    EXPECT_LT(static_cast<int>(a[t].prompt.size()) - a[t].n_cached, kBlock + 3 * t + 5 + 1)
        << "more than the new user message and one block was recomputed";
  }
  EXPECT_EQ(cached->runner.n_restores, 4);
  EXPECT_EQ(plain->runner.n_restores, 0);
  // Every checkpoint the runner holds is one the cache can still hand out; no state is held for
  // finished sequences.
  EXPECT_EQ(cached->runner.n_checkpoints_held(), cached->engine->stats().n_state_checkpoints);
  EXPECT_EQ(cached->runner.n_states_held(), 0);
  EXPECT_EQ(plain->runner.n_checkpoints_held(), 0);
}

// A runner that saves checkpoints inside a step: the checkpoint at each prompt's last block
// boundary is taken on the way, so every turn's prompt is one step (the cut form spends a second
// step on the prompt's tokens after that boundary, a whole forward pass on a real model: ~4 ms of
// a warm agent turn on Qwen3.5-35B-A3B). Same outputs, same hits, same tokens computed.
TEST(RecurrentPrefixCache, MidStepCheckpointsTakeEachPromptInOneStep) {
  constexpr int kGen = 7;
  auto cut = recurrent_harness();
  auto mid = recurrent_harness(test_config(), /*mid_step=*/true);
  const std::vector<Turn> a = converse(*cut, 5, kGen);
  const std::vector<Turn> b = converse(*mid, 5, kGen);
  int fewer = 0;
  for (int t = 0; t < 5; ++t) {
    SCOPED_TRACE(::testing::Message() << "turn " << t);
    EXPECT_EQ(b[t].output, a[t].output);
    EXPECT_EQ(b[t].output, oracle(b[t].prompt, kGen));
    EXPECT_EQ(b[t].n_cached, a[t].n_cached);
    EXPECT_EQ(b[t].n_computed, a[t].n_computed);
    // One prefill step, then a decode step per generated token after the first.
    EXPECT_EQ(b[t].n_steps, kGen);
    const bool tail = b[t].prompt.size() % kBlock != 0;  // tokens after the last boundary
    EXPECT_EQ(a[t].n_steps, kGen + (tail ? 1 : 0));
    fewer += tail ? 1 : 0;
  }
  EXPECT_GT(fewer, 0) << "no turn had tokens after its last block boundary";
  EXPECT_EQ(mid->runner.n_mid_saves, fewer);
  EXPECT_EQ(mid->runner.n_restores, cut->runner.n_restores);
  EXPECT_EQ(mid->runner.n_checkpoints_held(), mid->engine->stats().n_state_checkpoints);
  EXPECT_EQ(mid->runner.n_states_held(), 0);
}

// Agents sharing a system prompt: the first two find only KV blocks (no state checkpoint where
// their prompts part), so the second takes one there; from the third on, the shared part is a hit.
TEST(RecurrentPrefixCache, SharedSystemPromptGetsACheckpointAtTheBranchPoint) {
  auto h = recurrent_harness();
  const std::vector<TokenId> system = prompt_of(30, 9);  // 7 full blocks + 2 tokens
  std::vector<int> cached;
  for (int agent = 0; agent < 4; ++agent) {
    const std::vector<TokenId> p = agent_prompt(system, agent);
    uint64_t id = h->submit(greedy(p, 4));
    h->run();
    EXPECT_EQ(h->result(id).tokens, oracle(p, 4)) << "agent " << agent;
    cached.push_back(h->result(id).usage.n_cached_prompt_tokens);
  }
  EXPECT_EQ(cached, (std::vector<int>{0, 0, 28, 28}));
}

// The same four agents arriving together (their previous turns ended in one step): the first
// computes the system prompt and saves its state where the prompts part; the others wait for it
// (Scheduler::defer_for_shared_prefix) and resume there, computing only their own tails.
TEST(RecurrentPrefixCache, AgentsArrivingTogetherComputeTheSharedPromptOnce) {
  for (bool recurrent : {true, false}) {
    SCOPED_TRACE(recurrent ? "recurrent" : "attention only");
    auto h = recurrent ? recurrent_harness() : std::make_unique<Harness>(test_config());
    const std::vector<TokenId> system = prompt_of(30, 9);  // 7 full blocks + 2 tokens
    std::vector<std::vector<TokenId>> prompts;
    std::vector<uint64_t> ids;
    for (int agent = 0; agent < 4; ++agent) {
      prompts.push_back(agent_prompt(system, agent));
      ids.push_back(h->submit(greedy(prompts.back(), 4)));
    }
    const int64_t before = h->runner.n_tokens_computed;
    h->run();
    EXPECT_EQ(agents_cached(*h, ids, prompts), (std::vector<int>{0, 28, 28, 28}));
    // 39 prompt tokens, then 3 more per agent; the others skip the 28 shared ones.
    EXPECT_EQ(h->runner.n_tokens_computed - before, 4 * (39 + 3) - 3 * 28);
  }
}

// The same agents arriving one step after the first, whose prompt chunks take the whole step
// budget (--prefill-chunk = --max-batch-tokens): the waiting ones are not even considered for
// admission while it computes, yet their branch point is planned on it every step, so it still
// stops there to save its state and they resume from it instead of recomputing the system prompt.
TEST(RecurrentPrefixCache, AgentsArrivingWhileTheFirstTakesTheWholeStepStillShareIt) {
  auto h = recurrent_harness(test_config(256, /*chunk=*/8, /*batch=*/8));
  const std::vector<TokenId> system = prompt_of(30, 9);  // 7 full blocks + 2 tokens
  std::vector<std::vector<TokenId>> prompts;
  std::vector<uint64_t> ids;
  const int64_t before = h->runner.n_tokens_computed;
  for (int agent = 0; agent < 4; ++agent) {
    prompts.push_back(agent_prompt(system, agent));
    ids.push_back(h->submit(greedy(prompts.back(), 4)));
    if (agent == 0) {
      ASSERT_TRUE(h->engine->step());  // the first computes 8 of its 39 tokens
    }
  }
  h->run();
  EXPECT_EQ(agents_cached(*h, ids, prompts), (std::vector<int>{0, 28, 28, 28}));
  EXPECT_EQ(h->runner.n_tokens_computed - before, 4 * (39 + 3) - 3 * 28);
}

// The KV blocks of a prefix are cached but the checkpoint budget is 0 checkpoints: a recurrent
// model then gets no hit at all (a hit without state would be wrong), and outputs stay exact.
TEST(RecurrentPrefixCache, NoCheckpointMeansNoHit) {
  auto cfg = test_config();
  cfg.state_checkpoint_budget_bytes = 0;  // the count below is the budget
  cfg.kv.max_state_checkpoints = 0;
  auto h = recurrent_harness(cfg);
  auto p = prompt_of(41, 3);
  h->submit(greedy(p, 5));
  h->run();
  uint64_t again = h->submit(greedy(p, 5));
  h->run();
  EXPECT_EQ(h->result(again).usage.n_cached_prompt_tokens, 0);
  EXPECT_EQ(h->result(again).tokens, oracle(p, 5));
  EXPECT_EQ(h->runner.n_checkpoints_held(), 0);
}

// Checkpoints are evicted with their blocks: under memory pressure the cache forgets blocks, and
// no checkpoint outlives its block (check_integrity after every step), outputs stay exact.
TEST(RecurrentPrefixCache, CheckpointsGoWithTheirBlocksUnderPressure) {
  auto h = recurrent_harness(test_config(/*max_blocks=*/24, 32, 64));
  std::vector<std::pair<uint64_t, std::vector<TokenId>>> reqs;
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 4; ++i) {
      auto p = prompt_of(30 + 3 * i, i);
      reqs.emplace_back(h->submit(greedy(p, 12)), p);
    }
  h->run();
  for (auto& [id, p] : reqs) EXPECT_EQ(h->result(id).tokens, oracle(p, 12)) << id;
  EXPECT_GT(h->engine->stats().n_preemptions, 0);
  EXPECT_GT(h->runner.n_restores, 0);
  EXPECT_EQ(h->runner.n_checkpoints_held(), h->engine->stats().n_state_checkpoints);
  EXPECT_LE(h->engine->stats().n_state_checkpoints, h->engine->kv().stats().n_blocks_cached);
}

// Speculative decoding on a recurrent model: a step with rejected drafts is undone (the state saved
// before it is restored and the kept tokens recomputed); the fake runner checks every step's state
// against the KV, and the tokens stay the oracle's, with the prefix cache on and off.
TEST(RecurrentPrefixCache, SpeculativeStepsAreUndoneExactly) {
  for (bool cache : {true, false}) {
    auto cfg = test_config();
    cfg.kv.enable_prefix_cache = cache;
    cfg.scheduler.spec = {3, 3, 1};
    auto h = recurrent_harness(cfg);
    std::vector<TokenId> p;
    for (int i = 0; i < 40; ++i) p.push_back(static_cast<TokenId>(i % 4));
    std::vector<uint64_t> ids;
    for (int k = 0; k < 4; ++k) {
      auto q = p;
      q.push_back(static_cast<TokenId>(10 + k));
      ids.push_back(h->submit(greedy(q, 30)));
    }
    h->run();
    for (int k = 0; k < 4; ++k) {
      auto q = p;
      q.push_back(static_cast<TokenId>(10 + k));
      EXPECT_EQ(h->result(ids[k]).tokens, oracle(q, 30)) << "cache " << cache << " request " << k;
    }
    EXPECT_GT(h->engine->stats().n_draft_tokens, 0);
    EXPECT_EQ(h->runner.n_checkpoints_held(), h->engine->stats().n_state_checkpoints);
    EXPECT_EQ(h->runner.n_states_held(), 0);
  }
}

// A failed step may leave a sequence's state half written: its snapshots are never published.
TEST(RecurrentPrefixCache, FailedStepPublishesNothing) {
  auto h = recurrent_harness();
  auto p = prompt_of(40, 4);
  h->runner.fail_next_run = true;
  uint64_t failed = h->submit(greedy(p, 3));
  h->run();
  EXPECT_EQ(h->result(failed).finish, FinishReason::kError);
  EXPECT_EQ(h->engine->stats().n_state_checkpoints, 0);
  uint64_t again = h->submit(greedy(p, 3));
  h->run();
  EXPECT_EQ(h->result(again).usage.n_cached_prompt_tokens, 0);
  EXPECT_EQ(h->result(again).tokens, oracle(p, 3));
}

}  // namespace
}  // namespace t9::engine
