// Per-op GPU timings for the CUDA backend, on when the environment has TEMPO9_CUDA_PROFILE=1
// (off: one null-pointer test per op). Each op records a CUDA event pair on the stream around
// its launches; sync() resolves the pairs of the work it waited for. At destruction a table goes
// to stderr: per op key (matmul keys carry type, shape and a row bucket) the count and the summed
// GPU time, plus the GPU span of each synced window (first op start to last op end) and the
// host wall time of the same windows, so gaps (launch / host bound) show as span - sum and
// wall - span.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace t9::cuda {

class OpProfiler {
 public:
  // nullptr unless TEMPO9_CUDA_PROFILE=1.
  static std::unique_ptr<OpProfiler> from_env();
  OpProfiler() = default;
  ~OpProfiler();  // prints the table
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  int begin(cudaStream_t s);
  void end(int ev0, cudaStream_t s, std::string key);
  // After the stream has been synchronized: adds the elapsed time of every pending pair.
  void resolve();

 private:
  struct Pending {
    int ev0, ev1;
    std::string key;
  };
  struct Stat {
    double ms = 0;
    long n = 0;
  };
  cudaEvent_t event(size_t i);

  std::vector<cudaEvent_t> events_;
  size_t next_ = 0;
  std::vector<Pending> pending_;
  std::map<std::string, Stat> stats_;
  double span_ms_ = 0, wall_ms_ = 0;
  long windows_ = 0;
  bool open_ = false;
  std::chrono::steady_clock::time_point t_open_;
};

// RAII: times the enclosing op when a profiler is on. `key()` builds the key only then.
class ProfScope {
 public:
  ProfScope(OpProfiler* p, cudaStream_t s) : p_(p), s_(s), ev0_(p ? p->begin(s) : -1) {}
  ~ProfScope() {
    if (p_ != nullptr) p_->end(ev0_, s_, std::move(key_));
  }
  ProfScope(const ProfScope&) = delete;
  ProfScope& operator=(const ProfScope&) = delete;
  bool on() const { return p_ != nullptr; }
  void set_key(std::string k) { key_ = std::move(k); }

 private:
  OpProfiler* p_;
  cudaStream_t s_;
  int ev0_;
  std::string key_;
};

// Row-count bucket for profile keys: 1, <=8, <=64, <=512, more.
inline int rows_bucket(int64_t n) {
  return n <= 1 ? 1 : n <= 8 ? 8 : n <= 64 ? 64 : n <= 512 ? 512 : 4096;
}

}  // namespace t9::cuda

// First statement of a CudaBackend op: times it when profiling is on; the key expression is only
// evaluated then.
#define T9_CUDA_PROF(...)                                      \
  ::t9::cuda::ProfScope t9_prof_(prof_.get(), stream_->raw()); \
  if (t9_prof_.on()) t9_prof_.set_key(__VA_ARGS__)
