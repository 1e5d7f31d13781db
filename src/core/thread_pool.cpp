#include "core/thread_pool.h"

#include <algorithm>

namespace t9 {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    {
      std::unique_lock lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index, n_threads());
    {
      std::lock_guard lock(mu_);
      if (--n_pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int, int)>& fn) {
  if (workers_.empty()) {
    fn(0, 1);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    n_pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  fn(0, n_threads());
  std::unique_lock lock(mu_);
  cv_done_.wait(lock, [&] { return n_pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int n_use = static_cast<int>(std::min<int64_t>(n_threads(), max_chunks));
  if (n_use <= 1) {
    fn(0, n);
    return;
  }
  // Static contiguous split: deterministic, so results never depend on thread timing.
  run_on_all([&](int t, int) {
    if (t >= n_use) return;
    const int64_t begin = n * t / n_use, end = n * (t + 1) / n_use;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace t9
