// Scheduler tests without a model: a "step" is schedule(), then on_computed(), then appending a
// token to every sequence that got logits (what the engine's sampler does).
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

namespace t9::engine {
namespace {

using Ids = std::vector<BlockId>;

struct Planned {
  uint64_t id;
  int n_past;
  int n_tokens;
  bool need_logits;
  bool operator==(const Planned&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Planned& p) {
  return os << "{" << p.id << ", " << p.n_past << ", " << p.n_tokens << ", " << p.need_logits
            << "}";
}

class SchedulerTest : public ::testing::Test {
 protected:
  void init(int max_blocks, SchedulerConfig sc, bool recurrent = false) {
    KvCacheConfig kc;
    kc.recurrent_checkpoints = recurrent;
    kc.pool.block_size_tokens = 4;
    kc.pool.grow_chunk_blocks = max_blocks;
    kc.pool.max_blocks = max_blocks;
    kv_ = std::make_unique<KvCacheManager>(kc, nullptr);
    sched_ = std::make_unique<Scheduler>(sc, *kv_);
  }

  void add(uint64_t id, int n_prompt, TokenId first = 0) {
    std::vector<TokenId> t(static_cast<size_t>(n_prompt));
    std::iota(t.begin(), t.end(), first);
    add_tokens(id, std::move(t));
  }
  void add_tokens(uint64_t id, std::vector<TokenId> prompt) {
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->n_prompt = static_cast<int>(prompt.size());
    s->tokens = std::move(prompt);
    sched_->add(std::move(s));
  }

  // One step; returns what was planned.
  std::vector<Planned> step(StepPlan* out = nullptr) {
    StepPlan plan = sched_->schedule();
    std::vector<Planned> got;
    for (const ScheduledSeq& s : plan.seqs)
      got.push_back({s.seq->id, s.n_past, s.n_tokens, s.need_logits});
    sched_->on_computed(plan);
    for (const ScheduledSeq& s : plan.seqs)
      if (s.need_logits) s.seq->tokens.push_back(1000 + s.seq->n_generated());
    EXPECT_TRUE(sched_->check_integrity().ok()) << sched_->check_integrity().message();
    if (out) *out = std::move(plan);
    return got;
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(SchedulerTest, FillsTheBudgetWithDecodesFirstThenPromptChunks) {
  init(100, {.max_batch_tokens = 10, .max_seqs = 8, .prefill_chunk_tokens = 6});
  add(1, 8);
  add(2, 8, 100);  // another prompt (the same one would wait for 1's blocks: SharedPrefix* below)
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 6, false}, {2, 0, 4, false}}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 6, 2, true}, {2, 4, 4, true}}));
  add(3, 20, 200);
  // Two decodes, then 8 tokens of budget for the newcomer (capped by its 6-token chunk).
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 8, 1, true}, {2, 8, 1, true}, {3, 0, 6, false}}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 9, 1, true}, {2, 9, 1, true}, {3, 6, 6, false}}));
}

// A prompt chunk as large as the step leaves one token for every decoding sequence after it in
// admission order. Sequence 2 decodes behind 1, whose prompt was cut at a state checkpoint (the
// only way a later-admitted sequence finishes its prompt first); without the reserve 1's chunk
// took the whole budget and 2 skipped a step.
TEST_F(SchedulerTest, PromptChunksLeaveATokenForEachLaterDecode) {
  init(100, {.max_batch_tokens = 10, .max_seqs = 8, .prefill_chunk_tokens = 10}, true);
  add(1, 40);
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 10, false}}));
  kv_->add_checkpoint_position(*sched_->find(1), 12);
  add(2, 3, 100);
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 10, 2, false}, {2, 0, 3, true}}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 12, 9, false}, {2, 3, 1, true}}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 21, 9, false}, {2, 4, 1, true}}));
}

// A "system prompt" of 24 tokens (6 blocks) + a 3-token tail per agent.
std::vector<TokenId> agent_prompt(TokenId tail) {
  std::vector<TokenId> p(24);
  std::iota(p.begin(), p.end(), 0);
  for (int i = 0; i < 3; ++i) p.push_back(500 + 10 * tail + i);
  return p;
}

// Agents arriving together with one system prompt: the first computes it, the others wait for its
// blocks instead of computing it again, then compute only their tails.
TEST_F(SchedulerTest, SharedPrefixWaitsForTheRunningSequencesBlocks) {
  init(100, {.max_batch_tokens = 64, .max_seqs = 8, .prefill_chunk_tokens = 12});
  add_tokens(1, agent_prompt(1));
  add_tokens(2, agent_prompt(2));
  add_tokens(3, agent_prompt(3));
  StepPlan plan;
  EXPECT_EQ(step(&plan), (std::vector<Planned>{{1, 0, 12, false}}));
  EXPECT_EQ(plan.n_prefix_waits, 2);
  EXPECT_EQ(sched_->n_waiting(), 2);
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 12, 12, false}}));
  // 1 has computed the 24 shared tokens: 2 and 3 hit all 6 blocks.
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 24, 3, true}, {2, 24, 3, true}, {3, 24, 3, true}}));
  EXPECT_EQ(sched_->find(2)->n_cached_prompt_tokens, 24);
  EXPECT_EQ(sched_->find(3)->n_cached_prompt_tokens, 24);
  EXPECT_EQ(sched_->find(2)->block_table[5], sched_->find(1)->block_table[5]);
}

// A deferred sequence does not hold up the queue behind it; prompts that part within their first
// block (nothing to share) are admitted together.
TEST_F(SchedulerTest, SharedPrefixDeferralSkipsOnlyThoseThatGain) {
  init(100, {.max_batch_tokens = 64, .max_seqs = 8, .prefill_chunk_tokens = 12});
  add_tokens(1, agent_prompt(1));
  add_tokens(2, agent_prompt(2));
  add(3, 5, 900);  // unrelated: admitted at once although 2 waits ahead of it
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 12, false}, {3, 0, 5, true}}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 12, 12, false}, {3, 5, 1, true}}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 24, 3, true}, {3, 6, 1, true}, {2, 24, 3, true}}));

  init(100, {.max_batch_tokens = 64, .max_seqs = 8, .prefill_chunk_tokens = 4});
  std::vector<TokenId> a(16), b(16);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  b[3] = 777;  // 3 shared tokens: no full block in common
  add_tokens(1, a);
  add_tokens(2, b);
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 4, false}, {2, 0, 4, false}}));
}

TEST_F(SchedulerTest, MaxSeqsCapsRunningSequences) {
  init(100, {.max_batch_tokens = 100, .max_seqs = 2, .prefill_chunk_tokens = 100});
  add(1, 3);
  add(2, 3);
  add(3, 3);
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 3, true}, {2, 0, 3, true}}));
  EXPECT_EQ(sched_->n_waiting(), 1);
  sched_->finish(1);
  EXPECT_EQ(step(), (std::vector<Planned>{{2, 3, 1, true}, {3, 0, 3, true}}));
}

TEST_F(SchedulerTest, PreemptsTheNewestAndResumesFromItsCachedPrefix) {
  init(4, {.max_batch_tokens = 64, .max_seqs = 8, .prefill_chunk_tokens = 64});
  add(1, 7, 0);
  add(2, 7, 100);
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 7, true}, {2, 0, 7, true}}));
  EXPECT_EQ(sched_->find(1)->block_table, (Ids{0, 1}));
  EXPECT_EQ(sched_->find(2)->block_table, (Ids{2, 3}));
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 7, 1, true}, {2, 7, 1, true}}));
  // Both now need a third block; none is free: 2 (newest) is preempted, its blocks are freed
  // (both full, so cached) and 1 takes the LRU one — 2's tail block 3.
  StepPlan plan;
  EXPECT_EQ(step(&plan), (std::vector<Planned>{{1, 8, 1, true}}));
  EXPECT_EQ(plan.preempted, (std::vector<uint64_t>{2}));
  Sequence* s2 = sched_->find(2);
  EXPECT_EQ(s2->status, SeqStatus::kPreempted);
  EXPECT_TRUE(s2->block_table.empty());
  EXPECT_EQ(sched_->find(1)->block_table, (Ids{0, 1, 3}));
  // 2 cannot come back while 1 holds 3 of the 4 blocks (it needs 3: one hit + two new).
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 9, 1, true}}));
  sched_->finish(1);
  // Resume: block 2 (2's first block) is still cached, so only tokens 4..8 are recomputed;
  // the generated token 1000 (index 7) is part of the resumed sequence.
  EXPECT_EQ(step(), (std::vector<Planned>{{2, 4, 5, true}}));
  EXPECT_EQ(s2->block_table[0], 2);
  EXPECT_EQ(s2->tokens[7], 1000);
  EXPECT_EQ(s2->n_cached_prompt_tokens, 0);  // usage counts the first admission only
}

TEST_F(SchedulerTest, WaitingHeadThatDoesNotFitBlocksLaterArrivals) {
  init(6, {.max_batch_tokens = 64, .max_seqs = 8, .prefill_chunk_tokens = 64});
  add(1, 16);  // 4 blocks
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 0, 16, true}}));
  add(2, 12, 100);  // needs 3 blocks, 1 free (the other goes to 1's next token)
  add(3, 2, 200);   // would fit, but FCFS: no overtaking
  EXPECT_EQ(step(), (std::vector<Planned>{{1, 16, 1, true}}));
  EXPECT_EQ(sched_->n_waiting(), 2);
  sched_->finish(1);
  EXPECT_EQ(step(), (std::vector<Planned>{{2, 0, 12, true}, {3, 0, 2, true}}));
}

TEST_F(SchedulerTest, ASequenceLargerThanTheWholeCacheFails) {
  init(2, {.max_batch_tokens = 64, .max_seqs = 8, .prefill_chunk_tokens = 64});
  add(1, 9);  // 3 blocks > 2
  add(2, 4);
  StepPlan plan;
  EXPECT_EQ(step(&plan), (std::vector<Planned>{{2, 0, 4, true}}));
  EXPECT_EQ(plan.failed, (std::vector<uint64_t>{1}));
  sched_->finish(1);
  // Running alone and out of room is a failure too, not an endless preempt/resume cycle.
  EXPECT_EQ(step(), (std::vector<Planned>{{2, 4, 1, true}}));
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(sched_->find(2)->n_total(), 9);
  EXPECT_EQ(step(&plan), (std::vector<Planned>{}));
  EXPECT_EQ(plan.failed, (std::vector<uint64_t>{2}));
  sched_->finish(2);
  EXPECT_FALSE(sched_->has_work());
  EXPECT_EQ(kv_->pool().n_used(), 0);
}

}  // namespace
}  // namespace t9::engine
