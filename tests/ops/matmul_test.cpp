// matmul vs the quant/dequantize.h oracle for every weight type and every ISA path, plus batch and
// thread-count invariance (bitwise).
#include <cmath>

#include "ops_test_util.h"
#include "quant/dequantize.h"
#include "quant/half.h"

namespace t9::test {
namespace {

const GgmlType kAllTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,
                              GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,
                              GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                              GgmlType::F16,  GgmlType::BF16, GgmlType::F32};

struct MatmulCase {
  int64_t n_in, n_out, n_tok;
};

void check_matmul_vs_oracle(GgmlType t, const MatmulCase& c, CpuIsa isa, bool with_bias) {
  auto rng = test_rng();
  CpuBackend be(CpuBackendConfig{2, isa});
  DeviceArena arena(be);
  const auto wbytes = random_weights(rng, t, c.n_in, c.n_out);
  const auto x = random_floats(rng, static_cast<size_t>(c.n_in * c.n_tok), -2.0f, 2.0f);
  const auto bias = random_floats(rng, static_cast<size_t>(c.n_out));
  Tensor wt = arena.weights(wbytes, t, c.n_in, c.n_out);
  Tensor xt = arena.from_host(x, GgmlType::F32, c.n_in, c.n_tok);
  Tensor bt = with_bias ? arena.from_host(bias, GgmlType::F32, c.n_out) : Tensor{};
  Tensor yt = arena.poisoned(GgmlType::F32, c.n_out, c.n_tok);
  be.matmul(wt, xt, bt, yt);
  const auto y = arena.download<float>(yt);

  std::vector<float> wf(static_cast<size_t>(c.n_in * c.n_out));
  dequantize_row(t, wbytes.data(), wf.data(), c.n_in * c.n_out);
  const bool quantized = traits(t).quantized;
  double worst_ratio = 0.0;
  for (int64_t tok = 0; tok < c.n_tok; ++tok) {
    const float* xr = &x[static_cast<size_t>(tok * c.n_in)];
    for (int64_t o = 0; o < c.n_out; ++o) {
      const float* wr = &wf[static_cast<size_t>(o * c.n_in)];
      double ref = with_bias ? bias[static_cast<size_t>(o)] : 0.0, abs_sum = 0.0, q_bound = 0.0;
      for (int64_t b = 0; b < c.n_in / 32; ++b) {
        double amax = 0.0, wabs = 0.0;
        for (int i = 0; i < 32; ++i) {
          const int64_t k = b * 32 + i;
          ref += static_cast<double>(wr[k]) * xr[k];
          abs_sum += std::fabs(static_cast<double>(wr[k]) * xr[k]);
          amax = std::max(amax, std::fabs(static_cast<double>(xr[k])));
          wabs += std::fabs(wr[k]);
        }
        // Rounding x to 8 bits with d = amax/127 moves each element by at most d/2 (1% slack for
        // the float reciprocal), so this block can move the dot by at most that * sum|w|.
        if (quantized) q_bound += 1.01 * amax / 254.0 * wabs;
      }
      // Float accumulation: at most n_in roundings of 2^-24 relative to sum|w*x| (a worst-case
      // bound for any summation order), plus the bias add.
      const double fp_bound = (c.n_in + 2) * std::ldexp(1.0, -24) * (abs_sum + std::fabs(ref));
      const double err = std::fabs(y[static_cast<size_t>(tok * c.n_out + o)] - ref);
      ASSERT_LE(err, q_bound + fp_bound)
          << type_name(t) << " isa " << cpu_isa_name(isa) << " tok " << tok << " out " << o
          << " got " << y[static_cast<size_t>(tok * c.n_out + o)] << " ref " << ref;
      worst_ratio = std::max(worst_ratio, err / (q_bound + fp_bound));
    }
  }
  // The bound is a worst case; typical errors sit well inside it. A ratio this small on every
  // output would mean the test compares nothing (e.g. both sides zero): the inputs are non-zero.
  EXPECT_GT(worst_ratio, 0.0) << type_name(t);
}

TEST(Matmul, EveryTypeEveryIsaMatchesDequantizedReference) {
  for (CpuIsa isa : supported_isas()) {
    for (GgmlType t : kAllTypes) {
      SCOPED_TRACE(fmt::format("{} {}", type_name(t), cpu_isa_name(isa)));
      // 512: two k-quant super-blocks (also 8 AVX-512 steps); 37 outputs leave a partial tile.
      check_matmul_vs_oracle(t, {512, 37, 5}, isa, /*with_bias=*/false);
      if (traits(t).block_elems == 32) {
        // 544 = 17 blocks of 32: exercises the AVX-512 32-element tail.
        check_matmul_vs_oracle(t, {544, 9, 3}, isa, /*with_bias=*/true);
      }
    }
  }
}

// n_in 8192 puts 32 activation rows in one L2 block (cpu_matmul.cpp), so 40 rows span two blocks
// and several column tiles; results must still match the oracle.
TEST(Matmul, LongRowsSpanActivationBlocks) {
  for (CpuIsa isa : supported_isas())
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16})
      check_matmul_vs_oracle(t, {8192, 6, 40}, isa, /*with_bias=*/false);
}

TEST(Matmul, BiasIsAdded) {
  for (CpuIsa isa : supported_isas())
    check_matmul_vs_oracle(GgmlType::Q4_K, {256, 13, 2}, isa, true);
}

// Row 3 of a batch of 19 must equal the same row computed alone and in batches of 4 and 6 (rows 3
// and 5), bit for bit, and a 1-thread backend must equal a 2-thread one on every row. The sizes
// cross every path choice: 1 and 4 rows take the decode kernels (fused VNNI; on AMX and
// avx512-groups the rows16 VNNI kernel), 6 the rows16 kernel's 6-column form without tiles, 19 the
// unpack/tile kernels (AMX and avx512-groups: a full and a partial 16-row activation group); 70
// outputs leave a partial weight tile.
TEST(Matmul, BatchAndThreadInvariant) {
  auto rng = test_rng();
  const int64_t n_in = 768, n_out = 70, n_tok = 19;
  for (CpuIsa isa : supported_isas()) {
    for (GgmlType t : kAllTypes) {
      SCOPED_TRACE(fmt::format("{} {}", type_name(t), cpu_isa_name(isa)));
      const auto wbytes = random_weights(rng, t, n_in, n_out);
      const auto x = random_floats(rng, static_cast<size_t>(n_in * n_tok), -3.0f, 3.0f);
      std::vector<float> single(x.begin() + 3 * n_in, x.begin() + 4 * n_in);
      std::vector<std::vector<float>> batched;
      std::vector<float> alone, in_four, in_six;
      for (int threads : {1, 2}) {
        CpuBackend be(CpuBackendConfig{threads, isa});
        DeviceArena arena(be);
        Tensor wt = arena.weights(wbytes, t, n_in, n_out);
        Tensor yb = arena.poisoned(GgmlType::F32, n_out, n_tok);
        be.matmul(wt, arena.from_host(x, GgmlType::F32, n_in, n_tok), Tensor{}, yb);
        batched.push_back(arena.download<float>(yb));
        if (threads == 2) {
          Tensor ys = arena.poisoned(GgmlType::F32, n_out, 1);
          be.matmul(wt, arena.from_host(single, GgmlType::F32, n_in, 1), Tensor{}, ys);
          alone = arena.download<float>(ys);
          // The decode orders (cpu/row_order_probe.h): one weight row at a time and the
          // interleaved tile, each fixed on its own backend, give those bits too.
          for (int rows : {1, 4}) {
            CpuBackendConfig cfg{threads, isa};
            cfg.decode_rows = rows;
            CpuBackend fixed(cfg);
            DeviceArena fa(fixed);
            Tensor yf = fa.poisoned(GgmlType::F32, n_out, 1);
            fixed.matmul(fa.weights(wbytes, t, n_in, n_out),
                         fa.from_host(single, GgmlType::F32, n_in, 1), Tensor{}, yf);
            const auto got = fa.download<float>(yf);
            for (int64_t o = 0; o < n_out; ++o)
              ASSERT_EQ(float_bits(got[static_cast<size_t>(o)]),
                        float_bits(alone[static_cast<size_t>(o)]))
                  << "decode rows " << rows << ", out " << o;
          }
          std::vector<float> four(x.begin(), x.begin() + 4 * n_in);
          Tensor y4 = arena.poisoned(GgmlType::F32, n_out, 4);
          be.matmul(wt, arena.from_host(four, GgmlType::F32, n_in, 4), Tensor{}, y4);
          in_four = arena.download<float>(y4);
          std::vector<float> six(x.begin(), x.begin() + 6 * n_in);
          Tensor y6 = arena.poisoned(GgmlType::F32, n_out, 6);
          be.matmul(wt, arena.from_host(six, GgmlType::F32, n_in, 6), Tensor{}, y6);
          in_six = arena.download<float>(y6);
        }
      }
      for (size_t i = 0; i < batched[0].size(); ++i)
        ASSERT_EQ(float_bits(batched[0][i]), float_bits(batched[1][i])) << "1 vs 2 threads, " << i;
      for (int64_t o = 0; o < n_out; ++o)
        ASSERT_EQ(float_bits(alone[static_cast<size_t>(o)]),
                  float_bits(batched[1][static_cast<size_t>(3 * n_out + o)]))
            << "alone vs batch, out " << o;
      for (int64_t o = 0; o < n_out; ++o)
        ASSERT_EQ(float_bits(in_four[static_cast<size_t>(3 * n_out + o)]),
                  float_bits(batched[1][static_cast<size_t>(3 * n_out + o)]))
            << "batch of 4 vs batch of 19, out " << o;
      for (int64_t r : {3, 5})  // a 6-column rows16 call
        for (int64_t o = 0; o < n_out; ++o)
          ASSERT_EQ(float_bits(in_six[static_cast<size_t>(r * n_out + o)]),
                    float_bits(batched[1][static_cast<size_t>(r * n_out + o)]))
              << "batch of 6 vs batch of 19, row " << r << ", out " << o;
      ASSERT_FALSE(std::isnan(alone[0]));
    }
  }
}

// The probe's decision: one row at a time only when it is faster per weight byte by the margin;
// small calls are neither timed nor counted; a fixed order never changes.
TEST(RowOrderProbe, KeepsTheFasterOrderPerByte) {
  using P = cpu::RowOrderProbe;
  auto run = [](double tile_s, double one_s, size_t bytes) {
    P p;
    for (int i = 0; i < P::kSkip + P::kProbeCalls; ++i) {
      EXPECT_EQ(p.order(), P::Order::kProbing);
      p.record(100, 1.0);  // too small: not counted
      const bool one = p.one_row(bytes);
      EXPECT_EQ(one, i >= P::kSkip && (i - P::kSkip) % 2 == 1) << i;
      EXPECT_TRUE(p.timing(bytes));
      p.record(bytes, one ? one_s : tile_s);
    }
    return p;
  };
  const size_t mb = P::kMinBytes;
  EXPECT_EQ(run(1.0, 0.90, mb).order(), P::Order::kOneRow);
  EXPECT_EQ(run(1.0, 0.99, mb).order(), P::Order::kTile);  // inside the margin: keep the tile
  EXPECT_EQ(run(0.90, 1.0, mb).order(), P::Order::kTile);
  const P p = run(2.0, 1.0, 4 * mb);
  EXPECT_DOUBLE_EQ(p.one_row_s_per_gb(), 1.0 / static_cast<double>(4 * mb) * 1e9);
  EXPECT_FALSE(p.timing(4 * mb));
  EXPECT_TRUE(p.one_row(1));  // decided: every call, small ones too
  P fixed(P::Order::kTile);
  fixed.record(mb, 1.0);
  EXPECT_FALSE(fixed.one_row(mb));
  EXPECT_FALSE(fixed.timing(mb));
  EXPECT_EQ(fixed.order(), P::Order::kTile);
  EXPECT_FALSE(P().one_row(mb));  // the first kSkip calls: the tile
}

}  // namespace
}  // namespace t9::test
