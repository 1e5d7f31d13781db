#include "apps/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace t9::apps::bench {
namespace {

using Json = nlohmann::json;

double share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / whole : 0;
}

Json to_json(const Percentiles& p) {
  return {{"n", p.n}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

struct Row {
  std::string name;
  std::function<double(const Summary&)> get;
  int decimals;
};

std::vector<Row> table_rows(int n_turns) {
  std::vector<Row> rows;
  auto turn = [](const Summary& s, int t) -> const TurnStats* {
    return t <= static_cast<int>(s.turns.size()) ? &s.turns[static_cast<size_t>(t - 1)] : nullptr;
  };
  for (int t = 1; t <= n_turns; ++t) {
    auto field = [turn, t](double (*f)(const TurnStats&)) {
      return [turn, t, f](const Summary& s) {
        // A turn no request finished has no value (NaN prints as "-"), not a zero latency.
        const TurnStats* ts = turn(s, t);
        return ts && ts->n_requests > 0 ? f(*ts) : std::nan("");
      };
    };
    rows.push_back({fmt::format("turn {} prompt tokens (mean)", t),
                    field([](const TurnStats& x) { return x.mean_prompt_tokens; }), 0});
    rows.push_back({fmt::format("turn {} cached share", t),
                    field([](const TurnStats& x) { return x.cached_share; }), 3});
    rows.push_back({fmt::format("turn {} TTFT p50 ms", t),
                    field([](const TurnStats& x) { return x.ttft_ms.p50; }), 1});
    rows.push_back({fmt::format("turn {} TTFT p90 ms", t),
                    field([](const TurnStats& x) { return x.ttft_ms.p90; }), 1});
    rows.push_back({fmt::format("turn {} TTFT p99 ms", t),
                    field([](const TurnStats& x) { return x.ttft_ms.p99; }), 1});
  }
  rows.push_back({"TTFT p50 ms (all turns)", [](const Summary& s) { return s.ttft_ms.p50; }, 1});
  rows.push_back({"E2E p50 ms", [](const Summary& s) { return s.e2e_ms.p50; }, 1});
  rows.push_back({"E2E p90 ms", [](const Summary& s) { return s.e2e_ms.p90; }, 1});
  rows.push_back({"ITL p50 ms", [](const Summary& s) { return s.itl_ms.p50; }, 1});
  rows.push_back({"ITL p90 ms", [](const Summary& s) { return s.itl_ms.p90; }, 1});
  rows.push_back({"requests", [](const Summary& s) { return double(s.n_requests); }, 0});
  rows.push_back({"errors", [](const Summary& s) { return double(s.n_errors); }, 0});
  rows.push_back({"prompt tokens", [](const Summary& s) { return double(s.prompt_tokens); }, 0});
  rows.push_back(
      {"cached prompt tokens", [](const Summary& s) { return double(s.cached_tokens); }, 0});
  rows.push_back(
      {"completion tokens", [](const Summary& s) { return double(s.completion_tokens); }, 0});
  rows.push_back({"cached-token share", [](const Summary& s) { return s.cached_share; }, 3});
  rows.push_back({"prompt tokens / approx tokens sent",
                  [](const Summary& s) { return s.tokens_per_approx; }, 3});
  rows.push_back({"wall s", [](const Summary& s) { return s.busy_s; }, 1});
  rows.push_back(
      {"effective tok/s (in+out)", [](const Summary& s) { return s.effective_tok_s; }, 1});
  rows.push_back({"generated tok/s", [](const Summary& s) { return s.generated_tok_s; }, 2});
  return rows;
}

std::string value_text(double v, int decimals) {
  return std::isnan(v) ? std::string("-") : fmt::format("{:.{}f}", v, decimals);
}

std::string ratio_text(double a, double b) {
  if (b == 0 || !std::isfinite(a / b)) return "-";
  return fmt::format("{:.2f}", a / b);
}

TurnStats turn_stats(const TargetRun& run, int turn) {
  TurnStats ts;
  ts.turn = turn;
  std::vector<double> ttft, e2e;
  int64_t prompt = 0, cached = 0;
  for (const auto& r : run.records) {
    if (r.turn != turn || !r.ok()) continue;
    ++ts.n_requests;
    prompt += r.prompt_tokens;
    cached += r.cached_tokens;
    if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
  }
  ts.mean_prompt_tokens = ts.n_requests ? static_cast<double>(prompt) / ts.n_requests : 0;
  ts.cached_share = share(cached, prompt);
  ts.ttft_ms = percentiles(std::move(ttft));
  ts.e2e_ms = percentiles(std::move(e2e));
  return ts;
}

}  // namespace

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = static_cast<int>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  return p;
}

Summary summarize(const TargetRun& run, int n_turns) {
  Summary s;
  s.label = run.target.label;
  s.url = run.target.url;
  s.busy_s = run.busy_s();
  std::vector<double> ttft, e2e, itl;
  for (const auto& r : run.records) {
    ++s.n_requests;
    if (!r.ok()) {
      ++s.n_errors;
      continue;
    }
    s.prompt_tokens += r.prompt_tokens;
    s.cached_tokens += r.cached_tokens;
    s.completion_tokens += r.completion_tokens;
    s.approx_tokens_sent += r.approx_tokens_sent;
    if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
    for (double d : r.itl_ms()) itl.push_back(d);
  }
  s.ttft_ms = percentiles(std::move(ttft));
  s.e2e_ms = percentiles(std::move(e2e));
  s.itl_ms = percentiles(std::move(itl));
  if (s.busy_s > 0) {
    s.effective_tok_s = static_cast<double>(s.prompt_tokens + s.completion_tokens) / s.busy_s;
    s.generated_tok_s = static_cast<double>(s.completion_tokens) / s.busy_s;
  }
  s.cached_share = share(s.cached_tokens, s.prompt_tokens);
  s.tokens_per_approx = share(s.prompt_tokens, s.approx_tokens_sent);
  for (int t = 1; t <= n_turns; ++t) s.turns.push_back(turn_stats(run, t));
  return s;
}

Json to_json(const Summary& s) {
  Json turns = Json::array();
  for (const auto& t : s.turns)
    turns.push_back({{"turn", t.turn},
                     {"n_requests", t.n_requests},
                     {"mean_prompt_tokens", t.mean_prompt_tokens},
                     {"cached_share", t.cached_share},
                     {"ttft_ms", to_json(t.ttft_ms)},
                     {"e2e_ms", to_json(t.e2e_ms)}});
  return {{"label", s.label},
          {"url", s.url},
          {"n_requests", s.n_requests},
          {"n_errors", s.n_errors},
          {"wall_s", s.busy_s},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"completion_tokens", s.completion_tokens},
          {"approx_tokens_sent", s.approx_tokens_sent},
          {"effective_tok_s", s.effective_tok_s},
          {"generated_tok_s", s.generated_tok_s},
          {"cached_share", s.cached_share},
          {"tokens_per_approx", s.tokens_per_approx},
          {"ttft_ms", to_json(s.ttft_ms)},
          {"e2e_ms", to_json(s.e2e_ms)},
          {"itl_ms", to_json(s.itl_ms)},
          {"per_turn", turns}};
}

std::string format_table(const WorkloadSpec& spec, const std::vector<Summary>& sums) {
  std::string out =
      fmt::format("workload {}: agents={} turns={} system~{} turn~{} gen={} rounds={} seed={}\n",
                  spec.name, spec.n_agents, spec.n_turns, spec.system_tokens, spec.turn_tokens,
                  spec.gen_tokens, spec.n_rounds, spec.seed);
  for (const auto& s : sums) out += fmt::format("  {} = {}\n", s.label, s.url);
  out += "\n| metric |";
  for (const auto& s : sums) out += fmt::format(" {} |", s.label);
  if (sums.size() == 2) out += " A/B |";
  out += "\n|---|";
  for (size_t i = 0; i < sums.size() + (sums.size() == 2 ? 1 : 0); ++i) out += "---:|";
  out += "\n";
  for (const Row& row : table_rows(spec.n_turns)) {
    out += fmt::format("| {} |", row.name);
    for (const auto& s : sums) out += fmt::format(" {} |", value_text(row.get(s), row.decimals));
    if (sums.size() == 2)
      out += fmt::format(" {} |", ratio_text(row.get(sums[0]), row.get(sums[1])));
    out += "\n";
  }
  return out;
}

Json report_json(const WorkloadSpec& spec, const RunLimits& limits, const RunResult& run,
                 const std::vector<Summary>& sums) {
  Json targets = Json::array();
  for (size_t i = 0; i < run.targets.size(); ++i) {
    Json t = to_json(sums[i]);
    t["model"] = run.targets[i].target.model;
    Json phases = Json::array();
    for (const auto& p : run.targets[i].phases)
      phases.push_back({{"round", p.round}, {"start_ms", p.start_ms}, {"end_ms", p.end_ms}});
    t["phases"] = phases;
    Json reqs = Json::array();
    for (const auto& r : run.targets[i].records) reqs.push_back(to_json(r));
    t["requests"] = reqs;
    targets.push_back(std::move(t));
  }
  Json j = {
      {"tool", "tempo9 bench"},
      {"workload", to_json(spec)},
      {"limits", {{"max_requests", limits.max_requests}, {"max_seconds", limits.max_seconds}}},
      {"wall_s", run.wall_s},
      {"stop_reason", run.stop_reason.empty() ? Json() : Json(run.stop_reason)},
      {"targets", targets}};
  if (sums.size() == 2) {
    Json ratio = Json::object();
    for (const Row& row : table_rows(spec.n_turns)) {
      const double r = row.get(sums[0]) / row.get(sums[1]);
      ratio[row.name] = std::isfinite(r) ? Json(r) : Json();
    }
    j["ratio_a_over_b"] = ratio;
  }
  return j;
}

}  // namespace t9::apps::bench
