// Minimal leveled logging to stderr. Thread-safe (one write per line). Level from TEMPO9_LOG
// (error|warn|info|debug) or set_log_level().
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace t9 {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, std::string_view msg);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level <= log_level()) log_line(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace t9

#define T9_LOG_ERROR(...) ::t9::log(::t9::LogLevel::kError, __VA_ARGS__)
#define T9_LOG_WARN(...) ::t9::log(::t9::LogLevel::kWarn, __VA_ARGS__)
#define T9_LOG_INFO(...) ::t9::log(::t9::LogLevel::kInfo, __VA_ARGS__)
#define T9_LOG_DEBUG(...) ::t9::log(::t9::LogLevel::kDebug, __VA_ARGS__)
