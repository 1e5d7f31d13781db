// Prometheus metrics: engine counters (read from Engine::stats(), a thread-safe snapshot) plus
// per-request histograms observed by the HTTP threads (TTFT, end-to-end latency) and the engine's
// step time. Rendered in the text exposition format for GET /metrics.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace t9::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends `name_bucket{le=...}`, `name_sum`, `name_count` lines.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [bounds.size() + 1], last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

class Metrics {
 public:
  Metrics();
  void observe_request(const engine::Usage& usage, double ttft_ms, double e2e_ms,
                       const std::string& finish);
  void observe_step(double step_ms) { step_ms_.observe(step_ms / 1000.0); }
  void count_http_error(int status);
  std::string render(const engine::EngineStats& s) const;

 private:
  Histogram ttft_s_, e2e_s_, step_ms_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_by_reason_;
  std::map<int, uint64_t> http_errors_;
};

}  // namespace t9::server
