// The CPU backend's worker threads. Work is cut into chunks that any thread claims with one atomic
// operation, the calling thread included, so a call never waits for a worker that the OS has not
// scheduled yet (on a loaded machine that wait is a whole time slice): if the workers are late,
// the caller runs every chunk itself. Idle workers spin briefly, then sleep on a futex.
//
// Which thread runs a chunk is not deterministic; callers keep results independent of it (each
// output is computed by the same instructions whichever thread computes it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace t9::cpu {

class WorkPool {
 public:
  // n_threads counts the caller: 1 means no worker threads. 0 picks hardware_concurrency().
  explicit WorkPool(int n_threads = 0);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(chunk, thread) once for every chunk in [0, n_chunks) and returns when all are done.
  // thread (< n_threads()) names the thread running the chunk: no two chunks run at once with the
  // same thread value, so it can index per-thread scratch. Not reentrant.
  void run_chunks(int64_t n_chunks, const std::function<void(int64_t, int)>& fn);

  // fn(i, n_threads()) for each i in [0, n_threads()), as chunks (any thread may run any i).
  void run_on_all(const std::function<void(int, int)>& fn);

  // ThreadPool::parallel_for's split of [0, n) into at most n_threads() contiguous ranges of at
  // least `grain`, each run as one chunk.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  using ChunkFn = std::function<void(int64_t, int)>;
  void worker_loop(int thread);
  // Claims and runs chunks while the published job is still `gen`.
  void work(uint32_t gen, int thread);

  std::vector<std::thread> workers_;
  // Published job: generation in the high 32 bits, next unclaimed chunk in the low 32. A claim is
  // a CAS on the whole word, so a worker holding a stale generation can never claim a chunk.
  std::atomic<uint64_t> state_{0};
  // Job descriptions, indexed by generation parity: slot g & 1 is only rewritten for job g + 2,
  // after every chunk of job g has finished.
  std::atomic<const ChunkFn*> fn_[2] = {nullptr, nullptr};
  std::atomic<int64_t> n_chunks_[2] = {0, 0};
  std::atomic<int64_t> n_done_{0};
  std::atomic<uint32_t> wake_{0};  // futex word: the latest generation
  std::atomic<int> n_sleeping_{0};
  std::atomic<bool> stop_{false};
  uint32_t gen_ = 0;  // caller side
};

}  // namespace t9::cpu
