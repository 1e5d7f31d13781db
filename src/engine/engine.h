// Engine: the step loop. One engine thread owns the scheduler, the KV bookkeeping, the sampler
// state and the model runner; each step is
//     plan = schedule();  out = runner.run(batch(plan));  postprocess(plan, batch, out);
// Pipelined (EngineConfig::pipeline), a decode step whose tokens the runner decides itself is
// enqueued instead, and while it computes the next one is planned and enqueued with "the token
// this step samples" as its input (Scheduler::schedule_lookahead); then the first is waited for
// and postprocessed. A sequence that ended meanwhile (a stop token, a cancel) has its row in the
// step ahead discarded: its KV and state past its end are never committed or published, and the
// sequence is ended once no step in flight names it.
// HTTP threads only call submit() (thread-safe queue), set a request's cancel flag, and read
// stats(); they receive TokenEvents through the request's on_event callback (see TokenChannel).
//
// Two ways to drive it: start() runs the loop on its own thread; or, with no thread, the caller
// calls step() (tests, `tempo9 run`).
#pragma once

#include <functional>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/result.h"
#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace t9::engine {

// Pipelined decode steps (see Engine). kAuto: when the runner overlaps_steps().
enum class StepPipeline { kAuto, kOff, kOn };

struct EngineConfig {
  SchedulerConfig scheduler;
  StepPipeline pipeline = StepPipeline::kAuto;
  KvCacheConfig kv;
  int max_context_tokens = 4096;  // the model's context: bounds prompt + max_tokens
  // Recurrent models: memory for cached state checkpoints (sets kv.max_state_checkpoints from
  // the runner's state_checkpoint_bytes(); 0 keeps kv.max_state_checkpoints as given). An agent's
  // next turn hits the cache only where a checkpoint sits, and every conversation needs its own
  // (the end of its last prompt) besides the shared prefix's: `tempo9 serve --state-memory`.
  int64_t state_checkpoint_budget_bytes = int64_t{1} << 30;
  // Called on the engine thread after every step with its duration (metrics histograms); must be
  // quick and must not block.
  std::function<void(double step_ms)> on_step;
#ifdef TEMPO9_DEBUG_CHECKS
  bool check_every_step = true;  // check_integrity() after every step; abort on failure
#else
  bool check_every_step = false;
#endif
};

// `config` as the engine runs it with `runner`: kv.recurrent_checkpoints from the runner, and
// kv.max_state_checkpoints from the checkpoint budget (see EngineConfig).
EngineConfig adapted_to(EngineConfig config, const ModelRunner& runner);

// A snapshot for /metrics. Token counters are totals since start.
struct EngineStats {
  int64_t n_requests = 0;
  int64_t n_prompt_tokens = 0;         // submitted prompt tokens
  int64_t n_cached_prompt_tokens = 0;  // of those, served from the prefix cache
  int64_t n_computed_tokens = 0;       // tokens run through the model (recomputes included)
  int64_t n_generated_tokens = 0;
  int64_t n_draft_tokens = 0;            // speculative drafts computed
  int64_t n_accepted_draft_tokens = 0;   // of those, kept (equal to what decoding gives)
  int64_t n_forced_tokens = 0;           // a constraint's forced tokens proposed as drafts
  int64_t n_accepted_forced_tokens = 0;  // of those, kept
  // Constrained tokens whose row the host masked (the vocabulary against the grammar state): rows
  // that came back (logprobs, cuts, drafts), and refused ones the cheap retries did not settle.
  // Tokens the runner decided and the constraint allowed are not masked at all.
  int64_t n_constraint_masks = 0;
  int64_t n_preemptions = 0;
  // Steps a waiting request spent waiting for a running one's shared prompt prefix (summed over
  // requests) instead of computing it again (Scheduler::defer_for_shared_prefix).
  int64_t n_prefix_waits = 0;
  int64_t n_steps = 0;
  // Pipelined steps: planned and enqueued while the step before them computed; and tokens a step
  // in flight computed for sequences that ended before it returned (discarded).
  int64_t n_pipelined_steps = 0;
  int64_t n_discarded_tokens = 0;
  int kv_blocks_total = 0;  // backed by storage
  int kv_blocks_used = 0;
  int kv_blocks_cached = 0;     // unused but findable by the prefix cache
  int kv_blocks_free = 0;       // unused (cached included) + not yet grown
  int n_state_checkpoints = 0;  // cached recurrent-state checkpoints (hybrid models)
  int n_waiting = 0;            // queue depth, incl. submitted but not yet taken in
  int n_running = 0;
  double last_step_ms = 0;
  // Cumulative wall time of step() and its parts, for the scheduler-overhead figure
  // (schedule + postprocess vs step): schedule = intake, schedule(), plan bookkeeping and batch
  // building; model = ModelRunner::run; postprocess = KV commit, sampling and events. The step
  // total also holds the optional integrity check.
  double total_step_ms = 0;
  double total_schedule_ms = 0;
  double total_model_ms = 0;
  double total_postprocess_ms = 0;
};

class Engine {
 public:
  Engine(const EngineConfig& config, ModelRunner& runner);
  const EngineConfig& config() const { return config_; }  // immutable after construction
  ~Engine();  // stops the thread; unfinished requests get a kError event
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Validates (errors name the field) and queues the request; returns its id.
  Result<uint64_t> submit(GenerateRequest req);

  // Synchronous driving (no thread started): runs one step; true while work remains.
  bool step();
  // Steps until no request is left (or max_steps); returns the number of steps.
  int run_until_idle(int max_steps = 1 << 30);

  // Runs the step loop on an engine thread until stop().
  void start();
  void stop();

  EngineStats stats() const;  // thread-safe
  // Zeroes the cumulative counters (requests, tokens, steps, busy times; not the KV and queue
  // gauges): `serve`'s start-up warm-up leaves no trace in /metrics. Before start() only.
  void reset_counters();
  // Engine thread (or synchronous caller) only.
  Status check_integrity() const;
  const KvCacheManager& kv() const { return kv_; }

 private:
  // Tokens a constraint may force into one step's draft (TokenConstraint::forced_tokens).
  static constexpr int kMaxForcedDraft = 8;

  struct RequestState {
    GenerateRequest req;
    Rng rng{0};
    Usage usage;
    bool admitted = false;
    // The prompt's distinct tokens (distinct_tokens), kept for the repetition penalty's edits.
    std::vector<TokenId> prompt_distinct;
    bool has_prompt_distinct = false;
    std::string constraint_error;  // the constraint refused the row or the token: the request fails
  };
  struct Counters {
    std::atomic<int64_t> n_requests{0}, n_prompt_tokens{0}, n_cached_prompt_tokens{0},
        n_computed_tokens{0}, n_generated_tokens{0}, n_draft_tokens{0}, n_accepted_draft_tokens{0},
        n_forced_tokens{0}, n_accepted_forced_tokens{0}, n_constraint_masks{0}, n_preemptions{0},
        n_prefix_waits{0}, n_steps{0}, n_pipelined_steps{0}, n_discarded_tokens{0};
    std::atomic<int> kv_total{0}, kv_used{0}, kv_cached{0}, kv_free{0}, n_checkpoints{0},
        n_waiting{0}, n_running{0};
    std::atomic<double> last_step_ms{0};
    std::atomic<double> total_step_ms{0}, total_schedule_ms{0}, total_model_ms{0},
        total_postprocess_ms{0};
  };

  // A step enqueued on the runner and not yet waited for.
  struct InFlight {
    StepPlan plan;
    ForwardBatch batch;
  };

  void intake();
  void note_plan(const StepPlan& plan);
  ForwardBatch make_batch(const StepPlan& plan);
  bool pipelinable(const StepPlan& plan, const ForwardBatch& batch) const;
  // Plans and enqueues the step after `cur` (in flight); nullopt when the next step must be
  // scheduled normally.
  std::optional<InFlight> enqueue_lookahead(const InFlight& cur);
  // Removes the entries of sequences that ended while the step computed (and their output rows).
  void drop_ended_rows(StepPlan& plan, ForwardBatch& batch, Result<ForwardOutput>& out);
  bool in_flight_has(uint64_t seq_id) const;
  void note_stale_lookahead(const InFlight& cur, const Result<ForwardOutput>& out);
  void erase_request(uint64_t id);  // (keeps a constraint the step in flight still checks)
  void end_deferred();  // ends the deferred sequences that no step in flight names any more
  void postprocess(const StepPlan& plan, const ForwardBatch& batch, Result<ForwardOutput>& out);
  std::vector<SampleResult> sample_step(Sequence& seq, RequestState& st, const ForwardSeq& f,
                                        std::span<const TokenId> draft, const ForwardOutput& out,
                                        int row);
  SampleResult sample_constrained(RequestState& st, std::span<const float> raw,
                                  std::span<const TokenId> prompt,
                                  std::span<const TokenId> generated);
  SampleResult redraw_constrained(RequestState& st, std::span<const float> edited,
                                  RowSampling sampling);
  bool argmax_only(uint64_t id) const;  // ForwardSeq::argmax_only for this request
  // ForwardSeq::sample_on_device for this request's step without drafts.
  bool device_samplable(uint64_t id) const;
  static bool logprobs_returned(const ForwardBatch& batch, const ForwardOutput& out);
  bool emit(uint64_t id, SampleResult r, bool last);
  void finish(uint64_t id, FinishReason reason, const std::string& err = {});
  // Frees the sequence's blocks and model state (keep_state: its checkpoint may be published).
  void end_sequence(uint64_t id, bool keep_state);
  void publish_stats(double step_ms);
  void loop();

  EngineConfig config_;
  ModelRunner& runner_;
  KvCacheManager kv_;
  Scheduler scheduler_;
  std::unordered_map<uint64_t, RequestState> requests_;  // engine thread only
  bool pipeline_ = false;                                // EngineConfig::pipeline resolved
  std::optional<InFlight> in_flight_;
  // Sequences whose row in the step in flight read a token the runner's check refused.
  std::unordered_set<uint64_t> stale_;
  // Constraints of requests that ended while a step in flight still checks their row.
  std::vector<std::pair<uint64_t, std::shared_ptr<TokenConstraint>>> retired_constraints_;
  // Sequences whose request ended while a step in flight has a row for them, with end_sequence's
  // keep_state: their blocks and state stay until that step is back.
  std::vector<std::pair<uint64_t, bool>> deferred_ends_;

  mutable std::mutex mu_;  // guards incoming_ and stop_
  std::condition_variable cv_;
  std::vector<std::pair<uint64_t, GenerateRequest>> incoming_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<uint64_t> next_id_{1};
  Counters counters_;
};

}  // namespace t9::engine
