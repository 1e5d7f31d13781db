// Helpers shared by the CUDA micro-benchmarks (cuda_gemv_bench, cuda_attention_bench).
#pragma once

#include <chrono>
#include <functional>

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
// would change the next window's tape) the window is enqueued three times and the third, which
// the CUDA backend replays as the graph it captured from the second (cuda_stream.cuh), is timed.
// Host launch time stays out of the figure, as in a decode step (for calls of a few µs the eager
// window above measures the host's launch rate: two launches per quantized matmul). Without the
// warm-up the first shape of a run timed a capture (runs 118b-119: 17-35 µs for 6).
inline double seconds_per_replayed_call(Backend& be, int n, const std::function<void(int)>& call) {
  call(0);
  double s = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    be.sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) call(i);
    be.sync();
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return s / n;
}

inline Buffer* must(Result<Buffer*> r) {
  T9_CHECK(r.ok(), "alloc: {}", r.message());
  return *r;
}

}  // namespace t9::bench
