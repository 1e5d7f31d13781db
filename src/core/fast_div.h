// FastDiv: n / d by one multiply and a shift, for a divisor known before the kernel runs (the
// launcher sets it; CUDA kernels divide with it, tests/unit/core/fast_div_test.cpp checks it on
// the host). A device's integer division is an inlined ~20-instruction sequence; in the serial
// prologue of a latency-bound decode kernel those instructions are latency (the split decode
// attention had 52 of them, docs/CUDA.md stage 62).
//
// Why it is exact: with m = ceil(2^32 / d) = (2^32 + e) / d, 0 <= e < d,
//   n m / 2^32 = n / d + n e / (d 2^32),
// and with n = q d + r (0 <= r < d) the floor stays q while r + n e / 2^32 < d, which n e < 2^32
// ensures, so every n < 2^32 / d (covers).
#pragma once

#include <cstdint>

#include "core/check.h"
#include "core/host_device.h"

namespace t9 {

struct FastDiv {  // every member initialized (a launch's argument bytes)
  uint64_t m = 0;
  int32_t d = 0, unused = 0;

  static FastDiv of(int32_t d) {
    T9_CHECK(d >= 1, "FastDiv of {}", d);
    return {((uint64_t{1} << 32) + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d), d, 0};
  }
  // Whether every n in [0, n_end) divides exactly.
  bool covers(int64_t n_end) const { return d >= 1 && n_end <= (int64_t{1} << 32) / d; }
  // n / d for 0 <= n < 2^32 / d (covers).
  T9_HD int div(int n) const { return static_cast<int>((static_cast<uint64_t>(n) * m) >> 32); }
};

}  // namespace t9
