// STREAM-like memory bandwidth of this machine, for the decode roofline in docs/PERFORMANCE.md.
// Prints copy (read + write) and read-only (sum) bandwidth over a buffer far larger than L2, on 1
// and 2 threads; the median of 7 repetitions. Build:
//   g++ -O3 -march=native -std=c++20 -pthread dev/kernels/stream_bench.cpp -o /tmp/stream_bench
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{1} << 30;  // 1 GiB per array: far past any cache level

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sums 64-byte lines with AVX-512 so the loop is bound by loads, not by arithmetic.
float read_sum(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <typename Fn>
double median_gbs(int n_threads, size_t bytes_moved, Fn fn) {
  std::vector<double> gbs;
  for (int rep = 0; rep < 7; ++rep) {
    const double t0 = now_s();
    std::vector<std::thread> th;
    for (int t = 0; t < n_threads; ++t) th.emplace_back(fn, t, n_threads);
    for (auto& x : th) x.join();
    gbs.push_back(static_cast<double>(bytes_moved) / (now_s() - t0) / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

}  // namespace

int main() {
  const size_t n = kBytes / 4;
  auto* a = static_cast<float*>(std::aligned_alloc(64, kBytes));
  auto* b = static_cast<float*>(std::aligned_alloc(64, kBytes));
  for (size_t i = 0; i < n; ++i) a[i] = b[i] = 1.0f;
  volatile float sink = 0.0f;
  for (int nt = 1; nt <= 2; ++nt) {
    const double copy = median_gbs(nt, 2 * kBytes, [&](int t, int k) {
      const size_t lo = n * t / k / 16 * 16, hi = n * (t + 1) / k / 16 * 16;
      std::memcpy(b + lo, a + lo, (hi - lo) * 4);
    });
    const double read = median_gbs(nt, kBytes, [&](int t, int k) {
      const size_t lo = n * t / k / 64 * 64, hi = n * (t + 1) / k / 64 * 64;
      sink = sink + read_sum(a + lo, hi - lo);
    });
    std::printf("threads %d: copy %.1f GB/s (read+write), read %.1f GB/s\n", nt, copy, read);
  }
  std::free(a);
  std::free(b);
  return 0;
}
