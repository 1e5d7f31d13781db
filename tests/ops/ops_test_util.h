// Helpers for the backend op tests: a fresh random seed per run (printed; TEMPO9_TEST_SEED
// reproduces a run), device tensors filled from host vectors, NaN-poisoned outputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace t9::test {

inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    uint64_t s = std::random_device{}();
    s = s << 32 | std::random_device{}();
    if (const char* env = std::getenv("TEMPO9_TEST_SEED")) s = std::strtoull(env, nullptr, 10);
    std::printf("[ops tests] seed %llu (rerun with TEMPO9_TEST_SEED=%llu)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// A per-test generator derived from the run seed and the test's name.
inline std::mt19937_64 test_rng() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  return std::mt19937_64(test_seed() ^ std::hash<std::string>{}(name));
}

// Uniform in [lo, hi) but never exactly zero (zeros hide missing work).
inline std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = dist(rng);
    while (x == 0.0f);
  }
  return v;
}

inline std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAmx})
    if (cpu_isa_supported(isa)) out.push_back(isa);
  return out;
}

// Owns device buffers for one test and frees them at the end.
class DeviceArena {
 public:
  explicit DeviceArena(Backend& be) : be_(be) {}
  ~DeviceArena() {
    for (Buffer* b : bufs_) be_.free(b);
  }
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Uninitialized device tensor filled with 0xFF bytes (NaN for F32/F16/BF16, -1 for I32).
  Tensor poisoned(GgmlType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
    Tensor t = make_tensor(nullptr, 0, type, ne0, ne1, ne2, ne3);
    auto r = be_.alloc(t.n_bytes());
    EXPECT_TRUE(r.ok());
    bufs_.push_back(*r);
    std::vector<uint8_t> junk(t.n_bytes(), 0xFF);
    be_.upload(*r, 0, junk.data(), junk.size());
    return make_tensor(*r, 0, type, ne0, ne1, ne2, ne3);
  }

  template <typename T>
  Tensor from_host(const std::vector<T>& host, GgmlType type, int64_t ne0, int64_t ne1 = 1,
                   int64_t ne2 = 1, int64_t ne3 = 1) {
    Tensor t = poisoned(type, ne0, ne1, ne2, ne3);
    EXPECT_EQ(host.size() * sizeof(T), t.n_bytes());
    be_.upload(t.buf, 0, host.data(), t.n_bytes());
    return t;
  }

  // Weights through upload_weights (zero copy on CPU): `bytes` must outlive the tensor.
  Tensor weights(const std::vector<uint8_t>& bytes, GgmlType type, int64_t ne0, int64_t ne1) {
    auto r = be_.upload_weights(bytes.data(), bytes.size());
    EXPECT_TRUE(r.ok());
    bufs_.push_back(*r);
    return make_tensor(*r, 0, type, ne0, ne1);
  }

  template <typename T>
  std::vector<T> download(const Tensor& t) {
    std::vector<T> out(t.n_bytes() / sizeof(T));
    be_.download(t.buf, t.offset, out.data(), t.n_bytes());
    be_.sync();
    return out;
  }

 private:
  Backend& be_;
  std::vector<Buffer*> bufs_;
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace t9::test
