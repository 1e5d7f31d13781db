#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace t9 {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("TEMPO9_LOG");
  if (!env) return LogLevel::kInfo;
  if (!std::strcmp(env, "error")) return LogLevel::kError;
  if (!std::strcmp(env, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
  return LogLevel::kInfo;
}

std::atomic<int> g_level{static_cast<int>(level_from_env())};

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

void log_line(LogLevel level, std::string_view msg) {
  static constexpr const char* kNames[] = {"E", "W", "I", "D"};
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  std::string line = fmt::format("[{}.{:03d} {}] {}\n", ms / 1000, static_cast<int>(ms % 1000),
                                 kNames[static_cast<int>(level)], msg);
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines never interleave
}

}  // namespace t9
