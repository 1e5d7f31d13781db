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
#include "quant/half.h"
#include "quant/types.h"

namespace t9::test {

// The float unit roundoff (2^-24): the op tests' error budgets count it.
inline constexpr double kU = 1.0 / (1 << 24);

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

struct ScaleField {
  int offset;     // byte offset of an fp16 scale inside the block
  bool negative;  // may be negative (d of symmetric formats); dmin/m are kept >= 0 like ggml's
};

// Where each format keeps its fp16 scales (quant/blocks.h). Every other byte is random.
inline std::vector<ScaleField> scale_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return {{0, true}};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return {{0, true}, {2, true}};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {{0, true}, {2, false}};
    case GgmlType::Q2_K:
      return {{80, true}, {82, false}};
    case GgmlType::Q3_K:
      return {{108, true}};
    case GgmlType::Q6_K:
      return {{208, true}};
    default:
      return {};
  }
}

// Random weight bytes [n_out, n_in]: random codes, fp16 scales of realistic size (~1e-3..1e-2 for
// k-quant super-scales, larger for per-block ones), so dequantized weights are O(0.01..1).
inline std::vector<uint8_t> random_weights(std::mt19937_64& rng, GgmlType t, int64_t n_in,
                                           int64_t n_out) {
  const size_t n_bytes = row_bytes(t, n_in) * static_cast<size_t>(n_out);
  std::vector<uint8_t> w(n_bytes);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    auto v = random_floats(rng, static_cast<size_t>(n_in * n_out));
    for (size_t i = 0; i < v.size(); ++i) {
      if (t == GgmlType::F32) std::memcpy(&w[i * 4], &v[i], 4);
      uint16_t h = t == GgmlType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      if (t != GgmlType::F32) std::memcpy(&w[i * 2], &h, 2);
    }
    return w;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const auto& tr = traits(t);
  const float mag = tr.block_elems == 256 ? 0.004f : 0.05f;
  std::uniform_real_distribution<float> scale(0.25f * mag, mag);
  for (size_t blk = 0; blk < n_bytes / tr.block_bytes; ++blk) {
    for (const ScaleField& f : scale_fields(t)) {
      float v = scale(rng);
      if (f.negative && (rng() & 1)) v = -v;
      const uint16_t h = f32_to_f16(v);
      std::memcpy(&w[blk * tr.block_bytes + f.offset], &h, 2);
    }
  }
  return w;
}

inline std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa :
       {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAmx, CpuIsa::kAvx512Groups})
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

  // Weights through upload_matmul_weights: the backend may store them in a layout of its own.
  Tensor matmul_weights(const std::vector<uint8_t>& bytes, GgmlType type, int64_t ne0,
                        int64_t ne1) {
    auto r = be_.upload_matmul_weights(bytes.data(), bytes.size(), type, ne0, ne1);
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
