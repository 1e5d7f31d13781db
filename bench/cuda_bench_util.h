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

inline Buffer* must(Result<Buffer*> r) {
  T9_CHECK(r.ok(), "alloc: {}", r.message());
  return *r;
}

}  // namespace t9::bench
