// Row-wise ops vs scalar references written here in double precision.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops_test_util.h"
#include "quant/dequantize.h"
#include "quant/half.h"

namespace t9::test {
namespace {

// |got - ref| <= rel * |ref| + abs, with rel/abs given by the caller's justification.
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double rel,
                  double abs, const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - ref[i]), rel * std::fabs(ref[i]) + abs)
        << what << " [" << i << "] got " << got[i] << " ref " << ref[i];
}

class RowOps : public ::testing::Test {
 protected:
  CpuBackend be{CpuBackendConfig{2, std::nullopt}};
  DeviceArena arena{be};
  std::mt19937_64 rng = test_rng();
};

TEST_F(RowOps, RmsNormWithWeightAndGemmaBias) {
  const int64_t d = 300, n = 5;
  const auto x = random_floats(rng, d * n, -4.0f, 4.0f);
  const auto w = random_floats(rng, d);
  for (float bias : {0.0f, 1.0f}) {
    Tensor out = arena.poisoned(GgmlType::F32, d, n);
    be.rms_norm(arena.from_host(x, GgmlType::F32, d, n), arena.from_host(w, GgmlType::F32, d),
                1e-6f, bias, out);
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < n; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
      const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
      for (int64_t i = 0; i < d; ++i) ref[r * d + i] = x[r * d + i] * inv * (w[i] + bias);
    }
    // A handful of float roundings per element (inv, two products, the bias add).
    expect_close(arena.download<float>(out), ref, 8 * kU, 1e-30, "rms_norm");
  }
  // No weight: plain normalization, in place.
  Tensor xt = arena.from_host(x, GgmlType::F32, d, n);
  be.rms_norm(xt, Tensor{}, 1e-5f, 0.0f, xt);
  const auto got = arena.download<float>(xt);
  for (int64_t r = 0; r < n; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < d; ++i) ms += double(got[r * d + i]) * got[r * d + i];
    EXPECT_NEAR(ms / d, 1.0, 1e-4);  // eps 1e-5 against mean square ~5 shifts it by < 1e-5
  }
}

TEST_F(RowOps, AddMulBroadcastScale) {
  const int64_t d = 64, n = 3;
  const auto a = random_floats(rng, d * n), b = random_floats(rng, d * n),
             row = random_floats(rng, d);
  Tensor at = arena.from_host(a, GgmlType::F32, d, n);
  Tensor full = arena.poisoned(GgmlType::F32, d, n), bc = arena.poisoned(GgmlType::F32, d, n),
         sc = arena.poisoned(GgmlType::F32, d, n);
  be.add(at, arena.from_host(b, GgmlType::F32, d, n), full);
  be.mul(at, arena.from_host(row, GgmlType::F32, d), bc);
  be.scale(at, -1.75f, sc);
  const auto f = arena.download<float>(full), m = arena.download<float>(bc),
             s = arena.download<float>(sc);
  for (int64_t i = 0; i < d * n; ++i) {  // single IEEE operations: exact
    ASSERT_EQ(f[i], a[i] + b[i]);
    ASSERT_EQ(m[i], a[i] * row[i % d]);
    ASSERT_EQ(s[i], a[i] * -1.75f);
  }
}

double gelu_ref(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
}

TEST_F(RowOps, ActivationsGluSoftcap) {
  const int64_t d = 200, n = 2;
  const auto g = random_floats(rng, d * n, -6.0f, 6.0f), u = random_floats(rng, d * n, -2.0f, 2.0f);
  Tensor gt = arena.from_host(g, GgmlType::F32, d, n), ut = arena.from_host(u, GgmlType::F32, d, n);
  Tensor swi = arena.poisoned(GgmlType::F32, d, n), geg = arena.poisoned(GgmlType::F32, d, n),
         si = arena.poisoned(GgmlType::F32, d, n), ge = arena.poisoned(GgmlType::F32, d, n),
         cap = arena.poisoned(GgmlType::F32, d, n);
  be.glu(gt, ut, GluKind::kSwiGLU, swi);
  be.glu(gt, ut, GluKind::kGeGLU, geg);
  be.unary(gt, UnaryKind::kSilu, si);
  be.unary(gt, UnaryKind::kGeluTanh, ge);
  be.softcap(gt, 2.5f, cap);
  std::vector<double> r_swi(g.size()), r_geg(g.size()), r_si(g.size()), r_ge(g.size()),
      r_cap(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = g[i] / (1 + std::exp(-double(g[i])));
    r_si[i] = s, r_swi[i] = s * u[i], r_ge[i] = gelu_ref(g[i]), r_geg[i] = gelu_ref(g[i]) * u[i];
    r_cap[i] = 2.5 * std::tanh(g[i] / 2.5);
  }
  // libm exp/tanh in float are within a few ulp; the compositions add a few roundings. The
  // absolute term covers cancellation in gelu near its zero at -0.75.. where values are tiny.
  expect_close(arena.download<float>(swi), r_swi, 16 * kU, 1e-6, "swiglu");
  expect_close(arena.download<float>(geg), r_geg, 16 * kU, 1e-6, "geglu");
  expect_close(arena.download<float>(si), r_si, 16 * kU, 1e-6, "silu");
  expect_close(arena.download<float>(ge), r_ge, 16 * kU, 1e-6, "gelu");
  expect_close(arena.download<float>(cap), r_cap, 16 * kU, 1e-6, "softcap");
}

TEST_F(RowOps, SoftmaxArgmaxTopK) {
  const int64_t v = 1000, n = 3;
  auto x = random_floats(rng, v * n, -10.0f, 10.0f);
  x[1 * v + 17] = x[1 * v + 900] = 50.0f;  // a tie: the lower index wins
  Tensor xt = arena.from_host(x, GgmlType::F32, v, n);
  Tensor sm = arena.poisoned(GgmlType::F32, v, n), am = arena.poisoned(GgmlType::I32, n);
  Tensor ids = arena.poisoned(GgmlType::I32, 5, n), vals = arena.poisoned(GgmlType::F32, 5, n);
  be.softmax(xt, sm);
  be.argmax(xt, am);
  be.top_k(xt, 5, ids, vals);
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < n; ++r) {
    const double mx = *std::max_element(x.begin() + r * v, x.begin() + (r + 1) * v);
    double sum = 0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(x[r * v + i] - mx);
    for (int64_t i = 0; i < v; ++i) ref[r * v + i] = std::exp(x[r * v + i] - mx) / sum;
  }
  // x - max is rounded in float, which perturbs exp's result by |x - max| * u relatively; then
  // float exp (few ulp), the float-rounded 1/sum and one product.
  const auto smv = arena.download<float>(sm);
  for (int64_t r = 0; r < n; ++r) {
    const float mx = *std::max_element(x.begin() + r * v, x.begin() + (r + 1) * v);
    for (int64_t i = 0; i < v; ++i) {
      const double rel = (16 + std::fabs(x[r * v + i] - mx)) * kU;
      ASSERT_LE(std::fabs(smv[r * v + i] - ref[r * v + i]), rel * ref[r * v + i]) << i;
    }
  }
  const auto a = arena.download<int32_t>(am);
  const auto id = arena.download<int32_t>(ids);
  const auto vl = arena.download<float>(vals);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int32_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t p, int32_t q) { return x[r * v + p] > x[r * v + q]; });
    EXPECT_EQ(a[r], order[0]);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(id[r * 5 + i], order[i]);
      EXPECT_EQ(vl[r * 5 + i], x[r * v + order[i]]);
    }
  }
  EXPECT_EQ(a[1], 17);
  EXPECT_EQ(id[5 + 1], 900);
}

TEST_F(RowOps, CopyCastsAndGetRows) {
  const int64_t d = 96, n = 4;
  const auto x = random_floats(rng, d * n, -100.0f, 100.0f);
  Tensor xt = arena.from_host(x, GgmlType::F32, d, n);
  Tensor h = arena.poisoned(GgmlType::F16, d, n), b = arena.poisoned(GgmlType::BF16, d, n),
         back = arena.poisoned(GgmlType::F32, d, n);
  be.copy(xt, h);
  be.copy(xt, b);
  be.copy(h, back);
  const auto hv = arena.download<uint16_t>(h), bv = arena.download<uint16_t>(b);
  const auto bk = arena.download<float>(back);
  for (int64_t i = 0; i < d * n; ++i) {
    ASSERT_EQ(hv[i], f32_to_f16(x[i]));
    ASSERT_EQ(bv[i], f32_to_bf16(x[i]));
    ASSERT_EQ(bk[i], f16_to_f32(hv[i]));
  }
  // get_rows from a Q8_0 table equals the oracle's dequantized rows, picked by id.
  std::vector<uint8_t> table(row_bytes(GgmlType::Q8_0, d) * 10);
  for (auto& c : table) c = static_cast<uint8_t>(rng());
  for (size_t blk = 0; blk < table.size() / 34; ++blk) {
    const uint16_t s = f32_to_f16(0.01f * static_cast<float>(blk + 1));
    std::memcpy(&table[blk * 34], &s, 2);
  }
  const std::vector<int32_t> ids = {7, 0, 7, 3, 9};
  Tensor out = arena.poisoned(GgmlType::F32, d, 5);
  be.get_rows(arena.weights(table, GgmlType::Q8_0, d, 10), arena.from_host(ids, GgmlType::I32, 5),
              out);
  const auto got = arena.download<float>(out);
  std::vector<float> want(d);
  for (size_t i = 0; i < ids.size(); ++i) {
    dequantize_row(GgmlType::Q8_0, &table[ids[i] * row_bytes(GgmlType::Q8_0, d)], want.data(), d);
    for (int64_t e = 0; e < d; ++e) ASSERT_EQ(got[i * d + e], want[e]) << i << "," << e;
  }
}

// take_tokens: the negative ids become the named rows of prev, the others stay.
TEST_F(RowOps, TakeTokensReadsThePreviousRows) {
  const std::vector<int32_t> prev = {11, 22, 33, 44};
  const std::vector<int32_t> ids = {5, -1, -4, 0, -2, 7, -3};
  Tensor it = arena.from_host(ids, GgmlType::I32, static_cast<int64_t>(ids.size()));
  be.take_tokens(arena.from_host(prev, GgmlType::I32, 4), it);
  EXPECT_EQ(arena.download<int32_t>(it), (std::vector<int32_t>{5, 11, 44, 0, 22, 7, 33}));
}

// TEMPO9_CPU_ISA picks the kernels when the config does not; an explicit config wins.
TEST(CpuBackendIsa, EnvironmentAndConfigSelectIsa) {
  ASSERT_EQ(setenv("TEMPO9_CPU_ISA", "scalar", 1), 0);
  EXPECT_EQ(CpuBackend(CpuBackendConfig{1, std::nullopt}).isa(), CpuIsa::kScalar);
  if (cpu_isa_supported(CpuIsa::kAvx2)) {
    EXPECT_EQ(CpuBackend(CpuBackendConfig{1, CpuIsa::kAvx2}).isa(), CpuIsa::kAvx2);
  }
  ASSERT_EQ(setenv("TEMPO9_CPU_ISA", "no-such-isa", 1), 0);
  EXPECT_EQ(CpuBackend(CpuBackendConfig{1, std::nullopt}).isa(), best_cpu_isa());
  ASSERT_EQ(unsetenv("TEMPO9_CPU_ISA"), 0);
  EXPECT_EQ(CpuBackend(CpuBackendConfig{1, std::nullopt}).isa(), best_cpu_isa());
  EXPECT_EQ(parse_cpu_isa("avx512"), CpuIsa::kAvx512);
  EXPECT_EQ(parse_cpu_isa("AVX2"), std::nullopt);
  // Every ISA's name reads back as that ISA; the group order by VNNI wins over the float lanes
  // wherever both exist (and AMX is not there to win over both).
  for (CpuIsa isa :
       {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAmx, CpuIsa::kAvx512Groups})
    EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa);
  if (cpu_isa_supported(CpuIsa::kAvx512) && !cpu_isa_supported(CpuIsa::kAmx)) {
    EXPECT_EQ(best_cpu_isa(), CpuIsa::kAvx512Groups);
  }
}

}  // namespace
}  // namespace t9::test
