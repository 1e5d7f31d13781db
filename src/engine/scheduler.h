// Scheduler: decides each step which tokens of which sequences to compute. One code path for
// prefill, chunked prefill, decode, prefix hits and resume (vLLM v1): every step fills a token
// budget with the pending tokens of running sequences (oldest first; decodes are 1 token), then
// admits waiting sequences FCFS (a head that does not fit blocks the queue: no starvation),
// except that a sequence whose prompt prefix another running sequence is computing right now
// waits for those blocks instead of computing them too (defer_for_shared_prefix; on recurrent
// models the running one saves its state where they part, planned every step:
// plan_branch_points).
// When a running sequence's KV cannot grow, the newest running sequence is preempted: its blocks
// are freed (full ones stay in the prefix cache) and it goes back to the head of the waiting
// queue, to be recomputed later from whatever prefix is still cached.
//
// Owns the Sequences. Not thread-safe: the engine thread calls it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/ngram_draft.h"
#include "engine/sequence.h"

namespace t9::engine {

struct SchedulerConfig {
  int max_batch_tokens = 2048;  // tokens per step, all sequences together
  int max_seqs = 64;            // running sequences
  // Most tokens one sequence computes in one step. The default is the whole step budget: prompts
  // arriving together are then computed first come, first served rather than side by side, which
  // gives most of them their first token sooner for the same total work (8 agents' 2.3k-token warm
  // turns on the H200, run 37: first-token p50 -9% / -30% on turns 2 / 3, throughput -1%;
  // docs/PERFORMANCE.md). Smaller values share steps between prompts.
  int prefill_chunk_tokens = 2048;
  // Speculative decoding with prompt-lookup drafts: spec.max_draft = 0 turns it off.
  NgramDraftConfig spec{0, 3, 2};
};

// One sequence's share of a step: compute tokens [n_past, n_past + n_tokens) at those positions,
// with the KV in seq->block_table.
struct ScheduledSeq {
  Sequence* seq = nullptr;
  int n_past = 0;
  int n_tokens = 0;
  bool need_logits = false;  // the chunk reaches the end of the sequence: sample the next token
  // Recurrent models: load this checkpoint into the sequence's state before the step (a prefix
  // hit), and save the state after the step into that one (0: none). See StateCheckpoints.
  uint64_t restore_checkpoint = 0;
  uint64_t save_checkpoint = 0;
  // And after the first save_mid_tokens of the step's tokens (a planned position inside the
  // step; ModelRunner::supports_mid_step_checkpoints), into save_mid_checkpoint (0: none).
  uint64_t save_mid_checkpoint = 0;
  int save_mid_tokens = 0;
  // Speculative decoding: draft tokens computed after the sequence's real pending token (they are
  // the last draft.size() of n_tokens); the step needs logits for the real token and each draft.
  std::vector<TokenId> draft;
  bool draft_forced = false;     // the draft is a constraint's forced tokens, not prompt lookup
  uint64_t snapshot_before = 0;  // ForwardSeq::snapshot_before (recurrent models with drafts)
  // A pipelined step (schedule_lookahead): the one token is the one the step in flight samples
  // in this output row (ForwardSeq::token_from_row); -1 otherwise.
  int token_from_row = -1;
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  int n_tokens = 0;
  std::vector<uint64_t> preempted;  // sequences moved back to waiting this step
  std::vector<uint64_t> failed;     // cannot fit even alone; the caller finishes them with an error
  int n_prefix_waits = 0;           // waiting sequences held back for a running one's shared prefix
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Mutates: queues a new sequence (status kWaiting, no blocks) at the tail.
  void add(std::unique_ptr<Sequence> seq);
  Sequence* find(uint64_t id);
  // Mutates: frees the blocks and destroys the sequence (finished, cancelled or failed).
  // keep_state = false when a failed step may have left its recurrent state half written.
  void finish(uint64_t id, bool keep_state = true);

  // Mutates: plans the next step and allocates its blocks.
  StepPlan schedule();
  // Mutates: a pipelined step, planned while `prev` (every entry a one-row decode or a prompt's
  // last chunk, without drafts) is still computing: one token for each prev.seqs[i] with keep[i]
  // (the others' sequences end with prev), the token prev samples for it, at the end of its prev
  // entry, in prev's order. Empty (nothing planned) when the normal schedule has something to do
  // instead: a waiting sequence it could admit, or drafts to propose; also when an entry is not
  // its sequence's latest step, or a sequence's KV cannot grow without preempting (blocks taken
  // for other entries stay with their sequences).
  StepPlan schedule_lookahead(const StepPlan& prev, std::span<const char> keep);
  // Mutates: after the model ran the plan, advances n_computed and registers full blocks.
  // n_valid[i] (when given): how many of plan.seqs[i]'s tokens hold valid KV — fewer than
  // n_tokens when drafts were rejected.
  void on_computed(const StepPlan& plan, std::span<const int> n_valid = {});

  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  int n_running() const { return static_cast<int>(running_.size()); }
  bool has_work() const { return !seqs_.empty(); }
  std::vector<const Sequence*> live() const;
  Status check_integrity() const;

 private:
  bool schedule_running(StepPlan& plan, int& budget);
  void schedule_waiting(StepPlan& plan, int& budget);
  bool defer_for_shared_prefix(const Sequence& seq, const PrefixMatch& hit);
  void plan_branch_points();
  void plan_shared_checkpoints(Sequence& seq);
  void preempt(Sequence* seq, StepPlan& plan);
  void fail(Sequence* seq, StepPlan& plan);
  int chunk_for(const Sequence& seq, int n_past, int budget) const;
  ScheduledSeq scheduled(Sequence* seq, int n_tokens, std::vector<TokenId> draft = {});
  std::vector<TokenId> draft_for(const Sequence& seq, int budget) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;   // FCFS; preempted sequences re-enter at the head
  std::vector<Sequence*> running_;  // oldest admitted first
  // The last schedule() left the waiting head out for lack of KV memory, and no sequence has
  // freed its blocks since (pipelined steps go on meanwhile: nothing could be admitted).
  bool waiting_for_memory_ = false;
};

}  // namespace t9::engine
