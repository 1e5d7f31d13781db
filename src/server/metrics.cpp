#include "server/metrics.h"

#include <fmt/format.h>

namespace t9::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  std::lock_guard lock(mu_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_,
                     name, n_);
}

namespace {
std::vector<double> latency_bounds_s() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}
}  // namespace

Metrics::Metrics()
    : ttft_s_(latency_bounds_s()),
      e2e_s_(latency_bounds_s()),
      step_ms_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::observe_request(const engine::Usage&, double ttft_ms, double e2e_ms,
                              const std::string& finish) {
  ttft_s_.observe(ttft_ms / 1000.0);
  e2e_s_.observe(e2e_ms / 1000.0);
  std::lock_guard lock(mu_);
  ++finished_by_reason_[finish];
}

void Metrics::count_http_error(int status) {
  std::lock_guard lock(mu_);
  ++http_errors_[status];
}

std::string Metrics::render(const engine::EngineStats& s) const {
  std::string out;
  auto counter = [&](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("tempo9_requests_total", "Requests submitted to the engine.", s.n_requests);
  counter("tempo9_prompt_tokens_total", "Prompt tokens submitted.", s.n_prompt_tokens);
  counter("tempo9_cached_prompt_tokens_total", "Prompt tokens served from the prefix cache.",
          s.n_cached_prompt_tokens);
  counter("tempo9_computed_tokens_total", "Tokens run through the model.", s.n_computed_tokens);
  counter("tempo9_generated_tokens_total", "Tokens generated.", s.n_generated_tokens);
  counter("tempo9_draft_tokens_total", "Speculative draft tokens computed.", s.n_draft_tokens);
  counter("tempo9_accepted_draft_tokens_total", "Speculative draft tokens kept.",
          s.n_accepted_draft_tokens);
  counter("tempo9_forced_tokens_total",
          "Tokens a structured output's grammar forced, proposed as drafts.", s.n_forced_tokens);
  counter("tempo9_accepted_forced_tokens_total", "Forced tokens the model's choice confirmed.",
          s.n_accepted_forced_tokens);
  counter("tempo9_constraint_masks_total",
          "Structured-output tokens whose row was masked on the host (the others: the model's "
          "own choice, checked).",
          s.n_constraint_masks);
  counter("tempo9_preemptions_total", "Sequences preempted for KV space.", s.n_preemptions);
  counter("tempo9_prefix_waits_total",
          "Steps requests waited for a running request's shared prompt prefix instead of "
          "computing it.",
          s.n_prefix_waits);
  counter("tempo9_engine_steps_total", "Engine steps run.", s.n_steps);
  counter("tempo9_pipelined_steps_total",
          "Decode steps planned and enqueued while the step before them computed.",
          s.n_pipelined_steps);
  counter("tempo9_discarded_tokens_total",
          "Tokens computed in steps in flight for requests that ended before the step returned.",
          s.n_discarded_tokens);
  gauge("tempo9_kv_blocks_total", "KV blocks backed by storage.", s.kv_blocks_total);
  gauge("tempo9_kv_blocks_used", "KV blocks held by sequences.", s.kv_blocks_used);
  gauge("tempo9_kv_blocks_cached", "Unused KV blocks kept for the prefix cache.",
        s.kv_blocks_cached);
  gauge("tempo9_state_checkpoints",
        "Recurrent-state checkpoints kept for the prefix cache (hybrid models).",
        s.n_state_checkpoints);
  gauge("tempo9_kv_blocks_free", "KV blocks free (cached included) or not yet grown.",
        s.kv_blocks_free);
  gauge("tempo9_queue_depth", "Requests waiting for the engine.", s.n_waiting);
  gauge("tempo9_running_sequences", "Sequences running.", s.n_running);
  gauge("tempo9_last_step_seconds", "Duration of the last engine step.", s.last_step_ms / 1000.0);
  out +=
      "# HELP tempo9_engine_time_seconds_total Engine step time by part (schedule, model, "
      "postprocess; overhead = schedule + postprocess).\n# TYPE tempo9_engine_time_seconds_total "
      "counter\n";
  out += fmt::format("tempo9_engine_time_seconds_total{{part=\"schedule\"}} {}\n",
                     s.total_schedule_ms / 1000.0);
  out += fmt::format("tempo9_engine_time_seconds_total{{part=\"model\"}} {}\n",
                     s.total_model_ms / 1000.0);
  out += fmt::format("tempo9_engine_time_seconds_total{{part=\"postprocess\"}} {}\n",
                     s.total_postprocess_ms / 1000.0);
  out += fmt::format("tempo9_engine_time_seconds_total{{part=\"step\"}} {}\n",
                     s.total_step_ms / 1000.0);
  ttft_s_.render("tempo9_time_to_first_token_seconds", "Time to first token.", out);
  e2e_s_.render("tempo9_request_duration_seconds", "Request duration, end to end.", out);
  step_ms_.render("tempo9_engine_step_seconds", "Engine step duration.", out);
  std::lock_guard lock(mu_);
  out +=
      "# HELP tempo9_requests_finished_total Requests finished, by reason.\n"
      "# TYPE tempo9_requests_finished_total counter\n";
  for (const auto& [r, n] : finished_by_reason_)
    out += fmt::format("tempo9_requests_finished_total{{reason=\"{}\"}} {}\n", r, n);
  out +=
      "# HELP tempo9_http_errors_total HTTP error responses, by status.\n"
      "# TYPE tempo9_http_errors_total counter\n";
  for (const auto& [st, n] : http_errors_)
    out += fmt::format("tempo9_http_errors_total{{status=\"{}\"}} {}\n", st, n);
  return out;
}

}  // namespace t9::server
