// `tempo9 bench` driver: runs a workload's rounds against one or two targets. In each round every
// target gets the whole round in turn (A, then B), with the same seeds, so the two servers see the
// same requests under the same concurrency while never competing for the CPU.
#pragma once

#include <string>
#include <vector>

#include "apps/bench_client.h"
#include "apps/bench_workload.h"

namespace t9::apps::bench {

// The bench stops by itself: no request starts after either limit is reached, and a stream still
// running at the deadline is cut (and recorded as an error).
struct RunLimits {
  int max_requests = 10000;   // over all targets and rounds
  double max_seconds = 1800;  // wall time of the whole run
};

struct Phase {
  int round = 0;
  double start_ms = 0, end_ms = 0;  // since the run started
};

struct TargetRun {
  Target target;
  std::vector<RequestRecord> records;  // sorted by (round, agent, turn)
  std::vector<Phase> phases;           // one per round this target ran
  double busy_s() const;               // sum of its phases' wall times
};

struct RunResult {
  std::vector<TargetRun> targets;
  double wall_s = 0;
  std::string stop_reason;  // empty: the workload ran to the end
};

// Runs `spec` (validated) against `targets` (one or two). Progress lines go to stderr.
RunResult run_workload(const WorkloadSpec& spec, const std::vector<Target>& targets,
                       const RunLimits& limits);

}  // namespace t9::apps::bench
