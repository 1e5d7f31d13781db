// The short-row GEMV (gemv_short_kernel, cuda_gemv_slice.cu: rows of at most 16 units, the MoE
// experts' down projections) over long grid-stride walks, where each warp's two staging buffers
// alternate many times: a warp's rows must give the bits of the same rows computed another way.
// Fresh random inputs per run (seed printed; TEMPO9_TEST_SEED reproduces), outputs NaN-poisoned.
// Compiled to nothing without CUDA; on a CUDA build with no GPU the tests fail (they never skip).
#ifdef TEMPO9_HAVE_CUDA

#include <cmath>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace t9::test {
namespace {

using namespace cuda_util;

class CudaShortRows : public cuda_util::CudaVsCpu {};

// Rows [first, first + n) of w as a matrix of their own (the view starts wherever the row does:
// 544-byte Q8_0 rows leave it off 16-byte boundaries, the staging's skew).
Tensor row_view(const Tensor& w, int64_t first, int64_t n) {
  Tensor v = w;
  v.offset = w.offset + static_cast<size_t>(first) * w.nb[1];
  v.ne[1] = n;
  v.nb[2] = v.nb[3] = static_cast<size_t>(n) * w.nb[1];
  return v;
}

// One activation row against 131,072 weight rows: more rows than the resident warps take in one
// pass, several times over (each warp walks many steps). Probed row ranges at
// the start, inside and at the end, each computed as its own short matrix (one step per warp),
// must give the same bits.
TEST_F(CudaShortRows, OneRowLongWalkEqualsRowViews) {
  auto rng = test_rng();
  struct Case {
    GgmlType t;
    int64_t n_in;  // 8 units (8 lanes a row) or 16 (16 lanes)
  };
  const int64_t n_out = 131072, probe = 300;
  for (const Case c : {Case{GgmlType::Q8_0, 512}, Case{GgmlType::Q8_0, 256},
                       Case{GgmlType::Q4_K, 1024}, Case{GgmlType::Q6_K, 512}}) {
    SCOPED_TRACE(fmt::format("{} n_in {}", type_name(c.t), c.n_in));
    DeviceArena arena(*be_);
    const Tensor w = arena.weights(random_weights(rng, c.t, c.n_in, n_out), c.t, c.n_in, n_out);
    const Tensor x = arena.from_host(random_floats(rng, static_cast<size_t>(c.n_in), -2.0f, 2.0f),
                                     GgmlType::F32, c.n_in, 1);
    const Tensor y = arena.poisoned(GgmlType::F32, n_out, 1);
    be_->matmul(w, x, Tensor{}, y);
    const auto got = arena.download<float>(y);
    for (const int64_t first : {int64_t{0}, int64_t{70001}, n_out - probe}) {
      const Tensor yv = arena.poisoned(GgmlType::F32, probe, 1);
      be_->matmul(row_view(w, first, probe), x, Tensor{}, yv);
      const auto want = arena.download<float>(yv);
      for (int64_t o = 0; o < probe; ++o)
        ASSERT_EQ(float_bits(got[static_cast<size_t>(first + o)]),
                  float_bits(want[static_cast<size_t>(o)]))
            << "row " << first + o;
    }
    ASSERT_FALSE(std::isnan(got[0]));
  }
}

// The 8-agent step's expert down projection: 8 tokens x 8 ranks = 64 pairs over 32 experts of
// 512 -> 2048 (Q8_0) by pair, the resident blocks shared by the pairs (each warp walks ~18
// steps). Every pair must be the bits of its expert's dense matmul over the 8 tokens (the 8-row
// tile kernel: another kernel, the same canonical order).
TEST_F(CudaShortRows, ExpertPairsLongWalkEqualDense) {
  auto rng = test_rng();
  const int64_t n_in = 512, n_out = 2048, n_expert = 32, n_tok = 8, k = 8;
  DeviceArena arena(*be_);
  const Tensor w = random_experts(arena, rng, GgmlType::Q8_0, n_in, n_out, n_expert);
  const auto x = random_floats(rng, static_cast<size_t>(n_tok * n_in), -2.0f, 2.0f);
  std::vector<int32_t> ids(static_cast<size_t>(n_tok * k));
  for (size_t i = 0; i < ids.size(); ++i)  // experts repeat across tokens, not within one
    ids[i] = static_cast<int32_t>((i / k * 5 + i % k * 3) % n_expert);
  const Tensor out = arena.poisoned(GgmlType::F32, n_out, k, n_tok);
  be_->matmul_id(w, arena.from_host(x, GgmlType::F32, n_in, 1, n_tok),
                 arena.from_host(ids, GgmlType::I32, k, n_tok), out);
  expect_pairs_equal_dense(*be_, arena, w, x, false, ids, k, arena.download<float>(out));
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
