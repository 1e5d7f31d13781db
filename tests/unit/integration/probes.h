// Measurement modes of the test_integration binary (its main() picks them by the first
// argument; without one it runs the GoogleTest tests):
//
//   test_integration --rss-probe CTX
//       Loads SmolLM2 and an Engine configured for a CTX-token context (max_blocks covering CTX,
//       as `tempo9 run` does), prints VmRSS after load and after one short request. The memory
//       test runs it for 4096 and 131072 in fresh processes (RSS is per process).
//   test_integration --engine-bench [GEN]
//       In-process engine benchmark (bench/engine_bench.py runs it): greedy throughput at 1, 4
//       and 8 concurrent sequences (GEN tokens each, default 64) and the scheduler overhead
//       (schedule + postprocess time over step time, from EngineStats).
//
// Both print `key=value` lines (one record per line) on stdout and return a process exit code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace t9::integration {

int rss_probe_main(int ctx_tokens);
int engine_bench_main(int n_gen);

// Parses a `key=value key=value` line (values without spaces); empty when `line` does not start
// with `tag`.
std::optional<std::map<std::string, std::string>> parse_record(const std::string& line,
                                                               const std::string& tag);

}  // namespace t9::integration
