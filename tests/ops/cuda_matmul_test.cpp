// CUDA matmuls (every weight type, the quantized and float kernels, sliced and few-row forms,
// shared-x launches) vs the dequantized reference and each other, bit for bit where the forms
// promise it. The suite Cuda's other ops are cuda_ops_test.cpp's. Compiled to nothing without CUDA.
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"
#include "quant/dequantize.h"

namespace t9::test {
namespace {

using namespace cuda_util;

struct MatmulCase {
  int64_t n_in, n_out, n_tok;
  bool bias;
};

// x as the int8 matmul kernels see it: per 32 elements d = amax / 127, q = rint(x * (1 / d)),
// x~ = d * q (cuda_matmul_int8_activations; the CPU backend's rounding, float ops the same).
std::vector<double> int8_rounded(const std::vector<float>& x) {
  std::vector<double> r(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t j = b; j < b + 32; ++j) {
      const float q = std::clamp(std::nearbyint(x[j] * id), -128.0f, 127.0f);
      r[j] = static_cast<double>(d) * q;
    }
  }
  return r;
}

// y vs a double reference over the oracle-dequantized weights and the activations the kernel
// multiplies (F32 as given, or int8-rounded per 32 for the int8 types: that rounding is part of
// the op's definition, replicated exactly above). What remains is float accumulation: at most
// (n_in + 2) roundings of u relative to sum|w*x| + |y| for ANY order, plus the bias add. (For
// formats with a min, d*q and m are summed separately, so the terms can exceed |w*x|; the
// observed worst err/bound is ~1e-3, far from 1, so this bound still has room.) Returns the
// worst err / bound.
double check_matmul(CudaBackend& be, std::mt19937_64& rng, GgmlType t, const MatmulCase& c) {
  DeviceArena arena(be);
  const auto wb = random_weights(rng, t, c.n_in, c.n_out);
  const auto x = random_floats(rng, static_cast<size_t>(c.n_in * c.n_tok), -2.0f, 2.0f);
  const auto bias = random_floats(rng, static_cast<size_t>(c.n_out));
  Tensor yt = arena.poisoned(GgmlType::F32, c.n_out, c.n_tok);
  be.matmul(arena.weights(wb, t, c.n_in, c.n_out),
            arena.from_host(x, GgmlType::F32, c.n_in, c.n_tok),
            c.bias ? arena.from_host(bias, GgmlType::F32, c.n_out) : Tensor{}, yt);
  const std::vector<double> xr =
      cuda_matmul_int8_activations(t) ? int8_rounded(x) : std::vector<double>(x.begin(), x.end());
  const auto y = arena.download<float>(yt);
  std::vector<float> wf(static_cast<size_t>(c.n_in * c.n_out));
  dequantize_row(t, wb.data(), wf.data(), c.n_in * c.n_out);
  double worst = 0.0;
  for (int64_t tok = 0; tok < c.n_tok; ++tok) {
    for (int64_t o = 0; o < c.n_out; ++o) {
      double ref = c.bias ? bias[static_cast<size_t>(o)] : 0.0, abs_sum = 0.0;
      for (int64_t k = 0; k < c.n_in; ++k) {
        const double p = static_cast<double>(wf[static_cast<size_t>(o * c.n_in + k)]) *
                         xr[static_cast<size_t>(tok * c.n_in + k)];
        ref += p;
        abs_sum += std::fabs(p);
      }
      const double bound = (c.n_in + 2) * kU * (abs_sum + std::fabs(ref));
      const float got = y[static_cast<size_t>(tok * c.n_out + o)];
      const double err = std::fabs(got - ref);
      EXPECT_LE(err, bound) << type_name(t) << " [" << c.n_tok << "x" << c.n_in << "] tok " << tok
                            << " out " << o << " got " << got << " ref " << ref;
      if (!(err <= bound)) return INFINITY;
      worst = std::max(worst, err / bound);
    }
  }
  return worst;
}

TEST_F(Cuda, MatmulEveryTypeMatchesDequantizedReference) {
  auto rng = test_rng();
  for (GgmlType t : kWeightTypes) {
    SCOPED_TRACE(type_name(t));
    double worst = 0.0;
    // Decode (1 row), token tiles of 4 (2, 3) and 8 (5, 19: a partial tile and several); odd
    // output counts leave a weight-row pair and a block of warps partial; 512/768 leave lanes
    // idle, 4096 is one whole segment of 64 units (Q4_K/Q6_K), 4608 is more than one with a
    // partial last; 4500 rows make each warp loop over several row pairs (the grid is capped at
    // the resident blocks).
    for (const MatmulCase& c : {MatmulCase{1024, 67, 1, false}, MatmulCase{512, 37, 5, false},
                                MatmulCase{768, 9, 19, true}, MatmulCase{4096, 8, 2, true},
                                MatmulCase{4608, 4500, 3, true}})
      worst = std::max(worst, check_matmul(*be_, rng, t, c));
    // 32-element formats: 17 blocks per row, so rows start off 16-byte boundaries (the kernels'
    // shared-memory skew)
    if (traits(t).quantized && traits(t).block_elems == 32)
      worst = std::max(worst, check_matmul(*be_, rng, t, {544, 33, 1, false}));
    if (!traits(t).quantized)  // float weights take any row length: a 32-element tail
      worst = std::max(worst, check_matmul(*be_, rng, t, {100, 7, 3, true}));
    // The sliced types take the tensor-core kernel from 16 rows (cuda_mma.cu): several 64-row
    // tiles with partial last ones, and n_in = 256 (4-8 units per row: empty slices)
    if (t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ||
        t == GgmlType::Q8_0) {
      worst = std::max(worst, check_matmul(*be_, rng, t, {1536, 70, 300, true}));
      worst = std::max(worst, check_matmul(*be_, rng, t, {256, 33, 64, false}));
    }
    std::printf("[cuda matmul] %-7s worst err/bound %.3g\n", std::string(type_name(t)).c_str(),
                worst);
    EXPECT_GT(worst, 0.0) << "outputs equal to the reference everywhere: inputs are not random?";
  }
}

// Row 3 of 8 and of 19 (token tiles of 8: one and several) equals that row alone (the 1-row
// kernel), bit for bit: per output, the sum order depends on n_in only.
TEST_F(Cuda, MatmulBatchInvariant) {
  auto rng = test_rng();
  const int64_t n_in = 768, n_out = 70;
  for (GgmlType t : kWeightTypes) {
    SCOPED_TRACE(type_name(t));
    DeviceArena arena(*be_);
    const auto wb = random_weights(rng, t, n_in, n_out);
    Tensor w = arena.weights(wb, t, n_in, n_out);
    expect_row_batch_invariant(
        *be_, arena, w, random_floats(rng, static_cast<size_t>(n_in * 19), -3.0f, 3.0f), {8, 19});
  }
}

// matmul_shared_x over random weights of `types` (n_out[i] outputs each, a bias on entry
// bias_at) and n_tok random rows of x: every output must be the bits of a plain matmul of the same
// x. Returns the fused launches the call made (CudaBackend::fused_matmuls).
long expect_shared_x_equals_matmuls(CudaBackend& be, std::mt19937_64& rng,
                                    std::span<const GgmlType> types, std::span<const int64_t> n_out,
                                    int64_t n_in, int64_t n_tok, size_t bias_at) {
  DeviceArena arena(be);
  const Tensor x =
      arena.from_host(random_floats(rng, static_cast<size_t>(n_in * n_tok), -3.0f, 3.0f),
                      GgmlType::F32, n_in, n_tok);
  const int64_t nb = n_out[bias_at];
  const Tensor bias =
      arena.from_host(random_floats(rng, static_cast<size_t>(nb), -1.0f, 1.0f), GgmlType::F32, nb);
  std::vector<Backend::MatmulOut> outs;
  std::vector<Tensor> sep;
  for (size_t i = 0; i < types.size(); ++i) {
    const Tensor w =
        arena.weights(random_weights(rng, types[i], n_in, n_out[i]), types[i], n_in, n_out[i]);
    outs.push_back(
        {w, i == bias_at ? bias : Tensor{}, arena.poisoned(GgmlType::F32, n_out[i], n_tok)});
    sep.push_back(arena.poisoned(GgmlType::F32, n_out[i], n_tok));
  }
  const long fused_before = be.fused_matmuls();
  be.matmul_shared_x(x, outs);
  const long fused = be.fused_matmuls() - fused_before;
  for (size_t i = 0; i < outs.size(); ++i) be.matmul(outs[i].w, x, outs[i].bias, sep[i]);
  for (size_t i = 0; i < outs.size(); ++i) {
    SCOPED_TRACE("out " + std::to_string(i) + " " + std::string(type_name(types[i])));
    const auto shared = arena.download<float>(outs[i].y);
    const auto alone = arena.download<float>(sep[i]);
    EXPECT_EQ(shared.size(), alone.size());
    for (size_t e = 0; e < shared.size() && e < alone.size(); ++e)
      if (float_bits(shared[e]) != float_bits(alone[e])) {
        ADD_FAILURE() << "element " << e;
        break;
      }
    EXPECT_FALSE(std::isnan(shared[0]));
  }
  return fused;
}

// matmul_shared_x rounds x to int8 once for every int8-activation weight: each output must be the
// bits of a plain matmul of the same x (GEMV rows 1 and 5, tensor cores at 40 rows), for a mix of
// types that take the rounded x (Q4_K, Q6_K, Q8_0, Q4_0) and types that do not (Q5_1: F32
// activations; F16: float kernel), with a bias on one of them. One weight per type: no fused
// launch.
TEST_F(Cuda, MatmulSharedXEqualsSeparateMatmuls) {
  auto rng = test_rng();
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q5_1, GgmlType::Q6_K,
                            GgmlType::Q8_0, GgmlType::F16,  GgmlType::Q4_0};
  const int64_t n_out[] = {70, 33, 64, 130, 24, 40};
  for (int64_t n_tok : {1, 5, 40}) {
    SCOPED_TRACE(n_tok);
    EXPECT_EQ(expect_shared_x_equals_matmuls(*be_, rng, types, n_out, 512, n_tok, 3), 0);
  }
}

// matmul_shared_x launches up to four plain matmuls of one sliced type (Q3_K to Q6_K, Q8_0) as
// one kernel (SliceParts): every output must still be the bits of its own matmul. Per type: five
// weights of it (four fuse, the fifth runs alone) and a Q4_0 one between them (not fused), n_out
// 70 / 200 / 33 / 512 / 64 (partial 64-row tiles), a bias on the second; rows 1 (GEMV), 3 and 8
// (one row per grid row: small weights, tok1_max_weight_bytes), 16, 40 and 160 (tensor cores,
// split: 16 weight tiles in all) and 300 (whole).
TEST_F(Cuda, MatmulSharedXFusedPartsEqualSeparateMatmuls) {
  auto rng = test_rng();
  const int64_t n_out[] = {70, 200, 40, 33, 512, 64};
  for (GgmlType t :
       {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q5_K, GgmlType::Q8_0}) {
    const GgmlType types[] = {t, t, GgmlType::Q4_0, t, t, t};
    for (int64_t n_tok : {1, 3, 8, 16, 40, 160, 300}) {
      SCOPED_TRACE(std::string(type_name(t)) + " rows " + std::to_string(n_tok));
      EXPECT_EQ(expect_shared_x_equals_matmuls(*be_, rng, types, n_out, 1024, n_tok, 1), 1);
    }
  }
}

// Float weights (F32, F16, BF16) fuse too when their launch configurations agree, as the MoE
// router and the shared expert's one-output gate do (2048 -> 256 and 2048 -> 1, both split
// across a block's warps): rows 1 and 8 (one activation row per grid row) run the three float
// weights as one launch (a bias on the third); at 33 rows (tiles of 8) the router takes 8 weight
// rows per block and the gate 2, so they run one by one. Every output is the bits of its own
// matmul either way; the Q8_0 weight between them is no float part.
TEST_F(Cuda, MatmulSharedXFloatPartsEqualSeparateMatmuls) {
  auto rng = test_rng();
  const int64_t n_out[] = {256, 1, 64, 96};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    const GgmlType types[] = {t, t, GgmlType::Q8_0, t};
    for (int64_t n_tok : {1, 8, 33}) {
      SCOPED_TRACE(std::string(type_name(t)) + " rows " + std::to_string(n_tok));
      EXPECT_EQ(expect_shared_x_equals_matmuls(*be_, rng, types, n_out, 2048, n_tok, 3),
                n_tok <= 8 ? 1 : 0);
    }
  }
}

// A prompt chunk's router (2048 -> 256 float weights over 1203 rows: the split 8 x 8 tiles, the
// last tile 3 rows; with CudaBackendConfig::float_tile_min_rows the tile kernel, 16 or 8 staged
// weight rows a block over whole tiles of 8 rows, 256 -> 250 outputs leaving its last row block
// partial, and a bias): each row's outputs must be the bits of the same row alone (one row per
// grid row), so a prompt computed in one step routes as it would token by token. With the tile
// kernel on, the router and the shared expert's one-output gate still equal their own calls
// through matmul_shared_x (the tile calls go one by one: no fused launch).
TEST_F(Cuda, FloatMatmulLongCallRowsEqualOneRow) {
  auto rng = test_rng();
  CudaBackendConfig cfg;
  cfg.float_tile_min_rows = 64;
  CudaBackend tiled(cfg);
  const int64_t n_in = 2048, n_rows = 1203;
  for (CudaBackend* be : {be_.get(), &tiled}) {
    for (GgmlType t : {GgmlType::F32, GgmlType::BF16, GgmlType::F16}) {
      for (const int64_t n_out : {int64_t{256}, int64_t{250}}) {
        SCOPED_TRACE(::testing::Message() << type_name(t) << " n_out " << n_out
                                          << (be == &tiled ? " (tile kernel)" : ""));
        DeviceArena arena(*be);
        const Tensor w = arena.weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
        const Tensor bias = arena.from_host(
            random_floats(rng, static_cast<size_t>(n_out), -1.0f, 1.0f), GgmlType::F32, n_out);
        const auto x = random_floats(rng, static_cast<size_t>(n_in * n_rows), -3.0f, 3.0f);
        const Tensor y = arena.poisoned(GgmlType::F32, n_out, n_rows);
        be->matmul(w, arena.from_host(x, GgmlType::F32, n_in, n_rows), bias, y);
        const auto all = arena.download<float>(y);
        for (const int64_t r : {int64_t{0}, int64_t{7}, int64_t{64}, int64_t{575}, n_rows - 1}) {
          const std::vector<float> xr(x.begin() + r * n_in, x.begin() + (r + 1) * n_in);
          const Tensor y1 = arena.poisoned(GgmlType::F32, n_out, 1);
          be->matmul(w, arena.from_host(xr, GgmlType::F32, n_in, 1), bias, y1);
          const auto one = arena.download<float>(y1);
          for (int64_t o = 0; o < n_out; ++o)
            ASSERT_EQ(float_bits(all[static_cast<size_t>(r * n_out + o)]),
                      float_bits(one[static_cast<size_t>(o)]))
                << "row " << r << " out " << o;
        }
      }
    }
  }
  const GgmlType types[] = {GgmlType::F32, GgmlType::F32};
  const int64_t n_out[] = {256, 1};
  EXPECT_EQ(expect_shared_x_equals_matmuls(tiled, rng, types, n_out, n_in, 100, 0), 0);
}

// Q4_K, Q6_K and Q8_0 run the sliced GEMV below 16 activation rows (tiles of 1, 4, 8) and the
// tensor-core kernel from 16 rows on (64-row tiles); both compute the canonical order of
// backend/cuda/cuda_units.cuh, so a row's output is the same bits alone, among 4 or 8 rows, and
// among 17, 64 or 300 rows, wherever it sits in the call (and 4 and 8 rows run one row per grid
// row for small weights, tiles of 4 and 8 for large ones). Shapes: n_in 4096 (7-8 units per
// slice: Q4_K/Q6_K 64, Q8_0 128 units), 1536 and 256 (fewer than 32 units for Q4_K/Q6_K: empty
// slices), 544 for Q8_0 (17 blocks: a partial 256-element chunk, some empty slices), 256, 512
// and 768 (at most 16 units: one row per grid row takes the short-row GEMV, 8 or 16 lanes a
// row); n_out 70 and 200 leave the last 64-row weight tile partial; 2048 -> 9002 takes more than
// one pass of the resident blocks at one row (the grid-stride walk's later passes).
void expect_rows_equal_alone(CudaBackend& be, std::mt19937_64& rng,
                             std::initializer_list<GgmlType> types) {
  struct Shape {
    int64_t n_in, n_out;
  };
  const int64_t n_rows = 320;
  const int64_t probes[] = {3, 16, 40, 63, 64, 150, 299};
  for (GgmlType t : types) {
    // 4 and 8 rows run as tiles of 4 and 8 activation rows (2 rows over weights below the L2
    // bound: one row per grid row), with 1, 2 or 4 weight rows per warp as the type and the row's
    // shared memory allow (Q8_0: 2 at 4096 inputs, 4 below); past the bound by 66 weight rows
    // (n_out is then not a multiple of 4 for any of the three types: a partial last group).
    const auto big = [&](int64_t n_in) {
      return CudaBackend::tok1_max_weight_bytes() / static_cast<int64_t>(row_bytes(t, n_in)) + 66;
    };
    for (const Shape s :
         {Shape{4096, 70}, Shape{1536, 200}, Shape{256, 70}, Shape{512, 70}, Shape{544, 70},
          Shape{768, 70}, Shape{4096, big(4096)}, Shape{2048, big(2048)}, Shape{2048, 9002}}) {
      if (s.n_in % traits(t).block_elems != 0) continue;
      SCOPED_TRACE(std::string(type_name(t)) + " n_in " + std::to_string(s.n_in));
      DeviceArena arena(be);
      const auto wb = random_weights(rng, t, s.n_in, s.n_out);
      Tensor w = arena.weights(wb, t, s.n_in, s.n_out);
      const auto x = random_floats(rng, static_cast<size_t>(s.n_in * n_rows), -3.0f, 3.0f);
      Tensor bias =
          arena.from_host(random_floats(rng, static_cast<size_t>(s.n_out)), GgmlType::F32, s.n_out);
      auto run = [&](int64_t first, int64_t n) {
        std::vector<float> xs(x.begin() + first * s.n_in, x.begin() + (first + n) * s.n_in);
        Tensor y = arena.poisoned(GgmlType::F32, s.n_out, n);
        be.matmul(w, arena.from_host(xs, GgmlType::F32, s.n_in, n), bias, y);
        return arena.download<float>(y);
      };
      std::vector<std::vector<float>> alone;
      for (int64_t p : probes) alone.push_back(run(p, 1));
      // 2 .. 15: tiles of 4 and 8; 17 .. 160: the split form. With the few-row tensor-core GEMV
      // on up to 32 rows: one to four groups of 8 rows, the last partial (17: a fourth group
      // with no row), or two launch rows of 16 where its shared memory allows only two groups.
      for (int64_t n_tok : {2, 3, 4, 5, 8, 11, 15, 17, 24, 32, 64, 160, 300}) {
        for (int64_t first : {int64_t{0}, int64_t{9}}) {
          const auto y = run(first, n_tok);
          for (size_t k = 0; k < std::size(probes); ++k) {
            const int64_t pos = probes[k] - first;
            if (pos < 0 || pos >= n_tok) continue;
            for (int64_t o = 0; o < s.n_out; ++o)
              ASSERT_EQ(float_bits(alone[k][static_cast<size_t>(o)]),
                        float_bits(y[static_cast<size_t>(pos * s.n_out + o)]))
                  << "row " << probes[k] << " at " << pos << " of " << n_tok << ", out " << o;
          }
        }
      }
      ASSERT_FALSE(std::isnan(alone[0][0]));
    }
  }
}

TEST_F(Cuda, MatmulSlicedKernelsBitwiseEqual) {
  auto rng = test_rng();
  expect_rows_equal_alone(
      *be_, rng, {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q5_K, GgmlType::Q8_0});
}

// The few-row tensor-core GEMV (CudaBackendConfig::mma_rows_min / _max; cuda_gemv_mma.cu) takes
// Q8_0, Q4_K and Q6_K calls of 2..32 rows here whose weight rows are 16-byte aligned (Q8_0: n_in a
// multiple of 256, 544 keeps the sliced GEMV; Q6_K: a multiple of 2048, the others keep it): each
// row must still be the bits of the same row alone (the one-row GEMV), and a fused call's parts
// (q/k/v, gate/up) the bits of their own calls, at 3, 8, 11 and 27 rows (one to four groups of 8;
// Q6_K's parts at 2048 inputs).
TEST_F(Cuda, MatmulFewRowTensorCoreGemvBitwiseEqual) {
  CudaBackendConfig cfg;
  cfg.mma_rows_min = 2;
  cfg.mma_rows_max = 32;
  CudaBackend be(cfg);
  auto rng = test_rng();
  expect_rows_equal_alone(be, rng, {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K});
  const int64_t n_out[] = {70, 200, 40, 33, 512, 64};
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const GgmlType types[] = {t, t, GgmlType::Q4_0, t, t, t};
    const int64_t n_in = t == GgmlType::Q6_K ? 2048 : 1024;
    for (int64_t n_tok : {3, 8, 11, 27}) {
      SCOPED_TRACE(std::string(type_name(t)) + " fused parts, rows " + std::to_string(n_tok));
      EXPECT_EQ(expect_shared_x_equals_matmuls(be, rng, types, n_out, n_in, n_tok, 1), 1);
    }
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
