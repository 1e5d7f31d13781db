// `tempo9 bench` results: per-target summaries (percentiles per turn index, throughput, cache
// share), the printed table (Markdown, one column per target and an A/B ratio column when two
// targets ran), and the JSON report with every request.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "apps/bench_runner.h"

namespace t9::apps::bench {

struct Percentiles {
  int n = 0;  // samples; 0: the values are meaningless
  double p50 = 0, p90 = 0, p99 = 0;
};

// Linear interpolation between closest ranks (numpy's default), over a copy of `v`.
Percentiles percentiles(std::vector<double> v);

struct TurnStats {
  int turn = 0;  // 1-based
  int n_requests = 0;
  double mean_prompt_tokens = 0;
  double cached_share = 0;  // cached prompt tokens / prompt tokens
  Percentiles ttft_ms, e2e_ms;
};

// Token totals and latencies count successful requests only; errors are counted apart.
struct Summary {
  std::string label, url;
  int n_requests = 0, n_errors = 0;
  double busy_s = 0;  // wall time of this target's phases (the throughput denominator)
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0, approx_tokens_sent = 0;
  double effective_tok_s = 0;    // (prompt + completion tokens) / busy_s
  double generated_tok_s = 0;    // completion tokens / busy_s
  double cached_share = 0;       // cached / prompt tokens
  double tokens_per_approx = 0;  // prompt tokens / approx tokens sent (template included)
  Percentiles ttft_ms, e2e_ms, itl_ms;
  std::vector<TurnStats> turns;
};

Summary summarize(const TargetRun& run, int n_turns);

nlohmann::json to_json(const Summary& s);

// Markdown table: metric rows, one value column per summary, and "A/B" when there are two.
std::string format_table(const WorkloadSpec& spec, const std::vector<Summary>& sums);

// The whole run: workload, limits, per-target summary and requests, the ratios when comparing.
nlohmann::json report_json(const WorkloadSpec& spec, const RunLimits& limits, const RunResult& run,
                           const std::vector<Summary>& sums);

}  // namespace t9::apps::bench
