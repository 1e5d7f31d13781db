// The bf16 tensor-core matmul of fragment-ordered Q4_K, Q5_K, Q6_K, Q3_K, Q8_0 and BF16 weights
// (cuda_bf16_matmul.cuh): its results against a double reference over the bf16 operands it is
// defined to multiply, its rows bitwise the same whatever the batch (the GEMV's 1-32 rows against
// the GEMM's tiles), and the ops that must not read the layout refusing it.
#ifdef TEMPO9_HAVE_CUDA

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_bf16_matmul.cuh"
#include "cuda_test_util.h"
#include "ops_test_util.h"
#include "quant/frag_layout.h"
#include "quant/half.h"
#include "quant/types.h"

namespace t9::test {
namespace {

using cuda_util::expect_row_batch_invariant;

class CudaBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
    CudaBackendConfig cfg;
    cfg.bf16_matmul = true;
    cfg.bf16_q8_0 = true;
    cfg.bf16_q5_k = true;
    cfg.bf16_q3_k = true;
    cfg.bf16_pairs = true;
    cfg.bf16_wgmma_rows = 0;  // the mma.sync GEMM here; CudaBf16Wgmma below tests wgmma
    be_ = std::make_unique<CudaBackend>(cfg);
  }
  std::unique_ptr<CudaBackend> be_;
};

double bf16_round(float v) {
  return bf16_to_f32(f32_to_bf16(v));
}

// The weight the kernels multiply for element k of a GGUF row of `type`: Q4_K's, Q5_K's, Q6_K's
// and Q3_K's bf16 rules; Q8_0's own d * q (exact in double), which its kernels apply per block in
// fp32; BF16's own.
double bf16_weight(GgmlType type, const uint8_t* row, int64_t k) {
  if (type == GgmlType::Q4_K)
    return q4k_bf16_weight(reinterpret_cast<const BlockQ4_K*>(row)[k / 256],
                           static_cast<int>(k % 256));
  if (type == GgmlType::Q8_0) {
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[k / 32];
    return static_cast<double>(f16_to_f32(b.d)) * b.qs[k % 32];
  }
  if (type == GgmlType::BF16) return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[k]);
  if (type == GgmlType::Q5_K)
    return q5k_bf16_weight(reinterpret_cast<const BlockQ5_K*>(row)[k / 256],
                           static_cast<int>(k % 256));
  if (type == GgmlType::Q3_K)
    return q3k_bf16_weight(reinterpret_cast<const BlockQ3_K*>(row)[k / 256],
                           static_cast<int>(k % 256));
  return q6k_bf16_weight(reinterpret_cast<const BlockQ6_K*>(row)[k / 256],
                         static_cast<int>(k % 256));
}

// y of a [n_tok x n_in] x [n_out x n_in] call against sum(bf16 weight * bf16(x)) (+ bias) in
// double. The tensor cores add each k16 step's 16 exact products into fp32 with their own
// alignment, then the slices add in fp32: n_in / 16 + n_in / 1024 + 1 additions, each allowed
// 2^-22 of sum |w x| + |bias| (a bit more than one rounding: the hardware's alignment may drop
// bits below the accumulator's). The prototype's worst was ~1e-7 relative (run 217). Q8_0 has
// three roundings a 32-input block (its two mma, then the fma of d times their sum).
void expect_near_reference(CudaBackend& be, std::mt19937_64& rng, GgmlType type, int64_t n_in,
                           int64_t n_out, int64_t n_tok, bool with_bias) {
  SCOPED_TRACE(testing::Message() << type_name(type) << " " << n_tok << " x " << n_in << " -> "
                                  << n_out);
  DeviceArena arena(be);
  const auto wb = random_weights(rng, type, n_in, n_out);
  const Tensor w = arena.matmul_weights(wb, type, n_in, n_out);
  ASSERT_EQ(w.buf->layout, WeightLayout::kFrag);
  const auto x = random_floats(rng, static_cast<size_t>(n_in * n_tok), -2.0f, 2.0f);
  const auto bias = random_floats(rng, static_cast<size_t>(n_out));
  const Tensor yt = arena.poisoned(GgmlType::F32, n_out, n_tok);
  be.matmul(w, arena.from_host(x, GgmlType::F32, n_in, n_tok),
            with_bias ? arena.from_host(bias, GgmlType::F32, n_out) : Tensor{}, yt);
  const auto y = arena.download<float>(yt);
  const size_t row_size = row_bytes(type, n_in);
  const double steps =
      static_cast<double>((type == GgmlType::Q8_0 ? 3 * n_in / 32 : n_in / 16) + n_in / 1024 + 1);
  for (int64_t o = 0; o < n_out; ++o) {
    std::vector<double> wr(static_cast<size_t>(n_in));
    for (int64_t k = 0; k < n_in; ++k)
      wr[static_cast<size_t>(k)] = bf16_weight(type, wb.data() + o * row_size, k);
    for (int64_t t = 0; t < n_tok; ++t) {
      double ref = with_bias ? bias[static_cast<size_t>(o)] : 0.0, mag = std::fabs(ref);
      for (int64_t k = 0; k < n_in; ++k) {
        const double p =
            wr[static_cast<size_t>(k)] * bf16_round(x[static_cast<size_t>(t * n_in + k)]);
        ref += p, mag += std::fabs(p);
      }
      const double got = y[static_cast<size_t>(t * n_out + o)];
      ASSERT_LE(std::fabs(got - ref), steps * std::ldexp(mag, -22))
          << "row " << t << " out " << o << " got " << got << " ref " << ref;
    }
  }
}

TEST_F(CudaBf16, MatchesTheBf16Reference) {
  auto rng = test_rng();
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K,
                           GgmlType::Q8_0, GgmlType::BF16}) {
    expect_near_reference(*be_, rng, t, 1024, 48, 1, false);   // GEMV, one slice
    expect_near_reference(*be_, rng, t, 2048, 144, 5, true);   // GEMV, two slices, a bias
    expect_near_reference(*be_, rng, t, 3072, 64, 8, false);   // GEMV at 8 rows
    expect_near_reference(*be_, rng, t, 8192, 32, 8, false);   // GEMV, rows too big to stage:
                                                               // the bf16 copy through L1
    expect_near_reference(*be_, rng, t, 1024, 96, 20, true);   // GEMV, three groups of 8 rows
    expect_near_reference(*be_, rng, t, 2048, 208, 70, true);  // GEMM: a partial 128-row block
                                                               // and a partial 64-row tile, a bias
  }
  // The widest input: Q6_K's ring (3 x 3360 bytes a warp) leaves room to stage one row of 16384
  // but not two (the bf16 copy then); Q4_K (3 x 2304) and Q5_K (3 x 2816) stage both.
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K})
    for (const int64_t n_tok : {1, 2}) expect_near_reference(*be_, rng, t, 16384, 32, n_tok, false);
  // Q8_0's ring (3 x 4352 bytes a warp) leaves room for fourteen slices at four groups
  // (gemv_smem): at 10240 and at the widest, 14336, one row is staged and 32 rows come from the
  // bf16 copy.
  for (const int64_t n_in : {10240, 14336})
    for (const int64_t n_tok : {1, 32})
      expect_near_reference(*be_, rng, GgmlType::Q8_0, n_in, 32, n_tok, false);
  // BF16's two-slot ring (2 x 8192 bytes a warp) holds twelve slices (the 8B's down projection);
  // one row is staged, 32 come from the bf16 copy; 70 rows: the GEMM by slices.
  for (const int64_t n_tok : {1, 32, 70})
    expect_near_reference(*be_, rng, GgmlType::BF16, 12288, 32, n_tok, false);
}

// Row 3 alone, then inside calls of 5, 8, 9, 17 and 32 rows (the GEMV: one to four groups of 8)
// and 33, 70 and 130 rows (the GEMM, across its 64-row tiles): the same bits every time.
TEST_F(CudaBf16, RowsAreBatchInvariantBitForBit) {
  auto rng = test_rng();
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K,
                           GgmlType::Q8_0, GgmlType::BF16})
    for (const int64_t n_in : {1024, 4096}) {
      SCOPED_TRACE(testing::Message() << type_name(t) << " n_in " << n_in);
      const int64_t n_out = 272;
      DeviceArena arena(*be_);
      const Tensor w = arena.matmul_weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
      ASSERT_EQ(w.buf->layout, WeightLayout::kFrag);
      expect_row_batch_invariant(*be_, arena, w,
                                 random_floats(rng, static_cast<size_t>(n_in * 130), -3.0f, 3.0f),
                                 {5, 8, 9, 17, 32, 33, 70, 130});
    }
}

// The GEMM by slices (bf16_gemm_by_slices: few blocks) against the GEMM by whole rows: the
// widest matrix that goes by slices at 33 rows goes by whole rows at 70 (twice the row tiles), so
// row 3 is compared alone (the GEMV), in 33 rows (slices) and in 70 rows (whole rows). The
// smaller shapes above all go by slices (RowsAreBatchInvariantBitForBit compares those too).
TEST_F(CudaBf16, GemmBySlicesEqualsWholeRows) {
  auto rng = test_rng();
  const int64_t n_in = 3072;
  int64_t blocks = 1;
  while (cuda::bf16_gemm_by_slices(n_in, blocks + 1, 33)) ++blocks;
  ASSERT_TRUE(cuda::bf16_gemm_by_slices(n_in, blocks, 33));
  ASSERT_FALSE(cuda::bf16_gemm_by_slices(n_in, blocks, 70));
  const int64_t n_out = blocks * cuda::kBf16GemmRows - 16;  // the last block partial
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K,
                           GgmlType::Q8_0, GgmlType::BF16}) {
    SCOPED_TRACE(testing::Message() << type_name(t) << " n_out " << n_out);
    DeviceArena arena(*be_);
    const Tensor w = arena.matmul_weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
    ASSERT_EQ(w.buf->layout, WeightLayout::kFrag);
    expect_row_batch_invariant(
        *be_, arena, w, random_floats(rng, static_cast<size_t>(n_in * 70), -3.0f, 3.0f), {33, 70});
  }
}

// Each of outs' outputs (written by one matmul_shared_x call over x) is a number and the bits of
// its plain matmul.
void expect_plain_bits(CudaBackend& be, DeviceArena& arena, const Tensor& x,
                       std::span<const Backend::MatmulOut> outs) {
  for (const auto& o : outs) {
    const Tensor sep = arena.poisoned(GgmlType::F32, o.w.ne[1], x.n_rows());
    be.matmul(o.w, x, o.bias, sep);
    const auto a = arena.download<float>(o.y), b = arena.download<float>(sep);
    ASSERT_EQ(a.size(), b.size());
    for (size_t e = 0; e < a.size(); ++e) {
      ASSERT_FALSE(std::isnan(a[e])) << type_name(o.w.type) << " element " << e;
      ASSERT_EQ(float_bits(a[e]), float_bits(b[e])) << type_name(o.w.type) << " element " << e;
    }
  }
}

// matmul_shared_x with three fragment-ordered Q4_K weights (208 rows: a partial GEMM block; a
// bias on the second), two Q6_K ones, two Q8_0 ones, two BF16 ones, two Q5_K ones and a Q8_0 one
// in GGUF order (int8 path): one launch for each type's fragment-ordered ones (fused_matmuls +
// 5), and every output is the bits of its plain matmul, in the GEMV (1 and 20 rows) and the
// GEMM (70).
TEST_F(CudaBf16, SharedXFusedEqualsPlainMatmuls) {
  auto rng = test_rng();
  const int64_t n_in = 2048;
  for (const int64_t n_tok : {1, 20, 70}) {
    SCOPED_TRACE(n_tok);
    DeviceArena arena(*be_);
    const Tensor x =
        arena.from_host(random_floats(rng, static_cast<size_t>(n_in * n_tok), -3.0f, 3.0f),
                        GgmlType::F32, n_in, n_tok);
    const Tensor bias = arena.from_host(random_floats(rng, 64), GgmlType::F32, 64);
    const auto frag = [&](GgmlType t, int64_t n_out) {
      return arena.matmul_weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
    };
    const GgmlType q4 = GgmlType::Q4_K, q5 = GgmlType::Q5_K, q6 = GgmlType::Q6_K,
                   q8 = GgmlType::Q8_0, bf = GgmlType::BF16;
    const std::vector<Backend::MatmulOut> outs = {
        {frag(q8, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)},
        {frag(q4, 208), Tensor{}, arena.poisoned(GgmlType::F32, 208, n_tok)},
        {frag(q6, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)},
        {frag(q4, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)},
        {arena.weights(random_weights(rng, GgmlType::Q8_0, n_in, 96), GgmlType::Q8_0, n_in, 96),
         Tensor{}, arena.poisoned(GgmlType::F32, 96, n_tok)},
        {frag(q6, 160), Tensor{}, arena.poisoned(GgmlType::F32, 160, n_tok)},
        {frag(q4, 48), Tensor{}, arena.poisoned(GgmlType::F32, 48, n_tok)},
        {frag(q8, 144), Tensor{}, arena.poisoned(GgmlType::F32, 144, n_tok)},
        {frag(bf, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)},
        {frag(bf, 144), Tensor{}, arena.poisoned(GgmlType::F32, 144, n_tok)},
        {frag(q5, 160), Tensor{}, arena.poisoned(GgmlType::F32, 160, n_tok)},
        {frag(q5, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)}};
    const long fused_before = be_->fused_matmuls();
    be_->matmul_shared_x(x, outs);
    EXPECT_EQ(be_->fused_matmuls() - fused_before, 5);
    ASSERT_NO_FATAL_FAILURE(expect_plain_bits(*be_, arena, x, outs));
  }
}

// matmul_shared_x over matrices of two types (two Q4_K or Q5_K beside two Q6_K, in either order;
// a bias on one of each): one pair launch for 1-8 rows (fused_matmuls + 1), a launch a type past
// that (20 rows: + 2), and every output the bits of its plain matmul either way.
TEST_F(CudaBf16, PairLaunchEqualsPlainMatmuls) {
  auto rng = test_rng();
  const int64_t n_in = 3072;
  for (const GgmlType qk : {GgmlType::Q4_K, GgmlType::Q5_K})
    for (const bool v_first : {false, true})
      for (const int64_t n_tok : {1, 5, 8, 20}) {
        SCOPED_TRACE(testing::Message()
                     << type_name(qk) << " v_first " << v_first << " rows " << n_tok);
        DeviceArena arena(*be_);
        const Tensor x =
            arena.from_host(random_floats(rng, static_cast<size_t>(n_in * n_tok), -3.0f, 3.0f),
                            GgmlType::F32, n_in, n_tok);
        const Tensor bias = arena.from_host(random_floats(rng, 64), GgmlType::F32, 64);
        const auto frag = [&](GgmlType t, int64_t n_out) {
          return arena.matmul_weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
        };
        std::vector<Backend::MatmulOut> outs = {
            {frag(qk, 208), Tensor{}, arena.poisoned(GgmlType::F32, 208, n_tok)},
            {frag(qk, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)}};
        const std::vector<Backend::MatmulOut> v = {
            {frag(GgmlType::Q6_K, 96), Tensor{}, arena.poisoned(GgmlType::F32, 96, n_tok)},
            {frag(GgmlType::Q6_K, 64), bias, arena.poisoned(GgmlType::F32, 64, n_tok)}};
        outs.insert(v_first ? outs.begin() : outs.end(), v.begin(), v.end());
        const long fused_before = be_->fused_matmuls();
        be_->matmul_shared_x(x, outs);
        EXPECT_EQ(be_->fused_matmuls() - fused_before, n_tok <= 8 ? 1 : 2);
        ASSERT_NO_FATAL_FAILURE(expect_plain_bits(*be_, arena, x, outs));
      }
}

// Shapes the kernels do not take stay in GGUF order (and on the int8 path); other types too.
TEST_F(CudaBf16, OnlyShapesItTakesAreRepacked) {
  auto rng = test_rng();
  DeviceArena arena(*be_);
  EXPECT_EQ(
      arena.matmul_weights(random_weights(rng, GgmlType::Q4_K, 1536, 64), GgmlType::Q4_K, 1536, 64)
          .buf->layout,
      WeightLayout::kGguf);  // n_in not whole 1024-input slices
  EXPECT_EQ(
      arena.matmul_weights(random_weights(rng, GgmlType::Q6_K, 4096, 40), GgmlType::Q6_K, 4096, 40)
          .buf->layout,
      WeightLayout::kGguf);  // n_out not whole 16-row tiles
  EXPECT_EQ(
      arena.matmul_weights(random_weights(rng, GgmlType::Q4_0, 1024, 64), GgmlType::Q4_0, 1024, 64)
          .buf->layout,
      WeightLayout::kGguf);  // a type without a fragment form
  const auto layout_of = [&](GgmlType t, int64_t n_in) {
    return arena.matmul_weights(random_weights(rng, t, n_in, 16), t, n_in, 16).buf->layout;
  };
  // Q8_0's GEMV ring leaves room for fourteen slices (gemv_smem), not fifteen; BF16's (two slots
  // of 8192 bytes a warp) for twelve.
  EXPECT_EQ(layout_of(GgmlType::Q8_0, 14336), WeightLayout::kFrag);
  EXPECT_EQ(layout_of(GgmlType::Q8_0, 15360), WeightLayout::kGguf);
  EXPECT_EQ(layout_of(GgmlType::BF16, 12288), WeightLayout::kFrag);
  EXPECT_EQ(layout_of(GgmlType::BF16, 13312), WeightLayout::kGguf);
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K,
                           GgmlType::Q8_0, GgmlType::BF16})
    EXPECT_EQ(arena.matmul_weights(random_weights(rng, t, 1024, 64), t, 1024, 64).buf->layout,
              WeightLayout::kFrag)
        << type_name(t);
}

// matmul_glu: the GLU stored from the GEMV's epilogue (a block's gate tile held, then its up
// tile) against matmul_shared_x and the GLU op, bit for bit: every format, both kinds, one group
// of rows to four, a launch whose blocks take several pairs; 33 rows take the two ops.
TEST_F(CudaBf16, MatmulGluEqualsTheOps) {
  auto rng = test_rng();
  struct Case {
    GgmlType type;
    int64_t n_in, n_out, n_tok;
    GluKind kind;
    bool fuses;
  };
  const GluKind silu = GluKind::kSwiGLU, gelu = GluKind::kGeGLU;
  std::vector<Case> cases;
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K,
                           GgmlType::Q8_0, GgmlType::BF16}) {
    cases.push_back({t, 4096, 96, 1, silu, true});  // decode
    cases.push_back({t, 2048, 64, 8, gelu, true});
  }
  cases.push_back({GgmlType::Q4_K, 1024, 12288, 1, silu, true});  // 768 pairs: > a wave of blocks
  cases.push_back({GgmlType::Q8_0, 1024, 48, 20, silu, true});    // four groups of 8 rows
  cases.push_back({GgmlType::Q6_K, 3072, 32, 13, gelu, true});    // two groups
  cases.push_back({GgmlType::Q4_K, 1024, 64, 33, silu, false});   // the GEMM: the two ops
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << type_name(c.type) << " " << c.n_tok << " x " << c.n_in << " -> " << c.n_out);
    DeviceArena arena(*be_);
    const auto gb = random_weights(rng, c.type, c.n_in, c.n_out);
    const auto ub = random_weights(rng, c.type, c.n_in, c.n_out);
    const Tensor gw = arena.matmul_weights(gb, c.type, c.n_in, c.n_out);
    const Tensor uw = arena.matmul_weights(ub, c.type, c.n_in, c.n_out);
    const Tensor x =
        arena.from_host(random_floats(rng, static_cast<size_t>(c.n_in * c.n_tok), -2.0f, 2.0f),
                        GgmlType::F32, c.n_in, c.n_tok);
    const Tensor gate = arena.poisoned(GgmlType::F32, c.n_out, c.n_tok);
    const Tensor up = arena.poisoned(GgmlType::F32, c.n_out, c.n_tok);
    const long before = be_->fused_glus();
    be_->matmul_glu(x, gw, uw, c.kind, gate, up);
    EXPECT_EQ(be_->fused_glus() - before, c.fuses ? 1 : 0);
    const auto got = arena.download<float>(gate);
    const Tensor gate2 = arena.poisoned(GgmlType::F32, c.n_out, c.n_tok);
    const Tensor up2 = arena.poisoned(GgmlType::F32, c.n_out, c.n_tok);
    const Backend::MatmulOut outs[] = {{gw, Tensor{}, gate2}, {uw, Tensor{}, up2}};
    be_->matmul_shared_x(x, outs);
    be_->glu(gate2, up2, c.kind, gate2);
    const auto want = arena.download<float>(gate2);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(float_bits(got[i]), float_bits(want[i]))
          << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

// The wgmma GEMM (CudaBackendConfig::bf16_wgmma_rows, cuda_bf16_wgmma.cuh) for BF16 calls of 33
// rows and more whose matrices have whole 128-row blocks: the GEMV's bits for every row (the
// canonical chain on wgmma: docs/CUDA.md stage 53), near the double reference, and the mma.sync
// GEMM's bits where a launch falls back to it.
class CudaBf16Wgmma : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
    CudaBackendConfig cfg;
    cfg.bf16_matmul = true;  // every type on the fragment layouts
    cfg.bf16_q8_0 = true;
    cfg.bf16_q5_k = true;
    cfg.bf16_q3_k = true;
    cfg.bf16_wgmma_rows = 33;
    cfg.bf16_wgmma_quant = true;
    be_ = std::make_unique<CudaBackend>(cfg);
  }
  std::unique_ptr<CudaBackend> be_;
};

// Row 3 alone (the GEMV), then inside 33, 40 (one partial tile; its cluster peer past the rows),
// 130, 200 and 300 rows (an odd count of tiles: a padding block wholly past the rows), for one to
// twelve slices and one or three blocks of weight rows.
TEST_F(CudaBf16Wgmma, RowsAreTheGemvsBitForBit) {
  auto rng = test_rng();
  for (const int64_t n_in : {1024, 4096, 12288})
    for (const int64_t n_out : {128, 384}) {
      SCOPED_TRACE(testing::Message() << "n_in " << n_in << " n_out " << n_out);
      DeviceArena arena(*be_);
      const Tensor w = arena.matmul_weights(random_weights(rng, GgmlType::BF16, n_in, n_out),
                                            GgmlType::BF16, n_in, n_out);
      ASSERT_EQ(w.buf->layout, WeightLayout::kFrag);
      const int64_t before = cuda::bf16_wgmma_launches();
      expect_row_batch_invariant(*be_, arena, w,
                                 random_floats(rng, static_cast<size_t>(n_in * 300), -3.0f, 3.0f),
                                 {33, 40, 130, 200, 300});
      EXPECT_EQ(cuda::bf16_wgmma_launches() - before, 5);  // every call of 33 rows and more
    }
}

// The K-quants (CudaBackendConfig::bf16_wgmma_quant): each consumer warp dequantizes its tile's
// fragments from the copied codes, header and high words as the mma.sync GEMM does, so every row
// is the GEMV's bits; at 256 inputs a block of each layout's four groups (Q6_K's and Q3_K's high
// words by group pair, Q5_K's and Q3_K's by block), at 1024 and 4096 one and four slices. Q8_0
// stays on the mma.sync GEMM (its per-block scale), bit for bit too.
TEST_F(CudaBf16Wgmma, QuantizedRowsAreTheGemvsBitForBit) {
  auto rng = test_rng();
  for (const GgmlType t :
       {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q8_0})
    for (const int64_t n_in : {1024, 4096}) {
      SCOPED_TRACE(testing::Message() << type_name(t) << " n_in " << n_in);
      const int64_t n_out = 256;
      DeviceArena arena(*be_);
      const Tensor w = arena.matmul_weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
      ASSERT_EQ(w.buf->layout, WeightLayout::kFrag);
      const int64_t before = cuda::bf16_wgmma_launches();
      expect_row_batch_invariant(*be_, arena, w,
                                 random_floats(rng, static_cast<size_t>(n_in * 300), -3.0f, 3.0f),
                                 {33, 130, 300});
      EXPECT_EQ(cuda::bf16_wgmma_launches() - before, t == GgmlType::Q8_0 ? 0 : 3);
    }
}

// The same shapes near the double reference of the bf16-rounded weights and x (the bound of
// expect_near_reference), a bias on one.
TEST_F(CudaBf16Wgmma, QuantizedMatchesTheReference) {
  auto rng = test_rng();
  const int64_t before = cuda::bf16_wgmma_launches();
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K})
    expect_near_reference(*be_, rng, t, 2048, 128, 70, t == GgmlType::Q6_K);
  EXPECT_EQ(cuda::bf16_wgmma_launches() - before, 4);
}

// With bf16_wgmma_quant off the K-quants take the mma.sync GEMM and BF16 still takes wgmma.
TEST(CudaBf16WgmmaSwitch, QuantOffKeepsTheKQuantsOnMmaSync) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  CudaBackendConfig cfg;
  cfg.bf16_wgmma_rows = 33;
  cfg.bf16_wgmma_quant = false;
  CudaBackend be(cfg);
  auto rng = test_rng();
  for (const GgmlType t : {GgmlType::Q4_K, GgmlType::BF16}) {
    SCOPED_TRACE(type_name(t));
    const int64_t before = cuda::bf16_wgmma_launches();
    expect_near_reference(be, rng, t, 1024, 128, 40, false);
    EXPECT_EQ(cuda::bf16_wgmma_launches() - before, t == GgmlType::BF16 ? 1 : 0);
  }
}

TEST_F(CudaBf16Wgmma, MatchesTheBf16Reference) {
  auto rng = test_rng();
  const int64_t before = cuda::bf16_wgmma_launches();
  expect_near_reference(*be_, rng, GgmlType::BF16, 2048, 256, 70, true);  // a bias
  expect_near_reference(*be_, rng, GgmlType::BF16, 12288, 128, 140, false);
  EXPECT_EQ(cuda::bf16_wgmma_launches() - before, 2);
}

// matmul_shared_x over BF16 matrices of whole blocks (one wgmma launch each) and over a group with
// a 144-row matrix (the whole launch on the mma.sync GEMM): every output the bits of its plain
// matmul, which takes wgmma for the 256- and 128-row matrices either way.
TEST_F(CudaBf16Wgmma, SharedXPartsEqualPlainMatmuls) {
  auto rng = test_rng();
  const int64_t n_in = 2048, n_tok = 70;
  DeviceArena arena(*be_);
  const Tensor x =
      arena.from_host(random_floats(rng, static_cast<size_t>(n_in * n_tok), -3.0f, 3.0f),
                      GgmlType::F32, n_in, n_tok);
  const Tensor bias = arena.from_host(random_floats(rng, 256), GgmlType::F32, 256);
  const auto frag = [&](int64_t n_out) {
    return arena.matmul_weights(random_weights(rng, GgmlType::BF16, n_in, n_out), GgmlType::BF16,
                                n_in, n_out);
  };
  for (const int64_t odd : {int64_t{128}, int64_t{144}}) {
    SCOPED_TRACE(odd);
    const std::vector<Backend::MatmulOut> outs = {
        {frag(256), bias, arena.poisoned(GgmlType::F32, 256, n_tok)},
        {frag(odd), Tensor{}, arena.poisoned(GgmlType::F32, odd, n_tok)},
        {frag(128), Tensor{}, arena.poisoned(GgmlType::F32, 128, n_tok)}};
    const int64_t before = cuda::bf16_wgmma_launches();
    be_->matmul_shared_x(x, outs);
    EXPECT_EQ(cuda::bf16_wgmma_launches() - before, odd == 128 ? 3 : 0);
    ASSERT_NO_FATAL_FAILURE(expect_plain_bits(*be_, arena, x, outs));
  }
}

using CudaBf16DeathTest = CudaBf16;

TEST_F(CudaBf16DeathTest, GetRowsRefusesTheLayout) {
  auto rng = test_rng();
  DeviceArena arena(*be_);
  const Tensor table =
      arena.matmul_weights(random_weights(rng, GgmlType::Q4_K, 1024, 32), GgmlType::Q4_K, 1024, 32);
  const Tensor ids = arena.from_host(std::vector<int32_t>{1}, GgmlType::I32, 1);
  const Tensor out = arena.poisoned(GgmlType::F32, 1024, 1);
  EXPECT_DEATH(be_->get_rows(table, ids, out), "stored for matmuls only");
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
