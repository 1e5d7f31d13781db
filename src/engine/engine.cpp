#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "core/argmax.h"
#include "core/check.h"
#include "core/log.h"

namespace t9::engine {

namespace {

// A fixed mix so that requests without a seed still get distinct, reproducible streams.
uint64_t default_seed(uint64_t request_id) {
  return request_id * 0x9e3779b97f4a7c15ULL ^ 0x7e3b0;
}

int max_request_tokens(const EngineConfig& c) {
  int64_t kv_tokens = static_cast<int64_t>(c.kv.pool.max_blocks) * c.kv.pool.block_size_tokens;
  return static_cast<int>(std::min<int64_t>(c.max_context_tokens, kv_tokens));
}

}  // namespace

EngineConfig adapted_to(EngineConfig config, const ModelRunner& runner) {
  config.kv.recurrent_checkpoints = runner.has_recurrent_state();
  config.kv.mid_step_checkpoints =
      config.kv.recurrent_checkpoints && runner.supports_mid_step_checkpoints();
  const size_t bytes = runner.state_checkpoint_bytes();
  if (config.kv.recurrent_checkpoints && bytes > 0 && config.state_checkpoint_budget_bytes > 0) {
    // At least 2, so that a shared prefix and a sequence's own end can both be kept.
    const int64_t n = config.state_checkpoint_budget_bytes / static_cast<int64_t>(bytes);
    config.kv.max_state_checkpoints = static_cast<int>(std::clamp<int64_t>(n, 2, 1 << 20));
  }
  return config;
}

Engine::Engine(const EngineConfig& config, ModelRunner& runner)
    : config_(adapted_to(config, runner)),
      runner_(runner),
      kv_(config_.kv, [this](int n_total) { return runner_.grow_kv_blocks(n_total); }),
      scheduler_(config_.scheduler, kv_) {
  pipeline_ = config_.pipeline == StepPipeline::kOn ||
              (config_.pipeline == StepPipeline::kAuto && runner_.overlaps_steps());
  publish_stats(0);
}

Engine::~Engine() {
  stop();
  intake();
  std::vector<uint64_t> ids;
  for (const auto& [id, st] : requests_) ids.push_back(id);
  for (uint64_t id : ids) finish(id, FinishReason::kError, "engine shut down");
  if (in_flight_) {  // every row's request is gone: only the runner's queue is left to drain
    in_flight_.reset();
    (void)runner_.wait();
  }
  end_deferred();
}

Result<uint64_t> Engine::submit(GenerateRequest req) {
  T9_TRY(validate_request(req, runner_.n_vocab(), max_request_tokens(config_)));
  uint64_t id = next_id_.fetch_add(1);
  counters_.n_waiting.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    incoming_.emplace_back(id, std::move(req));
  }
  cv_.notify_one();
  return id;
}

// Takes in new requests and drops cancelled ones (their blocks return within this step).
void Engine::intake() {
  std::vector<std::pair<uint64_t, GenerateRequest>> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(incoming_);
  }
  for (auto& [id, req] : batch) {
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->tokens = req.prompt;
    seq->n_prompt = static_cast<int>(req.prompt.size());
    seq->cache_salt = req.cache_salt;
    seq->spec_eligible = req.sampling.temperature == 0.0f;
    seq->max_generated = req.max_tokens;
    RequestState st{std::move(req), Rng(0), Usage{}, false, {}, false, {}};
    st.rng = Rng(st.req.sampling.seed.value_or(default_seed(id)));
    st.usage.n_prompt_tokens = seq->n_prompt;
    counters_.n_requests.fetch_add(1);
    counters_.n_prompt_tokens.fetch_add(seq->n_prompt);
    requests_.emplace(id, std::move(st));
    scheduler_.add(std::move(seq));
  }
  std::vector<uint64_t> cancelled;
  for (const auto& [id, st] : requests_)
    if (st.req.cancelled->load(std::memory_order_relaxed)) cancelled.push_back(id);
  for (uint64_t id : cancelled) finish(id, FinishReason::kCancelled);
}

bool Engine::step() {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const auto t0 = Clock::now();
  intake();
  auto t_run = Clock::now(), t_post = t_run;
  if (!in_flight_) {
    StepPlan plan = scheduler_.schedule();
    note_plan(plan);
    if (!plan.empty()) {
      ForwardBatch batch = make_batch(plan);
      t_run = t_post = Clock::now();
      if (pipeline_ && pipelinable(plan, batch)) {
        runner_.enqueue(batch);  // waited for below, after the next step is enqueued
        in_flight_ = InFlight{std::move(plan), std::move(batch)};
      } else {
        Result<ForwardOutput> out = runner_.run(batch);
        t_post = Clock::now();
        postprocess(plan, batch, out);
      }
    }
  }
  if (in_flight_) {
    std::optional<InFlight> next = enqueue_lookahead(*in_flight_);
    InFlight cur = std::move(*in_flight_);
    in_flight_ = std::move(next);  // what end_sequence defers for from here on
    t_run = Clock::now();
    Result<ForwardOutput> out = runner_.wait();
    t_post = Clock::now();
    drop_ended_rows(cur.plan, cur.batch, out);
    note_stale_lookahead(cur, out);
    postprocess(cur.plan, cur.batch, out);
    end_deferred();
  }
  if (std::vector<uint64_t> dropped = kv_.take_dropped_checkpoints(); !dropped.empty())
    runner_.drop_checkpoints(dropped);
  const auto t_done = Clock::now();
  if (config_.check_every_step) {
    Status s = check_integrity();
    T9_CHECK(s.ok(), "engine integrity after step {}: {}", counters_.n_steps.load(), s.message());
  }
  counters_.n_steps.fetch_add(1);
  const double step_ms = ms(t0, Clock::now());
  counters_.total_step_ms.fetch_add(step_ms);
  counters_.total_schedule_ms.fetch_add(ms(t0, t_run));
  counters_.total_model_ms.fetch_add(ms(t_run, t_post));
  counters_.total_postprocess_ms.fetch_add(ms(t_post, t_done));
  publish_stats(step_ms);
  if (config_.on_step) config_.on_step(step_ms);
  std::lock_guard lock(mu_);
  return scheduler_.has_work() || !incoming_.empty() || in_flight_.has_value();
}

// A step the next one can be planned behind: every sequence samples a token (a decode or a
// prompt's last chunk) without drafts, and the runner decides it (an argmax, or a draw that
// always settles on the device). The next step's penalties count that token where the runner
// reads it (PendingEdit).
bool Engine::pipelinable(const StepPlan& plan, const ForwardBatch& batch) const {
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& ss = plan.seqs[i];
    const ForwardSeq& f = batch.seqs[i];
    if (!ss.need_logits || !ss.draft.empty()) return false;
    // A checked row only where the check waits for the engine's accept (a refused token's
    // lookahead row is then dropped), and not on a recurrent model (that row moved the state).
    if (f.check != nullptr && (!runner_.checks_when_waited() || runner_.has_recurrent_state()))
      return false;
    if (f.argmax_only) continue;
    if (!f.sample_on_device || !runner_.decides(f.sampling)) return false;
  }
  return !plan.seqs.empty();
}

std::optional<Engine::InFlight> Engine::enqueue_lookahead(const InFlight& cur) {
  if (!pipelinable(cur.plan, cur.batch)) return std::nullopt;
  // A refused token's sequence recomputes normally; a grammar that forces the next tokens makes
  // them one step's drafts (the normal schedule), worth more than planning ahead.
  if (!stale_.empty()) return std::nullopt;
  for (const ScheduledSeq& ss : cur.plan.seqs)
    if (!ss.seq->forced_draft.empty()) return std::nullopt;
  {
    std::lock_guard lock(mu_);
    if (!incoming_.empty()) return std::nullopt;  // the normal schedule admits them
  }
  // One token for each sequence of cur that goes on: its request still there, not cancelled,
  // not taking its last token in cur.
  std::vector<char> keep(cur.plan.seqs.size(), 0);
  for (size_t i = 0; i < cur.plan.seqs.size(); ++i) {
    auto it = requests_.find(cur.batch.seqs[i].seq_id);
    if (it == requests_.end()) continue;
    const RequestState& st = it->second;
    keep[i] = st.usage.n_generated_tokens + 1 < st.req.max_tokens &&
              !st.req.cancelled->load(std::memory_order_relaxed);
  }
  if (std::find(keep.begin(), keep.end(), 1) == keep.end()) return std::nullopt;
  StepPlan plan = scheduler_.schedule_lookahead(cur.plan, keep);
  if (plan.empty()) return std::nullopt;
  note_plan(plan);
  ForwardBatch batch = make_batch(plan);
  runner_.enqueue(batch);
  counters_.n_pipelined_steps.fetch_add(1);
  return InFlight{std::move(plan), std::move(batch)};
}

// A row of `cur` the runner left without a token (-1: its check refused it) gets the host's
// token in postprocess, but the step in flight read the runner's: that sequence's row there is
// stale, and dropped when it is waited for (drop_ended_rows).
void Engine::note_stale_lookahead(const InFlight& cur, const Result<ForwardOutput>& out) {
  if (!in_flight_ || !out.ok() || out->tokens.empty()) return;
  // (Every pipelined step passes here: the usual answer, no row left without a token, is cheap.)
  if (std::none_of(out->tokens.begin(), out->tokens.end(), [](int32_t t) { return t < 0; })) return;
  int row = 0;
  std::unordered_map<uint64_t, int> row_of;  // cur's logit row of each sequence
  for (const ForwardSeq& f : cur.batch.seqs) {
    if (!f.need_logits) continue;
    row_of[f.seq_id] = row;
    row += f.n_logits;
  }
  for (const ForwardSeq& f : in_flight_->batch.seqs) {
    if (f.token_from_row < 0) continue;
    auto it = row_of.find(f.seq_id);
    if (it != row_of.end() && out->tokens[static_cast<size_t>(it->second)] < 0)
      stale_.insert(f.seq_id);
  }
}

void Engine::drop_ended_rows(StepPlan& plan, ForwardBatch& batch, Result<ForwardOutput>& out) {
  std::vector<int> first_row(plan.seqs.size());
  int row = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    first_row[i] = row;
    row += plan.seqs[i].need_logits ? batch.seqs[i].n_logits : 0;
  }
  for (size_t k = plan.seqs.size(); k-- > 0;) {
    // A stale row (note_stale_lookahead): its sequence goes on, and computes this position again
    // from the host's token (its n_computed is not advanced for this step).
    const bool stale = stale_.erase(batch.seqs[k].seq_id) > 0;
    if (requests_.count(batch.seqs[k].seq_id) && !stale) continue;
    const ScheduledSeq& ss = plan.seqs[k];
    // Its saves are never published (a rolling one, or its spare, goes with the sequence).
    if (ss.save_checkpoint != 0 && ss.save_checkpoint != ss.seq->rolling_checkpoint &&
        ss.save_checkpoint != ss.seq->rolling_spare)
      kv_.drop_checkpoint(ss.save_checkpoint);
    if (ss.save_mid_checkpoint != 0) kv_.drop_checkpoint(ss.save_mid_checkpoint);
    counters_.n_discarded_tokens.fetch_add(ss.n_tokens);
    const int n = ss.need_logits ? batch.seqs[k].n_logits : 0;
    if (out.ok() && n > 0) {
      ForwardOutput& o = *out;
      const auto r0 = static_cast<std::ptrdiff_t>(first_row[k]);
      if (!o.tokens.empty()) o.tokens.erase(o.tokens.begin() + r0, o.tokens.begin() + r0 + n);
      if (!o.logits.empty()) {
        const auto v = static_cast<std::ptrdiff_t>(o.n_vocab);
        o.logits.erase(o.logits.begin() + r0 * v, o.logits.begin() + (r0 + n) * v);
      }
      o.n_rows -= n;
    }
    plan.n_tokens -= ss.n_tokens;
    plan.seqs.erase(plan.seqs.begin() + static_cast<std::ptrdiff_t>(k));
    batch.seqs.erase(batch.seqs.begin() + static_cast<std::ptrdiff_t>(k));
  }
}

bool Engine::in_flight_has(uint64_t seq_id) const {
  if (!in_flight_) return false;
  for (const ForwardSeq& f : in_flight_->batch.seqs)
    if (f.seq_id == seq_id) return true;
  return false;
}

void Engine::end_deferred() {
  std::erase_if(retired_constraints_, [this](const auto& c) { return !in_flight_has(c.first); });
  std::erase_if(deferred_ends_, [this](const std::pair<uint64_t, bool>& d) {
    if (in_flight_has(d.first)) return false;
    scheduler_.finish(d.first, d.second);
    runner_.release_sequence(d.first);
    return true;
  });
}

// Bookkeeping a plan implies before it runs: failures, preemptions, first admissions.
void Engine::note_plan(const StepPlan& plan) {
  for (uint64_t id : plan.failed)
    finish(id, FinishReason::kError, "the request does not fit in the KV cache");
  counters_.n_preemptions.fetch_add(static_cast<int64_t>(plan.preempted.size()));
  counters_.n_prefix_waits.fetch_add(plan.n_prefix_waits);
  counters_.n_computed_tokens.fetch_add(plan.n_tokens);
  for (const ScheduledSeq& ss : plan.seqs) {
    auto it = requests_.find(ss.seq->id);  // (a pipelined step's row may outlive its request)
    if (it == requests_.end() || it->second.admitted) continue;
    RequestState& st = it->second;
    st.admitted = true;
    st.usage.n_cached_prompt_tokens = std::max(ss.seq->n_cached_prompt_tokens, 0);
    counters_.n_cached_prompt_tokens.fetch_add(st.usage.n_cached_prompt_tokens);
  }
}

ForwardBatch Engine::make_batch(const StepPlan& plan) {
  ForwardBatch b;
  b.block_size = kv_.block_size();
  b.tokens.reserve(plan.n_tokens);
  b.positions.reserve(plan.n_tokens);
  int logit_row = 0;
  for (const ScheduledSeq& ss : plan.seqs) {
    const Sequence& s = *ss.seq;
    const int n_draft = static_cast<int>(ss.draft.size());
    ForwardSeq f{static_cast<int>(b.tokens.size()),
                 ss.n_tokens,
                 ss.n_past,
                 std::span<const BlockId>(s.block_table),
                 ss.need_logits,
                 1 + n_draft,
                 s.id,
                 ss.restore_checkpoint,
                 ss.save_checkpoint,
                 ss.snapshot_before};
    f.save_mid_checkpoint = ss.save_mid_checkpoint;
    f.save_mid_tokens = ss.save_mid_tokens;
    // A constrained row's token is checked against the constraint's current state, which only
    // the first row of a step has: with drafts the rows come to the host and are masked there.
    TokenConstraint* constraint =
        ss.need_logits ? requests_.at(s.id).req.constraint.get() : nullptr;
    f.argmax_only = ss.need_logits && argmax_only(s.id) && (n_draft == 0 || !constraint);
    if (ss.need_logits && n_draft == 0 && !f.argmax_only && device_samplable(s.id)) {
      RequestState& st = requests_.at(s.id);
      const SamplingParams& sp = st.req.sampling;
      std::span<const TokenId> all(s.tokens);
      if (sp.repetition_penalty != 1.0f && !st.has_prompt_distinct) {
        st.prompt_distinct = distinct_tokens(all.first(s.n_prompt), runner_.n_vocab());
        st.has_prompt_distinct = true;
      }
      const size_t mark = b.edits.size(), mark_pending = b.pending.size();
      // A pipelined row's token in flight (the previous step's, this step's input) counts in
      // its penalties: the runner edits it where it reads it.
      const int in_flight = ss.token_from_row >= 0 ? f.first_token : -1;
      if (make_logit_edits(sp,
                           {runner_.n_vocab(), st.prompt_distinct, all.subspan(s.n_prompt),
                            logit_row, /*with_bias=*/true, in_flight},
                           &b.edits, &b.pending)) {
        // The token's one uniform draw (none when greedy), taken now so the runner can sample
        // on the device; the host uses the same u if the runner returns the logits instead.
        f.sample_on_device = true;
        f.sampling = {sp.temperature, sp.top_k, sp.top_p, sp.min_p,
                      sp.temperature != 0.0f ? st.rng.uniform() : 0.0};
        if (st.req.logprobs || st.req.n_top_logprobs > 0) f.n_top_logprobs = st.req.n_top_logprobs;
      } else {
        b.edits.resize(mark);
        b.pending.resize(mark_pending);
      }
    }
    if (f.argmax_only || f.sample_on_device) f.check = constraint;
    if (ss.need_logits) logit_row += f.n_logits;
    if (ss.token_from_row >= 0) {  // the step in flight samples it, in that row
      f.token_from_row = ss.token_from_row;
      b.seqs.push_back(f);
      b.tokens.push_back(0);
      b.positions.push_back(ss.n_past);
      continue;
    }
    b.seqs.push_back(f);
    for (int i = 0; i < ss.n_tokens; ++i) {
      b.tokens.push_back(i < ss.n_tokens - n_draft ? s.tokens[ss.n_past + i]
                                                   : ss.draft[i - (ss.n_tokens - n_draft)]);
      b.positions.push_back(ss.n_past + i);
    }
  }
  return b;
}

void Engine::postprocess(const StepPlan& plan, const ForwardBatch& batch,
                         Result<ForwardOutput>& out) {
  int n_rows = 0;
  for (const ScheduledSeq& ss : plan.seqs)
    n_rows += ss.need_logits ? 1 + static_cast<int>(ss.draft.size()) : 0;
  std::string err;
  if (!out.ok())
    err = "model run failed: " + out.message();
  else if (out->n_rows != n_rows || out->n_vocab != runner_.n_vocab() ||
           (out->tokens.empty()
                ? out->logits.size() != static_cast<size_t>(n_rows) * out->n_vocab
                : out->tokens.size() != static_cast<size_t>(n_rows) ||
                      (!out->logits.empty() &&
                       out->logits.size() != static_cast<size_t>(n_rows) * out->n_vocab)))
    err = fmt::format("model returned {} logit rows of {} for {} rows of {}", out->n_rows,
                      out->n_vocab, n_rows, runner_.n_vocab());
  else if (!out->tokens.empty() && !batch.all_argmax_only() && !batch.all_sampled_by_runner())
    err = "model returned tokens for a step that needs logits";
  else if (!out->tokens.empty() && out->logits.empty() &&
           std::find(out->tokens.begin(), out->tokens.end(), -1) != out->tokens.end())
    err = "model left a token undecided without its logits";
  else if (!out->tokens.empty() && !logprobs_returned(batch, *out))
    err = "model returned sampled tokens without the logprobs asked for";
  if (!err.empty()) {
    // The KV of this step is unknown: fail its requests rather than risk corrupt outputs.
    for (const ScheduledSeq& ss : plan.seqs) {
      if (ss.save_checkpoint != 0 && ss.save_checkpoint != ss.seq->rolling_checkpoint)
        kv_.drop_checkpoint(ss.save_checkpoint);
      if (ss.save_mid_checkpoint != 0) kv_.drop_checkpoint(ss.save_mid_checkpoint);
      finish(ss.seq->id, FinishReason::kError, err);
    }
    return;
  }
  // 1. Sample (and verify drafts), appending the new tokens to each sequence; 2. advance the KV
  // bookkeeping by what is valid (a rejected draft's KV is not); 3. emit events, ending sequences
  // at their first stop. Tokens go in before step 2 so block hashes can cover them.
  std::vector<std::vector<SampleResult>> sampled(plan.seqs.size());
  std::vector<int> n_valid(plan.seqs.size());
  int row = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& ss = plan.seqs[i];
    n_valid[i] = ss.n_tokens;
    if (!ss.need_logits) continue;
    sampled[i] = sample_step(*ss.seq, requests_.at(ss.seq->id), batch.seqs[i], ss.draft, *out, row);
    row += 1 + static_cast<int>(ss.draft.size());
    // The real token plus each accepted draft hold valid KV (none sampled: a constraint failed,
    // and the request ends with the real tokens' KV).
    n_valid[i] = ss.n_tokens - static_cast<int>(ss.draft.size()) +
                 std::max(static_cast<int>(sampled[i].size()), 1) - 1;
    Sequence& seq = *ss.seq;
    if (ss.snapshot_before != 0 && n_valid[i] < ss.n_tokens) {
      // Recurrent state cannot drop the rejected drafts: undo the whole step (the sampled tokens
      // stand; the next step recomputes from the state saved before this one).
      n_valid[i] = 0;
      seq.restore_checkpoint = seq.spec_undo;
    } else if (ss.snapshot_before != 0) {
      kv_.drop_checkpoint(std::exchange(seq.spec_undo, 0));  // all drafts kept: no undo needed
    }
  }
  for (const ScheduledSeq& ss : plan.seqs) {  // an undo point restored by this step is spent
    if (ss.restore_checkpoint != 0 && ss.restore_checkpoint == ss.seq->spec_undo)
      kv_.drop_checkpoint(std::exchange(ss.seq->spec_undo, 0));
  }
  scheduler_.on_computed(plan, n_valid);
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& ss = plan.seqs[i];
    if (!ss.need_logits) continue;
    const int64_t n_kept = std::max<int64_t>(static_cast<int64_t>(sampled[i].size()) - 1, 0);
    (ss.draft_forced ? counters_.n_forced_tokens : counters_.n_draft_tokens)
        .fetch_add(static_cast<int64_t>(ss.draft.size()));
    (ss.draft_forced ? counters_.n_accepted_forced_tokens : counters_.n_accepted_draft_tokens)
        .fetch_add(n_kept);
    const uint64_t id = ss.seq->id;
    bool ended = false;
    for (size_t k = 0; k < sampled[i].size() && !ended; ++k)  // finished: later tokens dropped
      ended = emit(id, std::move(sampled[i][k]), /*last=*/k + 1 == sampled[i].size());
    auto it = requests_.find(id);
    if (!ended && it != requests_.end() && !it->second.constraint_error.empty()) {
      finish(id, FinishReason::kError, it->second.constraint_error);
    } else if (!ended && it != requests_.end() && it->second.req.constraint) {
      ss.seq->forced_draft = it->second.req.constraint->forced_tokens(kMaxForcedDraft);
    }
  }
}

// Samples the token after the sequence's real tokens, then, while the sampled token equals the
// next draft, the token after that draft too (greedy verification: exactly the tokens decoding
// one at a time would give, the drafts only let one step compute several). Appends them all.
std::vector<SampleResult> Engine::sample_step(Sequence& seq, RequestState& st, const ForwardSeq& f,
                                              std::span<const TokenId> draft,
                                              const ForwardOutput& out, int row) {
  const GenerateRequest& req = st.req;
  std::vector<SampleResult> res;
  for (size_t j = 0; j <= draft.size(); ++j) {
    std::span<const TokenId> all(seq.tokens);
    const size_t r = static_cast<size_t>(row) + j;
    if (!out.tokens.empty() && out.tokens[r] >= 0) {  // the runner decided (argmax or draw)
      SampleResult s;
      s.token = out.tokens[r];
      if (f.n_top_logprobs >= 0) {  // and the logprobs (postprocess checked they came)
        s.logprob = out.logprob[r];
        const auto top = out.top.begin() + static_cast<ptrdiff_t>(r) * out.n_top;
        s.top_logprobs.assign(top, top + f.n_top_logprobs);
      }
      res.push_back(s);
      if (req.constraint && !req.constraint->accept(s.token)) {  // f.check allowed it
        st.constraint_error = "structured output: the runner's token does not fit the grammar";
        res.pop_back();
        break;
      }
    } else if (!out.tokens.empty() && req.constraint) {  // -1: refused by the check (or undecided)
      res.push_back(redraw_constrained(st, out.row(static_cast<int>(r)), f.sampling));
      if (!st.constraint_error.empty()) {
        res.pop_back();
        break;
      }
    } else if (!out.tokens.empty()) {  // -1: the runner's row after the edits, the same u
      const std::span<const float> row = out.row(static_cast<int>(r));
      res.push_back(SampleResult{sample_row(row, f.sampling), 0.0f, {}});
      if (f.n_top_logprobs >= 0)  // a row with logprobs and -1 has no edits: the raw row
        compute_logprobs(row, res.back().token, f.n_top_logprobs, &res.back().logprob,
                         &res.back().top_logprobs);
    } else if (req.constraint) {  // structured output: the host masks the row, then draws
      res.push_back(sample_constrained(st, out.row(static_cast<int>(r)), all.first(seq.n_prompt),
                                       all.subspan(seq.n_prompt)));
      if (!st.constraint_error.empty()) {
        res.pop_back();
        break;
      }
    } else if (f.sample_on_device) {  // u was drawn for the runner: the host uses the same one
      res.push_back(sample_token(out.row(static_cast<int>(r)), req.sampling,
                                 all.first(seq.n_prompt), all.subspan(seq.n_prompt), f.sampling.u,
                                 req.logprobs, req.n_top_logprobs));
    } else {
      res.push_back(sample_token(out.row(static_cast<int>(r)), req.sampling,
                                 all.first(seq.n_prompt), all.subspan(seq.n_prompt), st.rng,
                                 req.logprobs, req.n_top_logprobs));
    }
    seq.tokens.push_back(res.back().token);
    if (j == draft.size() || res.back().token != draft[j]) break;
    // A whole structured output ends the step: emit reads completion after the step's last token.
    if (req.constraint && req.constraint->complete()) break;
  }
  return res;
}

// A constrained request's token: the row with the tokens the constraint refuses at -inf, drawn
// as usual (-inf stays -inf through bias and penalties); logprobs stay those of the raw row.
SampleResult Engine::sample_constrained(RequestState& st, std::span<const float> raw,
                                        std::span<const TokenId> prompt,
                                        std::span<const TokenId> generated) {
  const GenerateRequest& req = st.req;
  std::vector<float> masked(raw.begin(), raw.end());
  counters_.n_constraint_masks.fetch_add(1);
  if (!req.constraint->mask(masked)) {
    st.constraint_error = "structured output: no token can continue the output";
    return {};
  }
  SampleResult r = sample_token(masked, req.sampling, prompt, generated, st.rng, false, 0);
  if (req.logprobs || req.n_top_logprobs > 0)
    compute_logprobs(raw, r.token, req.n_top_logprobs, &r.logprob, &r.top_logprobs);
  if (!req.constraint->accept(r.token))
    st.constraint_error = "structured output: the sampled token does not fit the grammar";
  return r;
}

// A constrained row whose runner-decided token the check refused (ForwardSeq::check), from the row
// after the edits (what the runner chose from). The argmax: the best tokens in turn (ties: lower
// id first), the first one the constraint allows, which is the masked row's argmax. A draw
// without cuts: fresh draws from the row until one is allowed; every draw, the runner's
// included, takes an allowed token a with p(a), so the kept one has p(a) / Z (Z: the allowed
// tokens' mass), the masked distribution, exactly. A few checks (each steps one token's bytes)
// instead of the mask, which walks the vocabulary for a grammar state its cache may not hold
// (a string with minLength is a new state at every position). After kRedrawTries refusals, or
// when no finite logit is left, the mask decides (the same distribution: the tries only
// condition on being refused).
SampleResult Engine::redraw_constrained(RequestState& st, std::span<const float> edited,
                                        RowSampling sampling) {
  TokenConstraint& c = *st.req.constraint;
  constexpr int kRedrawTries = 16;
  SampleResult r;
  r.token = -1;
  std::vector<float> row(edited.begin(), edited.end());
  if (sampling.temperature == 0.0f) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < kRedrawTries && r.token < 0; ++i) {
      const int64_t t = first_argmax(row.data(), static_cast<int64_t>(row.size()));
      if (!(row[static_cast<size_t>(t)] > kNegInf)) break;
      if (c.allows(static_cast<int32_t>(t)))
        r.token = static_cast<int32_t>(t);
      else
        row[static_cast<size_t>(t)] = kNegInf;
    }
  } else if ((sampling.top_k <= 0 || sampling.top_k >= static_cast<int32_t>(row.size())) &&
             sampling.top_p >= 1.0f && sampling.min_p <= 0.0f) {
    const std::vector<Candidate> cand =
        truncate_candidates(row, SamplingCuts{sampling.temperature, 0, 1.0f, 0.0f});
    for (int i = 0; i < kRedrawTries && r.token < 0; ++i) {
      const int32_t t = draw_candidate(cand, st.rng.uniform());
      if (c.allows(t)) r.token = t;
    }
  }
  if (r.token < 0) {
    counters_.n_constraint_masks.fetch_add(1);
    if (!c.mask(row)) {
      st.constraint_error = "structured output: no token can continue the output";
      return {};
    }
    if (sampling.temperature != 0.0f) sampling.u = st.rng.uniform();
    r.token = sample_row(row, sampling);
  }
  if (!c.accept(r.token))
    st.constraint_error = "structured output: the sampled token does not fit the grammar";
  return r;
}

// The request's token is the argmax of the raw logits (ForwardSeq::argmax_only); a constrained
// request's only where the constraint allows it (ForwardSeq::check).
bool Engine::argmax_only(uint64_t id) const {
  const GenerateRequest& req = requests_.at(id).req;
  return argmax_suffices(req.sampling, req.logprobs, req.n_top_logprobs);
}

// The request's token can be decided by the runner (bias and penalties as edits, then the draw).
// Logprobs are of the raw logits, which the runner keeps beside the edited rows; a row it left
// undecided (-1) comes back edited, so a request with logprobs and edits goes to the runner only
// with settings it always settles (ModelRunner::decides), and with logprobs and a constraint not
// at all (a refused row is drawn again on the host). A constrained request's draw is checked
// (ForwardSeq::check) and drawn again when refused, which is the masked distribution only without
// cuts (redraw_constrained): with top-k / top-p / min-p the row is masked on the host first.
bool Engine::device_samplable(uint64_t id) const {
  const GenerateRequest& req = requests_.at(id).req;
  const SamplingParams& sp = req.sampling;
  const bool cuts =
      (sp.top_k > 0 && sp.top_k < runner_.n_vocab()) || sp.top_p < 1.0f || sp.min_p > 0.0f;
  if (req.logprobs || req.n_top_logprobs > 0) {
    if (req.constraint) return false;
    if ((has_penalties(sp) || !sp.logit_bias.empty()) &&
        !runner_.decides({sp.temperature, sp.top_k, sp.top_p, sp.min_p, 0.0}))
      return false;
  }
  return sp.temperature >= 0.0f && (!req.constraint || sp.temperature == 0.0f || !cuts);
}

// The logprobs of the rows that asked for them (ForwardSeq::n_top_logprobs) came with the tokens.
bool Engine::logprobs_returned(const ForwardBatch& batch, const ForwardOutput& out) {
  int n_top = -1;
  for (const ForwardSeq& f : batch.seqs)
    if (f.need_logits && f.sample_on_device) n_top = std::max(n_top, f.n_top_logprobs);
  if (n_top < 0) return true;
  const size_t n_rows = static_cast<size_t>(out.n_rows);
  return out.n_top >= n_top && out.logprob.size() == n_rows &&
         out.top.size() == n_rows * static_cast<size_t>(out.n_top);
}

// Counts the token and sends its event; true when it finished the request (then gone). `last`:
// the step's last token, the only one after which a constraint may be complete (sample_step ends
// a step there; the constraint has taken all of the step's tokens by now).
bool Engine::emit(uint64_t id, SampleResult r, bool last) {
  RequestState& st = requests_.at(id);
  const GenerateRequest& req = st.req;
  st.usage.n_generated_tokens++;
  counters_.n_generated_tokens.fetch_add(1);
  FinishReason reason = FinishReason::kNone;
  if (std::find(req.stop_token_ids.begin(), req.stop_token_ids.end(), r.token) !=
      req.stop_token_ids.end())
    reason = FinishReason::kStop;
  else if (req.stop_hook && req.stop_hook(r.token))
    reason = FinishReason::kStop;
  else if (last && req.constraint && req.constraint->complete())
    reason = FinishReason::kStop;  // the structured output is whole: nothing may follow
  else if (st.usage.n_generated_tokens >= req.max_tokens)
    reason = FinishReason::kLength;
  if (req.on_event) {
    TokenEvent ev;
    ev.request_id = id;
    ev.token = r.token;
    ev.logprob = r.logprob;
    ev.top_logprobs = std::move(r.top_logprobs);
    ev.finish = reason;
    ev.usage = st.usage;
    req.on_event(ev);
  }
  if (reason == FinishReason::kNone) return false;
  end_sequence(id, /*keep_state=*/true);
  erase_request(id);
  return true;
}

void Engine::erase_request(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  // The step in flight may still check its row against the constraint (ForwardSeq::check,
  // applied at the runner's wait): it lives until that step is waited for.
  if (it->second.req.constraint && in_flight_has(id))
    retired_constraints_.emplace_back(id, it->second.req.constraint);
  requests_.erase(it);
}

// Ends a request without a token (cancel, error) and frees its blocks.
void Engine::finish(uint64_t id, FinishReason reason, const std::string& err) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  if (it->second.req.on_event) {
    TokenEvent ev;
    ev.request_id = id;
    ev.finish = reason;
    ev.error = err;
    ev.usage = it->second.usage;
    it->second.req.on_event(ev);
  }
  if (reason == FinishReason::kError) T9_LOG_WARN("request {} failed: {}", id, err);
  end_sequence(id, reason != FinishReason::kError);
  erase_request(id);
}

void Engine::end_sequence(uint64_t id, bool keep_state) {
  if (in_flight_has(id)) {  // a step in flight still writes its KV and state
    deferred_ends_.emplace_back(id, keep_state);
    return;
  }
  scheduler_.finish(id, keep_state);
  runner_.release_sequence(id);
}

int Engine::run_until_idle(int max_steps) {
  int n = 0;
  while (n < max_steps) {
    ++n;
    if (!step()) break;
  }
  return n;
}

void Engine::start() {
  std::lock_guard lock(mu_);
  T9_CHECK(!thread_.joinable(), "engine thread already running");
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || scheduler_.has_work(); });
      if (stop_) return;
    }
    step();
  }
}

void Engine::publish_stats(double step_ms) {
  KvStats kv = kv_.stats();
  counters_.kv_total.store(kv.n_blocks_total);
  counters_.kv_used.store(kv.n_blocks_used);
  counters_.kv_cached.store(kv.n_blocks_cached);
  counters_.kv_free.store(kv.n_blocks_free);
  counters_.n_checkpoints.store(kv.n_state_checkpoints);
  int n_incoming;
  {
    std::lock_guard lock(mu_);
    n_incoming = static_cast<int>(incoming_.size());
  }
  counters_.n_waiting.store(scheduler_.n_waiting() + n_incoming);
  counters_.n_running.store(scheduler_.n_running());
  counters_.last_step_ms.store(step_ms);
}

void Engine::reset_counters() {
  T9_CHECK(!thread_.joinable(), "reset_counters while the engine thread runs");
  for (auto* c :
       {&counters_.n_requests, &counters_.n_prompt_tokens, &counters_.n_cached_prompt_tokens,
        &counters_.n_computed_tokens, &counters_.n_generated_tokens, &counters_.n_draft_tokens,
        &counters_.n_accepted_draft_tokens, &counters_.n_forced_tokens,
        &counters_.n_accepted_forced_tokens, &counters_.n_constraint_masks,
        &counters_.n_preemptions, &counters_.n_prefix_waits, &counters_.n_steps,
        &counters_.n_pipelined_steps, &counters_.n_discarded_tokens})
    c->store(0);
  for (auto* t : {&counters_.last_step_ms, &counters_.total_step_ms, &counters_.total_schedule_ms,
                  &counters_.total_model_ms, &counters_.total_postprocess_ms})
    t->store(0);
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.n_requests = counters_.n_requests.load();
  s.n_prompt_tokens = counters_.n_prompt_tokens.load();
  s.n_cached_prompt_tokens = counters_.n_cached_prompt_tokens.load();
  s.n_computed_tokens = counters_.n_computed_tokens.load();
  s.n_generated_tokens = counters_.n_generated_tokens.load();
  s.n_draft_tokens = counters_.n_draft_tokens.load();
  s.n_accepted_draft_tokens = counters_.n_accepted_draft_tokens.load();
  s.n_forced_tokens = counters_.n_forced_tokens.load();
  s.n_accepted_forced_tokens = counters_.n_accepted_forced_tokens.load();
  s.n_constraint_masks = counters_.n_constraint_masks.load();
  s.n_preemptions = counters_.n_preemptions.load();
  s.n_prefix_waits = counters_.n_prefix_waits.load();
  s.n_steps = counters_.n_steps.load();
  s.n_pipelined_steps = counters_.n_pipelined_steps.load();
  s.n_discarded_tokens = counters_.n_discarded_tokens.load();
  s.kv_blocks_total = counters_.kv_total.load();
  s.kv_blocks_used = counters_.kv_used.load();
  s.kv_blocks_cached = counters_.kv_cached.load();
  s.kv_blocks_free = counters_.kv_free.load();
  s.n_state_checkpoints = counters_.n_checkpoints.load();
  s.n_waiting = counters_.n_waiting.load();
  s.n_running = counters_.n_running.load();
  s.last_step_ms = counters_.last_step_ms.load();
  s.total_step_ms = counters_.total_step_ms.load();
  s.total_schedule_ms = counters_.total_schedule_ms.load();
  s.total_model_ms = counters_.total_model_ms.load();
  s.total_postprocess_ms = counters_.total_postprocess_ms.load();
  return s;
}

Status Engine::check_integrity() const {
  return scheduler_.check_integrity();
}

}  // namespace t9::engine
