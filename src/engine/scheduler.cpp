#include "engine/scheduler.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "core/check.h"

namespace t9::engine {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  T9_CHECK(config_.max_batch_tokens > 0 && config_.max_seqs > 0 && config_.prefill_chunk_tokens > 0,
           "scheduler limits must be positive");
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  T9_CHECK(seq && seq->n_total() > 0 && seq->block_table.empty(), "bad new sequence");
  T9_CHECK(!seqs_.count(seq->id), "duplicate sequence id {}", seq->id);
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq.get());
  seqs_.emplace(seq->id, std::move(seq));
}

Sequence* Scheduler::find(uint64_t id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::finish(uint64_t id, bool keep_state) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence* s = it->second.get();
  kv_.free(*s, keep_state);
  waiting_for_memory_ = false;  // the blocks it held may let the head in
  std::erase(running_, s);
  std::erase(waiting_, s);
  seqs_.erase(it);
}

int Scheduler::chunk_for(const Sequence& seq, int n_past, int budget) const {
  int n = std::min({seq.n_total() - n_past, budget, config_.prefill_chunk_tokens});
  return kv_.cut_at_checkpoint(seq, n_past, n);
}

// The plan entry for computing seq's next n tokens, then the draft (blocks already allocated).
ScheduledSeq Scheduler::scheduled(Sequence* s, int n, std::vector<TokenId> draft) {
  const int n_draft = static_cast<int>(draft.size());
  ScheduledSeq ss;
  ss.seq = s;
  ss.n_past = s->n_computed;
  ss.n_tokens = n + n_draft;
  ss.need_logits = s->n_computed + n == s->n_total();
  ss.restore_checkpoint = std::exchange(s->restore_checkpoint, 0);
  if (!draft.empty() && kv_.recurrent()) {
    // The state after this step covers the drafts too: keep the state before it instead, to
    // undo the step if a draft is rejected (and save no checkpoint from it).
    T9_CHECK(s->spec_undo == 0, "seq {}: a speculative undo point is still pending", s->id);
    ss.snapshot_before = s->spec_undo = kv_.new_checkpoint_id();
  } else {
    ss.save_checkpoint = kv_.checkpoint_for_step(*s, s->n_computed + n);
    if (const int p = kv_.mid_checkpoint(*s, s->n_computed, n); p > 0) {
      ss.save_mid_tokens = p - s->n_computed;
      ss.save_mid_checkpoint = kv_.checkpoint_for_step(*s, p);
    }
  }
  ss.draft = std::move(draft);
  return ss;
}

// Drafts only for a decoding sequence (its one pending token is the last sampled one) and within
// the step's token budget.
std::vector<TokenId> Scheduler::draft_for(const Sequence& s, int budget) const {
  if (s.n_pending() != 1 || budget <= 1) return {};
  if (!s.forced_draft.empty()) {  // a constraint's forced tokens: never prompt lookup as well
    const int n = std::min({static_cast<int>(s.forced_draft.size()), budget - 1,
                            s.max_generated - s.n_generated() - 1});
    return {s.forced_draft.begin(), s.forced_draft.begin() + std::max(n, 0)};
  }
  if (config_.spec.max_draft <= 0 || !s.spec_eligible) return {};
  NgramDraftConfig c = config_.spec;
  // A step emits up to 1 + drafts tokens; never draft past the request's max_tokens.
  c.max_draft = std::min({c.max_draft, budget - 1, s.max_generated - s.n_generated() - 1});
  if (c.max_draft <= 0) return {};
  return propose_ngram_draft(s.tokens, c);
}

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
  kv_.free(*seq);
  seq->status = SeqStatus::kPreempted;
  seq->n_preemptions++;
  waiting_.push_front(seq);
  plan.preempted.push_back(seq->id);
}

void Scheduler::fail(Sequence* seq, StepPlan& plan) {
  kv_.free(*seq);
  seq->status = SeqStatus::kFinished;
  plan.failed.push_back(seq->id);
}

// Running sequences in admission order (as vLLM and Sarathi-Serve do): each prompt chunk takes
// what the budget has left (up to prefill_chunk_tokens) minus one token for every decoding
// sequence after it, so a prompt chunk as large as the step never holds a decode back a step.
// Returns false when it preempted a sequence (then nothing new is admitted this step).
bool Scheduler::schedule_running(StepPlan& plan, int& budget) {
  bool preempted = false;
  int decoding_after = 0;  // decoding sequences in running_[i + 1, end)
  for (const Sequence* r : running_) decoding_after += r->n_pending() == 1 ? 1 : 0;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    const bool decoding = s->n_pending() == 1;
    if (decoding) --decoding_after;
    const int room = decoding ? budget : budget - decoding_after;
    if (room <= 0) {  // the rest of the step is the later decodes'
      ++i;
      continue;
    }
    int n = chunk_for(*s, s->n_computed, room);
    T9_CHECK(n > 0, "running seq {} has nothing to compute", s->id);
    std::vector<TokenId> draft = draft_for(*s, budget - decoding_after);
    const bool forced = !draft.empty() && !s->forced_draft.empty();
    // Drafts only where their KV fits now: never preempt or fail a sequence for a draft.
    if (!draft.empty() && !kv_.allocate(*s, n + static_cast<int>(draft.size()))) draft.clear();
    const int n_draft = static_cast<int>(draft.size());
    bool scheduled = true;
    while (!kv_.allocate(*s, n + n_draft)) {
      if (running_.size() == 1) {  // alone and still no room: it can never fit
        running_.pop_back();
        fail(s, plan);
        scheduled = false;
        break;
      }
      Sequence* victim = running_.back();
      running_.pop_back();
      if (victim != s && victim->n_pending() == 1) --decoding_after;
      preempt(victim, plan);
      preempted = true;
      if (victim == s) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;  // s was the last running sequence
    plan.seqs.push_back(this->scheduled(s, n, std::move(draft)));
    plan.seqs.back().draft_forced = forced && n_draft > 0;
    plan.n_tokens += n + n_draft;
    budget -= n + n_draft;
    ++i;
  }
  return !preempted;
}

namespace {

// Leading full prompt blocks that a and b share (their chained block hashes agree up to there,
// so one binary search finds the first difference). Only blocks both have hashes for count.
int shared_prompt_blocks(const Sequence& a, const Sequence& b, int bs) {
  int hi = static_cast<int>(std::min(a.block_hashes.size(), b.block_hashes.size()));
  hi = std::min({hi, a.n_prompt / bs, b.n_prompt / bs});
  int lo = 0;  // blocks [0, lo) shared, [hi, ...) not known to be
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.block_hashes[mid - 1] == b.block_hashes[mid - 1])
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace

// Agents re-sending one system prompt often arrive together (their previous turns ended in the
// same step). Admitted together, each would compute the shared prefix itself; instead a waiting
// sequence waits for a running one that is still computing a longer shared prefix than the
// cache holds now, when that saves at least as many tokens as the running one has left to
// compute up to the end of the shared part (SGLang's in-batch prefix caching makes the same
// trade). Recurrent models get a checkpoint planned there (plan_branch_points has done so for the
// first max_seqs waiting ones already), so the wait yields a usable hit.
bool Scheduler::defer_for_shared_prefix(const Sequence& seq, const PrefixMatch& hit) {
  if (!kv_.prefix_cache_enabled()) return false;
  const int bs = kv_.block_size();
  for (Sequence* r : running_) {
    if (r->n_computed >= r->n_prompt) continue;  // its prompt blocks are cached already
    const int shared = shared_prompt_blocks(seq, *r, bs) * bs;
    const int gain = shared - hit.n_tokens, wait = shared - r->n_computed;
    if (wait <= 0 || gain < bs || gain < wait) continue;
    kv_.add_checkpoint_position(*r, shared);  // no-op when already planned
    return true;
  }
  return false;
}

// Recurrent models, every step before anything is scheduled: each running sequence still
// computing its prompt also saves its state where a waiting sequence's prompt parts from it. The
// waiting one is only considered for admission when the step has budget left; without this, a
// running prompt whose chunks take the whole step would compute past the branch point, and the
// waiting one would find the KV blocks cached but no state to resume from (a miss: it computes the
// shared prefix again). Costs one extra chunk cut and state save per (running, branch point).
void Scheduler::plan_branch_points() {
  if (!kv_.checkpoints_enabled()) return;
  const int bs = kv_.block_size();
  const size_t n_wait = std::min(waiting_.size(), static_cast<size_t>(config_.max_seqs));
  for (size_t i = 0; i < n_wait; ++i) {
    Sequence& w = *waiting_[i];
    kv_.ensure_prompt_hashes(w);
    for (Sequence* r : running_) {
      if (r->n_computed >= r->n_prompt) continue;
      kv_.add_checkpoint_position(*r, shared_prompt_blocks(w, *r, bs) * bs);
    }
  }
}

// Recurrent models: a sequence being admitted also saves its state where its prompt parts from
// each waiting one's, so that those (held back by defer_for_shared_prefix) find a checkpoint
// there; planned before its first chunk is cut, which would otherwise run past that point.
void Scheduler::plan_shared_checkpoints(Sequence& seq) {
  if (!kv_.checkpoints_enabled()) return;
  const int bs = kv_.block_size();
  for (Sequence* w : waiting_) {
    kv_.ensure_prompt_hashes(*w);
    kv_.add_checkpoint_position(seq, shared_prompt_blocks(*w, seq, bs) * bs);
  }
}

void Scheduler::schedule_waiting(StepPlan& plan, int& budget) {
  size_t i = 0;  // waiting_[0, i): deferred this step
  while (i < waiting_.size() && budget > 0 && n_running() < config_.max_seqs) {
    Sequence* s = waiting_[i];
    PrefixMatch hit = kv_.match_prefix(*s);
    if (defer_for_shared_prefix(*s, hit)) {
      ++plan.n_prefix_waits;
      ++i;
      continue;
    }
    int n = chunk_for(*s, hit.n_tokens, budget);
    if (!kv_.allocate(*s, n, &hit)) {
      if (!running_.empty()) {  // wait for running sequences to free memory (FCFS)
        waiting_for_memory_ = true;
        return;
      }
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));  // it can never fit
      fail(s, plan);
      continue;
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (s->n_cached_prompt_tokens < 0)
      s->n_cached_prompt_tokens = std::min(hit.n_tokens, s->n_prompt);
    s->status = SeqStatus::kRunning;
    running_.push_back(s);
    kv_.plan_checkpoints(*s, hit);
    plan_shared_checkpoints(*s);
    // The plan may stop the first chunk earlier (at a checkpoint position); blocks allocated for
    // the rest stay with the sequence for its next step.
    n = std::min(n, kv_.cut_at_checkpoint(*s, s->n_computed, n));
    plan.seqs.push_back(scheduled(s, n));
    plan.n_tokens += n;
    budget -= n;
  }
}

StepPlan Scheduler::schedule() {
  waiting_for_memory_ = false;
  StepPlan plan;
  int budget = config_.max_batch_tokens;
  plan_branch_points();
  if (schedule_running(plan, budget)) schedule_waiting(plan, budget);
  return plan;
}

StepPlan Scheduler::schedule_lookahead(const StepPlan& prev, std::span<const char> keep) {
  // A waiting sequence is admitted by the normal schedule, when there is room for it.
  if (!waiting_.empty() && n_running() < config_.max_seqs && !waiting_for_memory_) return {};
  for (size_t i = 0; i < prev.seqs.size(); ++i) {
    const ScheduledSeq& p = prev.seqs[i];
    if (!p.draft.empty() || !p.need_logits) return {};  // so prev's output row i is entry i's
    if (!keep[i]) continue;                             // (its sequence may have ended)
    // Only after a sequence's latest step, with its token still to come.
    Sequence* s = p.seq;
    if (s->n_computed != p.n_past || p.n_past + p.n_tokens != s->n_total() ||
        s->restore_checkpoint != 0)
      return {};
    if (config_.spec.max_draft > 0 && s->spec_eligible) return {};
    // Its blocks cover the step in flight and the token that step samples.
    if (!kv_.allocate(*s, p.n_tokens + 1)) return {};
  }
  StepPlan plan;
  for (size_t i = 0; i < prev.seqs.size(); ++i) {
    if (!keep[i]) continue;
    const ScheduledSeq& p = prev.seqs[i];
    ScheduledSeq ss;
    ss.seq = p.seq;
    ss.n_past = p.n_past + p.n_tokens;
    ss.n_tokens = 1;
    ss.need_logits = true;
    ss.token_from_row = static_cast<int>(i);
    ss.save_checkpoint = kv_.checkpoint_for_lookahead(*ss.seq, ss.n_past + 1);
    plan.seqs.push_back(ss);
    plan.n_tokens += 1;
  }
  return plan;
}

void Scheduler::on_computed(const StepPlan& plan, std::span<const int> n_valid) {
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& ss = plan.seqs[i];
    T9_CHECK(ss.seq->n_computed == ss.n_past, "seq {} moved during the step", ss.seq->id);
    const int n = n_valid.empty() ? ss.n_tokens : n_valid[i];
    // Rejected drafts leave fewer valid tokens; on a recurrent model none (the step is undone).
    const int n_min = ss.snapshot_before ? 0 : ss.n_tokens - static_cast<int>(ss.draft.size());
    T9_CHECK(n >= n_min && n <= ss.n_tokens, "seq {}: {} valid of {} tokens", ss.seq->id, n,
             ss.n_tokens);
    T9_CHECK(ss.n_past + n <= ss.seq->n_total(), "seq {}: KV beyond its tokens", ss.seq->id);
    ss.seq->n_computed += n;
    kv_.commit(*ss.seq);
    if (ss.save_mid_checkpoint != 0)  // positions in order: the one inside the step first
      kv_.on_checkpoint_saved(*ss.seq, ss.n_past + ss.save_mid_tokens, ss.save_mid_checkpoint);
    if (ss.save_checkpoint != 0)
      kv_.on_checkpoint_saved(*ss.seq, ss.seq->n_computed, ss.save_checkpoint);
  }
}

std::vector<const Sequence*> Scheduler::live() const {
  std::vector<const Sequence*> out;
  out.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) out.push_back(s.get());
  return out;
}

Status Scheduler::check_integrity() const {
  for (const Sequence* s : waiting_) {
    if (!s->block_table.empty() || s->n_computed != 0)
      return error("waiting seq {} holds {} blocks", s->id, s->block_table.size());
  }
  if (waiting_.size() + running_.size() > seqs_.size())
    return error("{} waiting + {} running > {} sequences", waiting_.size(), running_.size(),
                 seqs_.size());
  auto seqs = live();
  return kv_.check_integrity(seqs);
}

}  // namespace t9::engine
