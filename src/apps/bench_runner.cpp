#include "apps/bench_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

namespace t9::apps::bench {
namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Shared by the agent threads of a run: the limits and the reason the run stopped.
struct Gate {
  Gate(const RunLimits& l, Clock::time_point d) : limits(l), deadline(d) {}
  const RunLimits& limits;
  Clock::time_point deadline;
  std::atomic<int> n_started{0};
  std::mutex mu;
  std::string stop_reason;

  bool try_start() {
    if (Clock::now() >= deadline)
      return stop(fmt::format("--max-seconds {} reached", limits.max_seconds));
    if (n_started.fetch_add(1) >= limits.max_requests)
      return stop(fmt::format("--max-requests {} reached", limits.max_requests));
    return true;
  }
  bool stopped() {
    std::lock_guard<std::mutex> lock(mu);
    return !stop_reason.empty();
  }
  bool stop(std::string why) {
    std::lock_guard<std::mutex> lock(mu);
    if (stop_reason.empty()) stop_reason = std::move(why);
    return false;
  }
};

// One agent's turns in one round. An error ends the agent's round: the next turn would re-send a
// history without the reply it failed to get.
void run_agent(const WorkloadSpec& spec, const Target& target, int round, int agent,
               Clock::time_point t0, Gate& gate, std::vector<RequestRecord>& out) {
  StreamClient client(target);
  AgentConversation conv(spec, round, agent);
  for (int turn = 1; turn <= spec.n_turns; ++turn) {
    if (!gate.try_start()) return;
    const std::string salt =
        spec.salt_per_request ? fmt::format("Request {}.{}.{}.{}.", spec.run_id, round, agent, turn)
                              : "";
    const nlohmann::json body = conv.request(turn, target.model, salt);
    RequestRecord r;
    r.target = target.label;
    r.round = round;
    r.agent = agent;
    r.turn = turn;
    r.approx_tokens_sent = conv.last_approx_tokens();
    client.chat(body, t0, gate.deadline, r);
    const bool ok = r.ok();
    if (ok) conv.add_reply(r.reply);
    out.push_back(std::move(r));
    if (!ok) return;
  }
}

void run_phase(const WorkloadSpec& spec, TargetRun& tr, int round, Clock::time_point t0,
               Gate& gate) {
  Phase ph;
  ph.round = round;
  ph.start_ms = ms_since(t0);
  std::vector<std::vector<RequestRecord>> per_agent(static_cast<size_t>(spec.n_agents));
  std::vector<std::thread> threads;
  for (int a = 0; a < spec.n_agents; ++a)
    threads.emplace_back(run_agent, std::cref(spec), std::cref(tr.target), round, a, t0,
                         std::ref(gate), std::ref(per_agent[static_cast<size_t>(a)]));
  for (auto& t : threads) t.join();
  ph.end_ms = ms_since(t0);
  tr.phases.push_back(ph);
  int n = 0, n_err = 0;
  for (auto& recs : per_agent)
    for (auto& r : recs) {
      ++n;
      n_err += r.ok() ? 0 : 1;
      if (!r.ok() && n_err == 1)
        std::fprintf(stderr, "bench: %s: %s\n", tr.target.label.c_str(), r.error.c_str());
      tr.records.push_back(std::move(r));
    }
  std::fprintf(stderr, "bench: round %d on %s (%s): %d requests, %d errors, %.1f s\n", round + 1,
               tr.target.label.c_str(), tr.target.url.c_str(), n, n_err,
               (ph.end_ms - ph.start_ms) / 1000);
}

}  // namespace

double TargetRun::busy_s() const {
  double s = 0;
  for (const auto& p : phases) s += (p.end_ms - p.start_ms) / 1000;
  return s;
}

RunResult run_workload(const WorkloadSpec& spec, const std::vector<Target>& targets,
                       const RunLimits& limits) {
  const auto t0 = Clock::now();
  Gate gate{limits,
            t0 + std::chrono::milliseconds(static_cast<int64_t>(limits.max_seconds * 1000))};
  RunResult res;
  for (const auto& t : targets) res.targets.push_back({t, {}, {}});
  for (int round = 0; round < spec.n_rounds && !gate.stopped(); ++round)
    for (auto& tr : res.targets) {
      if (gate.stopped()) break;
      run_phase(spec, tr, round, t0, gate);
    }
  for (auto& tr : res.targets)
    std::sort(tr.records.begin(), tr.records.end(),
              [](const RequestRecord& a, const RequestRecord& b) {
                return std::tie(a.round, a.agent, a.turn) < std::tie(b.round, b.agent, b.turn);
              });
  res.wall_s = ms_since(t0) / 1000;
  res.stop_reason = gate.stop_reason;
  return res;
}

}  // namespace t9::apps::bench
