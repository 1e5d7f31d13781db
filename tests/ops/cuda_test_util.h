// Helpers shared by the CUDA op tests (tests/ops/cuda_*.cpp, one binary): random quantized
// weights with realistic scales, and whole-model runs on the reference fixtures compared with
// transformers' logits.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <vector>

#ifdef TEMPO9_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "model/model.h"
#include "model/session.h"
#include "ops_test_util.h"
#include "quant/half.h"

namespace t9::test::cuda_util {

#ifdef TEMPO9_HAVE_CUDA
// The op tests' fixture: a fresh CUDA backend per test, and the CPU backend as the reference.
class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
    be_ = std::make_unique<CudaBackend>();
  }
  std::unique_ptr<CudaBackend> be_;
  CpuBackend cpu_{CpuBackendConfig{2, std::nullopt}};
};

// Suite Cuda's fixture (cuda_ops_test.cpp, cuda_matmul_test.cpp): one class, as gtest requires of
// a suite's tests.
class Cuda : public CudaVsCpu {};

// The weight types every quantized op is tested over.
inline constexpr GgmlType kWeightTypes[] = {
    GgmlType::Q4_0,   GgmlType::Q4_1,   GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
    GgmlType::Q2_K,   GgmlType::Q3_K,   GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
    GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::F16,  GgmlType::BF16, GgmlType::F32};

// Random weights of type t for n_expert experts, uploaded as model weights: [n_in, n_out,
// n_expert].
inline Tensor random_experts(DeviceArena& arena, std::mt19937_64& rng, GgmlType t, int64_t n_in,
                             int64_t n_out, int64_t n_expert) {
  return reshape(
      arena.weights(random_weights(rng, t, n_in, n_out * n_expert), t, n_in, n_out * n_expert),
      n_in, n_out, n_expert);
}

// Expert e of w [n_in, n_out, n_expert] as a 2-D [n_in, n_out] weight tensor.
inline Tensor expert(const Tensor& w, int64_t e) {
  Tensor v = w;
  v.offset = w.offset + static_cast<size_t>(e) * w.nb[2];
  v.ne[2] = 1;
  v.nb[3] = v.nb[2];
  return v;
}

// Row 3 of x (rows of w.ne[0] floats) multiplied alone, then inside calls of each of
// `row_counts` rows (x's first rows): every output of row 3 the same bits each time.
inline void expect_row_batch_invariant(Backend& be, DeviceArena& arena, const Tensor& w,
                                       const std::vector<float>& x,
                                       std::initializer_list<int64_t> row_counts) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  const std::vector<float> x3(x.begin() + 3 * n_in, x.begin() + 4 * n_in);
  const Tensor ya = arena.poisoned(GgmlType::F32, n_out, 1);
  be.matmul(w, arena.from_host(x3, GgmlType::F32, n_in, 1), Tensor{}, ya);
  const auto alone = arena.download<float>(ya);
  ASSERT_FALSE(std::isnan(alone[0]));
  for (const int64_t n_tok : row_counts) {
    const std::vector<float> xb(x.begin(), x.begin() + n_tok * n_in);
    const Tensor yb = arena.poisoned(GgmlType::F32, n_out, n_tok);
    be.matmul(w, arena.from_host(xb, GgmlType::F32, n_in, n_tok), Tensor{}, yb);
    const auto batch = arena.download<float>(yb);
    for (int64_t o = 0; o < n_out; ++o)
      ASSERT_EQ(float_bits(alone[static_cast<size_t>(o)]),
                float_bits(batch[static_cast<size_t>(3 * n_out + o)]))
          << "n_tok " << n_tok << " out " << o;
  }
}

// Every (token, rank) pair r of a matmul_id's output `got` ([pairs, n_out], pairs = ids.size()) is
// bitwise the same backend's dense matmul of its x row with expert ids[r] of w: x holds n_in-wide
// rows, one per token (row r / k) or, x_per_rank, one per pair (row r).
inline void expect_pairs_equal_dense(Backend& be, DeviceArena& arena, const Tensor& w,
                                     const std::vector<float>& x, bool x_per_rank,
                                     const std::vector<int32_t>& ids, int64_t k,
                                     const std::vector<float>& got) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_expert = w.ne[2];
  const int64_t x_rows = static_cast<int64_t>(x.size()) / n_in;
  const Tensor xt = arena.from_host(x, GgmlType::F32, n_in, x_rows);
  for (int64_t e = 0; e < n_expert; ++e) {
    const Tensor y = arena.poisoned(GgmlType::F32, n_out, x_rows);
    be.matmul(expert(w, e), xt, Tensor{}, y);
    const auto dense = arena.download<float>(y);
    for (size_t r = 0; r < ids.size(); ++r) {
      if (ids[r] != e) continue;
      const size_t xr = x_per_rank ? r : r / static_cast<size_t>(k);
      for (int64_t o = 0; o < n_out; ++o)
        ASSERT_EQ(float_bits(got[r * n_out + o]), float_bits(dense[xr * n_out + o]))
            << "pair " << r << " expert " << e << " out " << o;
    }
  }
  ASSERT_FALSE(std::isnan(got[0]));
}

// Each output of a matmul_shared_x(x, outs) call is bitwise the same backend's matmul (or
// matmul_id, over [n_in, 1, n] x) of x alone, and not NaN (outputs start poisoned).
inline void expect_each_output_alone(Backend& be, DeviceArena& arena, const Tensor& x,
                                     std::span<const Backend::MatmulOut> outs) {
  for (const Backend::MatmulOut& o : outs) {
    const Tensor alone = arena.poisoned(GgmlType::F32, o.y.ne[0], o.y.ne[1], o.y.ne[2]);
    if (o.ids.valid())
      be.matmul_id(o.w, reshape(x, x.ne[0], 1, x.n_rows()), o.ids, alone);
    else
      be.matmul(o.w, x, Tensor{}, alone);
    const auto ga = arena.download<float>(o.y), gb = arena.download<float>(alone);
    ASSERT_EQ(ga.size(), gb.size());
    for (size_t i = 0; i < ga.size(); ++i)
      ASSERT_EQ(float_bits(ga[i]), float_bits(gb[i])) << "element " << i;
    ASSERT_FALSE(std::isnan(ga[0]));
  }
}
#endif

inline std::string fixture_dir(const std::string& arch) {
  const char* env = std::getenv("TEMPO9_SHARED_DIR");
  return std::string(env != nullptr ? env : TEMPO9_SHARED_DIR) + "/fixtures/reference/" + arch;
}

// Little-endian float32 C-order .npy (the fixtures' logits).
inline std::vector<float> read_npy(const std::string& path, size_t n_expected) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing " << path;
  char magic[8];
  f.read(magic, 8);
  uint16_t hlen = 0;
  f.read(reinterpret_cast<char*>(&hlen), 2);
  f.seekg(10 + hlen);
  std::vector<float> v(n_expected);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n_expected * 4));
  EXPECT_TRUE(f.good()) << path << " holds fewer than " << n_expected << " floats";
  return v;
}

struct Cmp {
  int top1 = 0;
  double max_abs = 0.0, mean_abs = 0.0;
};

inline Cmp compare(const std::vector<float>& a, const std::vector<float>& b, int n_pos,
                   int n_vocab) {
  Cmp c;
  for (int p = 0; p < n_pos; ++p) {
    const float* x = a.data() + static_cast<size_t>(p) * n_vocab;
    const float* y = b.data() + static_cast<size_t>(p) * n_vocab;
    int ax = 0, ay = 0;
    for (int i = 0; i < n_vocab; ++i) {
      if (x[i] > x[ax]) ax = i;
      if (y[i] > y[ay]) ay = i;
      const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
      c.max_abs = std::max(c.max_abs, std::isnan(d) ? INFINITY : d);
      c.mean_abs += d;
    }
    c.top1 += ax == ay;
  }
  c.mean_abs /= static_cast<double>(n_pos) * n_vocab;
  return c;
}

struct ModelRun {
  std::vector<float> whole, stepped;
};

// Fills 256 KB of stack below the caller with bytes that differ on every call. run_model calls it
// before each step, so a kernel argument carrying an uninitialized local's bytes (which would
// otherwise repeat along the test's fixed call path) differs from step to step, and the step's
// tape never repeats: CudaGraphModel's replay count catches it (FloatParts, found in run 166).
[[gnu::noinline]] inline void scribble_stack() {
  static uint64_t calls = 0;
  volatile uint64_t buf[32 * 1024];
  const uint64_t salt = ++calls * 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < 32 * 1024; ++i) buf[i] = salt ^ (i * 0xBF58476D1CE4E5B9ull);
  (void)buf[0];  // a volatile read: the stores are the point, not dead
}

// Whole sequence in one pass (kAll) and token by token (kLast), default ModelConfig (for hybrids:
// the recurrent delta rule in every step) but for the KV type.
inline ModelRun run_model(Backend& be, const std::string& gguf, GgmlType kv,
                          const std::vector<int32_t>& toks) {
  model::ModelConfig cfg;
  cfg.kv_type = kv;
  auto m = model::Model::load(gguf, be, cfg);
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m.ok()) return {};
  ModelRun r;
  {  // one session at a time (a hybrid model's recurrent state slot is freed with it)
    model::Session whole(**m);
    auto all = whole.feed(toks, model::LogitRows::kAll);
    EXPECT_TRUE(all.ok()) << all.message();
    if (all.ok()) r.whole = all->data;
  }
  model::Session step(**m);
  for (int32_t t : toks) {
    scribble_stack();
    auto l = step.feed(std::span<const int32_t>(&t, 1), model::LogitRows::kLast);
    EXPECT_TRUE(l.ok()) << l.message();
    if (!l.ok()) break;
    r.stepped.insert(r.stepped.end(), l->data.begin(), l->data.end());
  }
  return r;
}

}  // namespace t9::test::cuda_util
