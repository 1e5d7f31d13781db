// A persistent pool of worker threads for data-parallel loops (the CPU backend's matmuls).
// parallel_for blocks until every index ran; the calling thread works too. Not reentrant: one
// parallel_for at a time per pool (the engine thread owns the backend's pool).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace t9 {

class ThreadPool {
 public:
  // n_threads counts the caller: 1 means no worker threads. 0 picks hardware_concurrency().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(thread_index, n_threads) once on each thread (thread_index 0 is the caller).
  void run_on_all(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous chunks of at least `grain` and runs fn(begin, end) on them.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  const std::function<void(int, int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int n_pending_ = 0;
  bool stop_ = false;
};

}  // namespace t9
