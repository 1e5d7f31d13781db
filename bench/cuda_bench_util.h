// Helpers shared by the CUDA micro-benchmarks (cuda_gemv_bench, cuda_attention_bench).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "core/check.h"

namespace t9::bench {

// Seconds per call: one warm-up call, then n calls enqueued between two syncs (host clock; each
// call should take well over the launch rate).
inline double seconds_per_call(Backend& be, int n, const std::function<void(int)>& call) {
  call(0);
  be.sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call(i);
  be.sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}

// The same n calls as one CUDA graph replay: after one warm-up call (scratch grows there, which
// would change the next window's tape) the window is enqueued six times; the CUDA backend
// captures the second as a graph (cuda_stream.cuh) and replays it from the third on. The first
// replay of a graph also uploads it (~1-2 µs per node, which a decode step pays once, not per
// step), so the figure is the median of the last three. Host launch time stays out of it, as in a
// decode step (for calls of a few µs the eager window above measures the host's launch rate: two
// launches per quantized matmul). Without the warm-up the first shape of a run timed a capture
// (runs 118b-119: 17-35 µs for 6); timing the first replay (runs 118b-120) counted the upload.
inline double seconds_per_replayed_call(Backend& be, int n, const std::function<void(int)>& call) {
  call(0);
  std::vector<double> s;
  for (int rep = 0; rep < 6; ++rep) {
    be.sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) call(i);
    be.sync();
    if (rep >= 3)
      s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[1] / n;
}

inline Buffer* must(Result<Buffer*> r) {
  T9_CHECK(r.ok(), "alloc: {}", r.message());
  return *r;
}

}  // namespace t9::bench
