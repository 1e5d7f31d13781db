// OpProfiler (cuda_profile.cuh).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_profile.cuh"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"

namespace t9::cuda {

std::unique_ptr<OpProfiler> OpProfiler::from_env() {
  const char* v = std::getenv("TEMPO9_CUDA_PROFILE");
  if (v == nullptr || std::strcmp(v, "1") != 0) return nullptr;
  return std::make_unique<OpProfiler>();
}

cudaEvent_t OpProfiler::event(size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[i];
}

int OpProfiler::begin(cudaStream_t s) {
  if (!open_) {
    open_ = true;
    t_open_ = std::chrono::steady_clock::now();
  }
  const size_t i = next_++;
  CUDA_CHECK(cudaEventRecord(event(i), s));
  return static_cast<int>(i);
}

void OpProfiler::end(int ev0, cudaStream_t s, std::string key) {
  const size_t i = next_++;
  CUDA_CHECK(cudaEventRecord(event(i), s));
  pending_.push_back({ev0, static_cast<int>(i), std::move(key)});
}

void OpProfiler::resolve() {
  if (pending_.empty()) return;
  float ms = 0;
  int first = pending_.front().ev0, last = pending_.front().ev1;
  for (const Pending& p : pending_) {
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[p.ev0], events_[p.ev1]));
    Stat& st = stats_[p.key.empty() ? std::string("?") : p.key];
    st.ms += ms;
    ++st.n;
    first = std::min(first, p.ev0);
    last = std::max(last, p.ev1);
  }
  CUDA_CHECK(cudaEventElapsedTime(&ms, events_[first], events_[last]));
  span_ms_ += ms;
  wall_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_open_).count();
  ++windows_;
  open_ = false;
  pending_.clear();
  next_ = 0;
}

OpProfiler::~OpProfiler() {
  if (cudaDeviceSynchronize() == cudaSuccess) resolve();
  std::vector<std::pair<std::string, Stat>> rows(stats_.begin(), stats_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double sum = 0;
  for (const auto& r : rows) sum += r.second.ms;
  std::fprintf(stderr,
               "[cuda profile] %ld synced windows: host wall %.2f ms, GPU span %.2f ms, "
               "sum of op times %.2f ms (nested ops counted twice)\n",
               windows_, wall_ms_, span_ms_, sum);
  for (size_t i = 0; i < rows.size() && i < 60; ++i)
    std::fprintf(stderr, "[cuda profile] %9.3f ms %5.1f%% %8ld x %8.2f us  %s\n", rows[i].second.ms,
                 sum > 0 ? 100.0 * rows[i].second.ms / sum : 0.0, rows[i].second.n,
                 1e3 * rows[i].second.ms / static_cast<double>(rows[i].second.n),
                 rows[i].first.c_str());
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
}

}  // namespace t9::cuda
