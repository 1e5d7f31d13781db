// The first index of the largest of n floats, the greedy sampler's and the backends' argmax:
// NaNs never win, and a NaN at index 0 gives 0 (what a one-pass scan with `x[i] > x[best]` gives).
// Two passes without a loop-carried index: the largest value over 8 independent running maxima,
// then its first index. The one-pass scan is one dependent chain: 0.20-0.36 ms over a 248k-entry
// row on the dev VM, against 0.045 ms (bench/argmax_bench.cpp, docs/PERFORMANCE.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace t9 {

inline int64_t first_argmax(const float* x, int64_t n) {
  if (n <= 0) return 0;
  float m[8];
  std::fill(std::begin(m), std::end(m), x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float best = m[0];
  for (int j = 1; j < 8; ++j) best = m[j] > best ? m[j] : best;
  for (int64_t k = 0; k < n; ++k)
    if (x[k] == best) return k;
  return 0;  // best is NaN: x[0] is NaN and nothing compares greater
}

}  // namespace t9
