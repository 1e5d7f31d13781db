// T9_CHECK: tier one of the error model — a broken invariant of our own code. Prints file, line
// and a message, then aborts. Never used for bad input from a file or a request (use Result).
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

namespace t9::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);
}

#define T9_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::t9::detail::check_failed(__FILE__, __LINE__, #cond, ::fmt::format("" __VA_ARGS__)); \
  } while (0)

#ifdef TEMPO9_DEBUG_CHECKS
#define T9_DCHECK(cond, ...) T9_CHECK(cond, __VA_ARGS__)
#else
#define T9_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#endif
