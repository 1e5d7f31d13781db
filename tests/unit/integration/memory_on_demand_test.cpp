// KV is taken on demand (ARCHITECTURE.md rule 4): declaring a 131072-token context costs no
// more memory than a 4096-token one until tokens arrive. Each context is measured in a fresh
// process (this binary's --rss-probe mode), since RSS only ever grows within one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "unit/integration/probes.h"

namespace t9::integration {
namespace {

std::string self_exe() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : std::string();
}

// Runs `test_integration --rss-probe ctx` and returns its record (empty on failure).
std::map<std::string, std::string> probe(int ctx) {
  const std::string cmd = self_exe() + " --rss-probe " + std::to_string(ctx) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::string all, line;
  std::map<std::string, std::string> rec;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) {
    line = buf.data();
    all += line;
    if (auto r = parse_record(line, "rss_probe")) rec = *r;
  }
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << cmd << ":\n" << all;
  EXPECT_FALSE(rec.empty()) << cmd << ":\n" << all;
  return rec;
}

int64_t num(const std::map<std::string, std::string>& r, const std::string& key) {
  auto it = r.find(key);
  EXPECT_NE(it, r.end()) << "probe record lacks " << key;
  return it == r.end() ? -1 : std::atoll(it->second.c_str());
}

TEST(MemoryOnDemand, ContextSizeCostsNothingUntilTokensArrive) {
  const auto small = probe(4096);
  const auto large = probe(131072);
  ASSERT_FALSE(small.empty());
  ASSERT_FALSE(large.empty());
  // 4 MiB: allocator and page-granularity noise between two identical processes. A KV cache
  // sized for the context up front would show up as >= 90 MiB (4096 tokens) and >= 2.8 GiB
  // (131072 tokens) for SmolLM2 (30 layers x 3 KV heads x 64 dims x F16 x K,V = 23040 B/token).
  constexpr int64_t kTolKib = 4 * 1024;
  const int64_t d_load = num(large, "rss_load_kib") - num(small, "rss_load_kib");
  const int64_t d_req = num(large, "rss_after_request_kib") - num(small, "rss_after_request_kib");
  EXPECT_LE(std::llabs(d_load), kTolKib);
  EXPECT_LE(std::llabs(d_req), kTolKib);
  ASSERT_GT(num(small, "kv_full_ctx_bytes"), 16 * kTolKib * 1024) << "tolerance must be small";
  // No KV storage at all before the first request, and the same after it.
  EXPECT_EQ(num(small, "kv_bytes_load"), 0);
  EXPECT_EQ(num(large, "kv_bytes_load"), 0);
  EXPECT_EQ(num(small, "kv_bytes_after_request"), num(large, "kv_bytes_after_request"));
  EXPECT_EQ(num(small, "n_generated"), 8);
  EXPECT_EQ(num(large, "n_generated"), 8);
  std::printf(
      "[ measured ] VmRSS after load: ctx 4096 %lld KiB, ctx 131072 %lld KiB (diff %lld); "
      "after one request: %lld vs %lld KiB (diff %lld); KV allocated %lld bytes\n",
      static_cast<long long>(num(small, "rss_load_kib")),
      static_cast<long long>(num(large, "rss_load_kib")), static_cast<long long>(d_load),
      static_cast<long long>(num(small, "rss_after_request_kib")),
      static_cast<long long>(num(large, "rss_after_request_kib")), static_cast<long long>(d_req),
      static_cast<long long>(num(large, "kv_bytes_after_request")));
}

}  // namespace
}  // namespace t9::integration
