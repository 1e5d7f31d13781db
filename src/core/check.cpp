#include "core/check.h"

namespace t9::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "tempo9: CHECK failed at %s:%d: %s%s%s\n", file, line, cond,
               msg.empty() ? "" : " — ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace t9::detail
