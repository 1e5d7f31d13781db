#include "backend/cpu/work_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace t9::cpu {
namespace {

// How long an idle worker spins before sleeping: longer than the gaps between the ops of one
// decode step (small row ops run on the caller), far shorter than a scheduler time slice.
constexpr auto kSpin = std::chrono::microseconds(200);

}  // namespace

WorkPool::WorkPool(int n_threads) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

WorkPool::~WorkPool() {
  stop_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkPool::work(uint32_t gen, int thread) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(s >> 32) != gen) return;
    const ChunkFn* fn = fn_[gen & 1].load(std::memory_order_relaxed);
    const int64_t n = n_chunks_[gen & 1].load(std::memory_order_relaxed);
    const int64_t chunk = static_cast<int64_t>(s & 0xFFFFFFFFu);
    if (chunk >= n) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    (*fn)(chunk, thread);
    n_done_.fetch_add(1, std::memory_order_release);
    s = state_.load(std::memory_order_acquire);
  }
}

void WorkPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t w = wake_.load(std::memory_order_acquire);
    if (w == seen) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; w == seen; ++i) {
        _mm_pause();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() - t0 > kSpin) {
          n_sleeping_.fetch_add(1);
          wake_.wait(seen);  // returns at once if wake_ moved on
          n_sleeping_.fetch_sub(1);
        }
        w = wake_.load(std::memory_order_acquire);
      }
    }
    if (stop_.load()) return;
    seen = w;
    work(w, thread);
  }
}

void WorkPool::run_chunks(int64_t n_chunks, const ChunkFn& fn) {
  if (n_chunks <= 0) return;
  if (workers_.empty() || n_chunks == 1) {
    for (int64_t c = 0; c < n_chunks; ++c) fn(c, 0);
    return;
  }
  const uint32_t gen = ++gen_;
  fn_[gen & 1].store(&fn, std::memory_order_relaxed);
  n_chunks_[gen & 1].store(n_chunks, std::memory_order_relaxed);
  n_done_.store(0, std::memory_order_relaxed);
  state_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  wake_.store(gen);  // seq_cst with the load below: a worker going to sleep sees gen or is woken
  if (n_sleeping_.load() > 0) wake_.notify_all();
  work(gen, 0);
  // Only chunks already claimed are left; wait for them (spin: they are short).
  for (int i = 0; n_done_.load(std::memory_order_acquire) < n_chunks; ++i) {
    _mm_pause();
    if ((i & 1023) == 1023) std::this_thread::yield();
  }
}

void WorkPool::run_on_all(const std::function<void(int, int)>& fn) {
  const int n = n_threads();
  run_chunks(n, [&](int64_t i, int) { fn(static_cast<int>(i), n); });
}

void WorkPool::parallel_for(int64_t n, int64_t grain,
                            const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t n_use = std::min<int64_t>(n_threads(), max_chunks);
  if (n_use <= 1) {
    fn(0, n);
    return;
  }
  run_chunks(n_use, [&](int64_t t, int) {
    const int64_t begin = n * t / n_use, end = n * (t + 1) / n_use;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace t9::cpu
