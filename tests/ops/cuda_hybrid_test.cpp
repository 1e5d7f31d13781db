// CUDA ops of the MoE and hybrid models vs the CPU backend: moe_route, matmul_id,
// moe_route_matmul, moe_combine, rms_norm_gated, mul_sigmoid, on fresh random inputs (seed
// printed; TEMPO9_TEST_SEED reproduces), outputs NaN-poisoned. The Gated DeltaNet ops are in
// cuda_gdn_test.cpp, the whole hybrid reference models in cuda_model_test.cpp (MoeHybrid/).
// Compiled to nothing without CUDA; on a CUDA build with no GPU the tests fail (they never skip).
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "model/model.h"
#include "ops_test_util.h"
#include "quant/dequantize.h"
#include "quant/half.h"

namespace t9::test {
namespace {

using namespace cuda_util;

class CudaHybrid : public cuda_util::CudaVsCpu {};

// ---- moe_route ----

// Logits on a grid of 1/16 (exact in float; neighbours' probabilities differ by e^(1/16), far
// beyond rounding, so both backends must pick the same ids) plus exact ties: in every third row
// the largest logit is copied to another expert (the lower index must come first).
std::vector<float> router_logits(std::mt19937_64& rng, int64_t n, int64_t n_expert) {
  std::vector<float> out(static_cast<size_t>(n * n_expert));
  std::vector<int> perm(static_cast<size_t>(n_expert));
  for (int64_t r = 0; r < n; ++r) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    float* row = &out[static_cast<size_t>(r * n_expert)];
    for (int64_t e = 0; e < n_expert; ++e)
      row[e] = static_cast<float>(perm[static_cast<size_t>(e)] - n_expert / 2) / 16.0f;
    if (r % 3 == 0) {
      const int64_t top = std::max_element(row, row + n_expert) - row;
      row[(top + 1 + static_cast<int64_t>(rng() % (n_expert - 1))) % n_expert] = row[top];
    }
  }
  return out;
}

TEST_F(CudaHybrid, MoeRouteMatchesCpu) {
  auto rng = test_rng();
  struct Case {
    int64_t n_expert;
    int k;
    bool normalize;
  };
  const int64_t n = 37;
  // 512 experts, top-10 (Qwen3-Next): more than one batch of loads per lane in the kernel.
  for (const Case& c : {Case{8, 2, true}, Case{64, 8, false}, Case{128, 8, true},
                        Case{256, 1, true}, Case{60, 60, false}, Case{512, 10, true}}) {
    SCOPED_TRACE(fmt::format("{} experts, k {}, normalize {}", c.n_expert, c.k, c.normalize));
    const auto logits = router_logits(rng, n, c.n_expert);
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::vector<float>> wts;
    for (Backend* be : {static_cast<Backend*>(be_.get()), static_cast<Backend*>(&cpu_)}) {
      DeviceArena arena(*be);
      const Tensor it = arena.poisoned(GgmlType::I32, c.k, n);
      const Tensor wt = arena.poisoned(GgmlType::F32, c.k, n);
      be->moe_route(arena.from_host(logits, GgmlType::F32, c.n_expert, n), c.k, c.normalize, it,
                    wt);
      ids.push_back(arena.download<int32_t>(it));
      wts.push_back(arena.download<float>(wt));
    }
    EXPECT_EQ(ids[0], ids[1]);
    // p = exp(x - max) / sum: CUDA's expf is within 2 ulp, glibc's within 1; the double sum,
    // the float reciprocal and product round once each side; normalising divides by a float sum
    // of k terms (k roundings). So each side is within (6 + k) u of exact, relatively.
    const double rel = 2.0 * (6 + c.k) * kU;
    for (size_t i = 0; i < wts[0].size(); ++i)
      ASSERT_LE(std::fabs(wts[0][i] - wts[1][i]), rel * std::fabs(wts[1][i]))
          << "row " << i / c.k << " rank " << i % c.k;
  }
}

// A NaN logit makes its row's p all NaN (the sum is NaN): that row's ids stay in range, and the
// other rows of the batch still equal the CPU's exactly (one row's NaN does not leak into the
// block's or warp's neighbours).
TEST_F(CudaHybrid, MoeRouteNanRowLeavesOtherRowsAlone) {
  auto rng = test_rng();
  const int64_t n = 9, n_expert = 256;
  const int k = 8;
  auto logits = router_logits(rng, n, n_expert);
  const int64_t nan_row = 4;
  logits[static_cast<size_t>(nan_row * n_expert + 17)] = std::nanf("");
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> wts;
  for (Backend* be : {static_cast<Backend*>(be_.get()), static_cast<Backend*>(&cpu_)}) {
    DeviceArena arena(*be);
    const Tensor it = arena.poisoned(GgmlType::I32, k, n);
    const Tensor wt = arena.poisoned(GgmlType::F32, k, n);
    be->moe_route(arena.from_host(logits, GgmlType::F32, n_expert, n), k, true, it, wt);
    ids.push_back(arena.download<int32_t>(it));
    wts.push_back(arena.download<float>(wt));
  }
  for (int64_t r = 0; r < n; ++r) {
    for (int j = 0; j < k; ++j) {
      const size_t i = static_cast<size_t>(r * k + j);
      ASSERT_GE(ids[0][i], 0) << "row " << r;
      ASSERT_LT(ids[0][i], n_expert) << "row " << r;
      if (r == nan_row) continue;
      EXPECT_EQ(ids[0][i], ids[1][i]) << "row " << r << " rank " << j;
      // Within (6 + k) u of exact on each side, as in MoeRouteMatchesCpu.
      EXPECT_LE(std::fabs(wts[0][i] - wts[1][i]), 2.0 * (6 + k) * kU * std::fabs(wts[1][i]));
    }
  }
}

// ---- matmul_id ----

// Expert e of [n_expert, n_out, n_in] weights as a 2-D tensor (what matmul_id multiplies by).
struct IdCase {
  int64_t n, k, xk;
  bool distinct;  // each token's k experts distinct (a router's); else repeats allowed
};

std::vector<int32_t> random_ids(std::mt19937_64& rng, const IdCase& c, int n_expert) {
  std::vector<int32_t> ids(static_cast<size_t>(c.n * c.k));
  std::vector<int32_t> perm(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < c.n; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t j = 0; j < c.k; ++j)
      ids[static_cast<size_t>(t * c.k + j)] =
          c.distinct ? perm[static_cast<size_t>(j)] : static_cast<int32_t>(rng() % n_expert);
  }
  return ids;
}

// matmul_id on CUDA: (1) every (token, rank) row is bit for bit CUDA's dense matmul of that x
// row with its expert's matrix (grouping must not change a row's arithmetic); (2) within
// tests/ops/matmul_test.cpp's bound of a double reference over the dequantized weights and the
// unrounded x: per 32-block the int8 activation rounding moves the dot by at most amax/254 *
// sum|w| (1% slack), plus (n_in + 2) u (sum|w x| + |y|) of float accumulation in any order;
// (3) within twice that of the CPU's matmul_id (each side is within the bound of the reference).
void check_matmul_id(CudaBackend& be, CpuBackend& cpu, std::mt19937_64& rng, GgmlType t,
                     const IdCase& c, int64_t n_in = 256) {
  const int64_t n_out = 40, n_expert = 6;
  const auto wb = random_weights(rng, t, n_in, n_out * n_expert);
  const auto x = random_floats(rng, static_cast<size_t>(c.n * c.xk * n_in), -2.0f, 2.0f);
  const auto ids = random_ids(rng, c, n_expert);
  std::vector<float> got[2];
  Backend* bes[2] = {&be, &cpu};
  for (int side = 0; side < 2; ++side) {
    DeviceArena arena(*bes[side]);
    const Tensor w = reshape(arena.weights(wb, t, n_in, n_out * n_expert), n_in, n_out, n_expert);
    const Tensor out = arena.poisoned(GgmlType::F32, n_out, c.k, c.n);
    bes[side]->matmul_id(w, arena.from_host(x, GgmlType::F32, n_in, c.xk, c.n),
                         arena.from_host(ids, GgmlType::I32, c.k, c.n), out);
    got[side] = arena.download<float>(out);
  }
  // (1) dense CUDA matmul of all x rows with each expert.
  DeviceArena arena(be);
  const Tensor w = reshape(arena.weights(wb, t, n_in, n_out * n_expert), n_in, n_out, n_expert);
  const Tensor xt = arena.from_host(x, GgmlType::F32, n_in, c.n * c.xk);
  std::vector<std::vector<float>> dense;
  for (int64_t e = 0; e < n_expert; ++e) {
    const Tensor y = arena.poisoned(GgmlType::F32, n_out, c.n * c.xk);
    be.matmul(expert(w, e), xt, Tensor{}, y);
    dense.push_back(arena.download<float>(y));
  }
  std::vector<float> wf(static_cast<size_t>(n_in * n_out * n_expert));
  dequantize_row(t, wb.data(), wf.data(), static_cast<int64_t>(wf.size()));
  double worst = 0.0;
  for (int64_t t_ = 0; t_ < c.n; ++t_) {
    for (int64_t j = 0; j < c.k; ++j) {
      const int32_t e = ids[static_cast<size_t>(t_ * c.k + j)];
      const int64_t xr = t_ * c.xk + (c.xk == 1 ? 0 : j);
      for (int64_t o = 0; o < n_out; ++o) {
        const float g = got[0][static_cast<size_t>((t_ * c.k + j) * n_out + o)];
        const float cp = got[1][static_cast<size_t>((t_ * c.k + j) * n_out + o)];
        ASSERT_EQ(float_bits(g), float_bits(dense[e][static_cast<size_t>(xr * n_out + o)]))
            << "tok " << t_ << " rank " << j << " out " << o;
        const float* wr = &wf[static_cast<size_t>((e * n_out + o) * n_in)];
        const float* xv = &x[static_cast<size_t>(xr * n_in)];
        double ref = 0.0, abs_sum = 0.0, q_bound = 0.0;
        for (int64_t b = 0; b < n_in / 32; ++b) {
          double amax = 0.0, wabs = 0.0;
          for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
            ref += static_cast<double>(wr[i]) * xv[i];
            abs_sum += std::fabs(static_cast<double>(wr[i]) * xv[i]);
            amax = std::max(amax, std::fabs(static_cast<double>(xv[i])));
            wabs += std::fabs(wr[i]);
          }
          if (traits(t).quantized) q_bound += 1.01 * amax / 254.0 * wabs;
        }
        const double bound = q_bound + (n_in + 2) * kU * (abs_sum + std::fabs(ref));
        ASSERT_LE(std::fabs(g - ref), bound) << "tok " << t_ << " rank " << j << " out " << o;
        ASSERT_LE(std::fabs(g - cp), 2 * bound) << "tok " << t_ << " rank " << j << " out " << o;
        worst = std::max(worst, std::fabs(g - ref) / bound);
      }
    }
  }
  EXPECT_GT(worst, 0.0) << "equal to the double reference everywhere: inputs not random?";
}

TEST_F(CudaHybrid, MatmulIdMatchesDenseMatmulAndCpu) {
  auto rng = test_rng();
  // Q4_0/Q8_0/Q6_K/Q3_K/Q5_K: staged int8 kernels; Q4_K: direct int8 kernel; Q5_1: stage-1
  // kernel (F32 activations); F16/F32: float kernel.
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::Q3_K, GgmlType::Q5_1, GgmlType::F16, GgmlType::F32}) {
    SCOPED_TRACE(type_name(t));
    // Decode (one token, 4 of 6 experts), the down projection's x [n, k, n_in] with repeated
    // experts, a batch where every expert gets several rows (tiles of 8 and partial): up to 256
    // pairs, the sliced types take the device route (one launch over the pairs); 80 x 4 = 320
    // pairs take the host-grouped route (tensor cores for experts with >= 16 rows).
    for (const IdCase& c : {IdCase{1, 4, 1, true}, IdCase{7, 2, 2, false}, IdCase{33, 4, 1, true},
                            IdCase{3, 6, 6, true}, IdCase{80, 4, 1, true}})
      check_matmul_id(*be_, cpu_, rng, t, c);
  }
}

// The device route's pairs at n_in 1024 (Q8_0's one-row tiles by pair; the cases above, at 256,
// take the short-row kernel): several tokens, 33 tokens over 6 experts, x per rank, repeated
// experts within a token: every pair the bits of its dense matmul.
TEST_F(CudaHybrid, MatmulIdPairsOfLongRowsEqualDense) {
  auto rng = test_rng();
  for (const IdCase& c : {IdCase{6, 4, 1, true}, IdCase{7, 2, 2, false}, IdCase{33, 4, 1, true}})
    check_matmul_id(*be_, cpu_, rng, GgmlType::Q8_0, c, 1024);
}

// A warm agent turn's expert down projection: few pairs per expert over short rows in the device
// sort's 16-row tiles (80 tokens x 4 ranks = 320 pairs over 48 experts: past the one-row route's
// 256 pairs, at most 8 per expert on average), where the grouped tensor-core kernel's blocks each
// take several 64-row weight tiles (300 outputs: five tiles, the last one partial) over 2 or 3
// chunks of 256 inputs. Every pair must be the bits of the dense matmul of its x row with its
// expert (80 or 320 rows: the plain tensor-core kernel), x per rank and shared; and two expert
// tensors fused in one launch (matmul_shared_x: a block's tiles within one part) the bits of
// each alone.
// One test per type: compute-sanitizer's racecheck takes one (scripts/device_test_ops.sh).
void check_short_rows_grouped(CudaBackend& be, GgmlType t) {
  auto rng = test_rng();
  const int64_t n_out = 300, n_expert = 48;
  for (const int64_t n_in : {512, 768}) {
    for (const IdCase& c : {IdCase{80, 4, 4, true}, IdCase{80, 4, 1, true}}) {
      SCOPED_TRACE(fmt::format("{} n_in {} x per rank {}", type_name(t), n_in, c.xk != 1));
      DeviceArena arena(be);
      const Tensor w = random_experts(arena, rng, t, n_in, n_out, n_expert);
      const auto x = random_floats(rng, static_cast<size_t>(c.n * c.xk * n_in), -2.0f, 2.0f);
      const auto ids = random_ids(rng, c, n_expert);
      const Tensor xid = arena.from_host(x, GgmlType::F32, n_in, c.xk, c.n);
      const Tensor idt = arena.from_host(ids, GgmlType::I32, c.k, c.n);
      const Tensor out = arena.poisoned(GgmlType::F32, n_out, c.k, c.n);
      be.matmul_id(w, xid, idt, out);
      const auto got = arena.download<float>(out);
      expect_pairs_equal_dense(be, arena, w, x, c.xk != 1, ids, c.k, got);
      if (c.xk != 1) continue;
      // Two parts of one type and shape over the same ids (the MoE block's gate and up).
      const Tensor w2 = random_experts(arena, rng, t, n_in, n_out, n_expert);
      const Tensor x2 = arena.from_host(x, GgmlType::F32, n_in, c.n);
      const Backend::MatmulOut outs[] = {
          {w, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.k, c.n), idt},
          {w2, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.k, c.n), idt}};
      const long fused_before = be.fused_matmuls();
      be.matmul_shared_x(x2, outs);
      EXPECT_EQ(be.fused_matmuls(), fused_before + 1);
      const Tensor alone = arena.poisoned(GgmlType::F32, n_out, c.k, c.n);
      be.matmul_id(w2, xid, idt, alone);
      const std::vector<float> want[2] = {got, arena.download<float>(alone)};
      for (int part = 0; part < 2; ++part) {
        const auto fused = arena.download<float>(outs[part].y);
        ASSERT_EQ(fused.size(), want[part].size());
        for (size_t i = 0; i < fused.size(); ++i)
          ASSERT_EQ(float_bits(fused[i]), float_bits(want[part][i]))
              << "part " << part << " element " << i;
      }
    }
  }
}

TEST_F(CudaHybrid, MatmulIdShortRowsGroupedQ8_0EqualsDense) {
  check_short_rows_grouped(*be_, GgmlType::Q8_0);
}
TEST_F(CudaHybrid, MatmulIdShortRowsGroupedQ4_KEqualsDense) {
  check_short_rows_grouped(*be_, GgmlType::Q4_K);
}
TEST_F(CudaHybrid, MatmulIdShortRowsGroupedQ6_KEqualsDense) {
  check_short_rows_grouped(*be_, GgmlType::Q6_K);
}
TEST_F(CudaHybrid, MatmulIdShortRowsGroupedQ3_KEqualsDense) {
  check_short_rows_grouped(*be_, GgmlType::Q3_K);
}
TEST_F(CudaHybrid, MatmulIdShortRowsGroupedQ5_KEqualsDense) {
  check_short_rows_grouped(*be_, GgmlType::Q5_K);
}

// The device sort over several of its chunks (1024 pairs each): 700 tokens x 4 ranks = 2800
// pairs, rank 0 of every token on expert 0 (so one expert's pairs recur in every group of 32 of
// every warp, the case where a pair's place carries counts across a warp's groups and across
// chunks), the other ranks random over 15 more. Every pair's row must be the bits of the dense
// matmul of its x row with its expert.
TEST_F(CudaHybrid, MatmulIdSortAcrossChunksEqualsDense) {
  auto rng = test_rng();
  const int64_t n_in = 256, n_out = 64, n_expert = 16, n = 700, k = 4;
  DeviceArena arena(*be_);
  const Tensor w = random_experts(arena, rng, GgmlType::Q8_0, n_in, n_out, n_expert);
  const auto x = random_floats(rng, static_cast<size_t>(n * n_in), -2.0f, 2.0f);
  std::vector<int32_t> ids(static_cast<size_t>(n * k));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = i % k == 0 ? 0 : 1 + static_cast<int32_t>(rng() % (n_expert - 1));
  const Tensor out = arena.poisoned(GgmlType::F32, n_out, k, n);
  be_->matmul_id(w, arena.from_host(x, GgmlType::F32, n_in, 1, n),
                 arena.from_host(ids, GgmlType::I32, k, n), out);
  expect_pairs_equal_dense(*be_, arena, w, x, false, ids, k, arena.download<float>(out));
}

// matmul_shared_x entries with ids (the MoE block's expert gate/up beside the shared expert's
// matmuls, x rounded once): each output is the bits of a plain matmul_id / matmul of the same x,
// for decode (the one-row route, which takes the shared rounding; up to 8 tokens the two plain
// matmuls ride in the experts' launch as its plain rows: the short-row kernel at n_in 256, the
// one-row tiles or gemv_coal_kernel at 1024) and a batch of 80 tokens x 4
// ranks (the sorted tensor-core route, which rounds rows in its own order; the two expert
// tensors run as one launch, and so do the two plain ones).
TEST_F(CudaHybrid, MatmulSharedXWithIdsEqualsMatmulId) {
  auto rng = test_rng();
  const int64_t n_out = 40, n_expert = 6;
  for (const int64_t n_in : {256, 1024}) {
    for (GgmlType t :
         {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q5_K}) {
      for (const IdCase& c :
           {IdCase{1, 4, 1, true}, IdCase{6, 4, 1, true}, IdCase{80, 4, 1, true}}) {
        SCOPED_TRACE(fmt::format("{} n_in {} n {}", type_name(t), n_in, c.n));
        DeviceArena arena(*be_);
        const Tensor wg = random_experts(arena, rng, t, n_in, n_out, n_expert);
        const Tensor wu = random_experts(arena, rng, t, n_in, n_out, n_expert);
        const Tensor d = arena.weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
        const Tensor d2 = arena.weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
        const Tensor x =
            arena.from_host(random_floats(rng, static_cast<size_t>(c.n * n_in), -2.0f, 2.0f),
                            GgmlType::F32, n_in, c.n);
        const Tensor ids = arena.from_host(random_ids(rng, c, n_expert), GgmlType::I32, c.k, c.n);
        const Backend::MatmulOut outs[] = {
            {wg, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.k, c.n), ids},
            {d, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.n)},
            {wu, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.k, c.n), ids},
            {d2, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.n)}};
        const long fused_before = be_->fused_matmuls();
        be_->matmul_shared_x(x, outs);
        EXPECT_EQ(be_->fused_matmuls(), fused_before + (c.n <= 8 ? 1 : 2));
        expect_each_output_alone(*be_, arena, x, outs);
      }
    }
  }
}

// moe_route_matmul (the MoE block's routing, then its gate/up beside the shared expert's): the
// ids and weights are the bits of moe_route's and every output the bits of its plain matmul_id /
// matmul with those ids. Up to 256 pairs over at most 256 experts the experts' launch routes its
// own tokens (fused_routes counts it: the short-row kernel at n_in 256, the one-row tiles or
// gemv_coal_kernel at 1024, Q4_K's direct kernel); 80 tokens (the sorted route) and 300 experts
// take moe_route's own launch first. (A backend of its own, the switch named: it is on by default
// since run 266.) 512 outputs at top 8 (the 35B's) spread a pair's rows over many blocks, whose
// warps stop routing after their own rank (only block x 0 stores the weights).
TEST_F(CudaHybrid, MoeRouteMatmulEqualsRouteThenMatmul) {
  auto rng = test_rng();
  CudaBackendConfig fused_cfg;
  fused_cfg.fuse_route = true;
  CudaBackend fused_be(fused_cfg);
  struct Case {
    int64_t n, n_expert, n_in;
    bool normalize;
    int64_t n_out = 40;
    int k = 4;
  };
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (const Case& c :
         {Case{1, 256, 256, true}, Case{1, 64, 1024, false}, Case{6, 128, 1024, true},
          Case{8, 60, 256, true}, Case{80, 64, 256, true}, Case{2, 300, 256, true},
          Case{1, 64, 256, true, 512, 8}, Case{2, 64, 256, false, 512, 8}}) {
      const int64_t n_out = c.n_out;
      const int k = c.k;
      SCOPED_TRACE(fmt::format("{} n {} experts {} n_in {} n_out {} k {}", type_name(t), c.n,
                               c.n_expert, c.n_in, n_out, k));
      DeviceArena arena(fused_be);
      const Tensor wg = random_experts(arena, rng, t, c.n_in, n_out, c.n_expert);
      const Tensor wu = random_experts(arena, rng, t, c.n_in, n_out, c.n_expert);
      const Tensor d = arena.weights(random_weights(rng, t, c.n_in, n_out), t, c.n_in, n_out);
      const Tensor d2 = arena.weights(random_weights(rng, t, c.n_in, n_out), t, c.n_in, n_out);
      const Tensor x =
          arena.from_host(random_floats(rng, static_cast<size_t>(c.n * c.n_in), -2.0f, 2.0f),
                          GgmlType::F32, c.n_in, c.n);
      const Tensor logits =
          arena.from_host(router_logits(rng, c.n, c.n_expert), GgmlType::F32, c.n_expert, c.n);
      const Backend::MoeRoute r{logits, k, c.normalize, arena.poisoned(GgmlType::I32, k, c.n),
                                arena.poisoned(GgmlType::F32, k, c.n)};
      const Backend::MatmulOut outs[] = {
          {wg, Tensor{}, arena.poisoned(GgmlType::F32, n_out, k, c.n), r.ids},
          {d, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.n)},
          {wu, Tensor{}, arena.poisoned(GgmlType::F32, n_out, k, c.n), r.ids},
          {d2, Tensor{}, arena.poisoned(GgmlType::F32, n_out, c.n)}};
      const int64_t fused_before = fused_be.fused_routes();
      fused_be.moe_route_matmul(r, x, outs);
      const bool fused = c.n * k <= 256 && c.n_expert <= 256;
      EXPECT_EQ(fused_be.fused_routes(), fused_before + (fused ? 1 : 0));
      const Tensor ids = arena.poisoned(GgmlType::I32, k, c.n);
      const Tensor wts = arena.poisoned(GgmlType::F32, k, c.n);
      fused_be.moe_route(logits, k, c.normalize, ids, wts);
      EXPECT_EQ(arena.download<int32_t>(r.ids), arena.download<int32_t>(ids));
      const auto w_got = arena.download<float>(r.weights), w_want = arena.download<float>(wts);
      ASSERT_EQ(w_got.size(), w_want.size());
      for (size_t i = 0; i < w_got.size(); ++i)
        ASSERT_EQ(float_bits(w_got[i]), float_bits(w_want[i])) << "weight " << i;
      expect_each_output_alone(fused_be, arena, x, outs);
    }
  }
}

// An expert id outside [0, n_expert) on either device route: flagged, reported at sync().
TEST_F(CudaHybrid, MatmulIdBadExpertFailsAtSync) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto rng = test_rng();
  const auto wb = random_weights(rng, GgmlType::Q8_0, 256, 40 * 6);
  EXPECT_DEATH(
      {
        CudaBackend be;
        DeviceArena arena(be);
        const Tensor w = reshape(arena.weights(wb, GgmlType::Q8_0, 256, 40 * 6), 256, 40, 6);
        const Tensor out = arena.poisoned(GgmlType::F32, 40, 2, 1);
        be.matmul_id(w, arena.from_host(std::vector<float>(256, 1.0f), GgmlType::F32, 256, 1, 1),
                     arena.from_host(std::vector<int32_t>{1, 6}, GgmlType::I32, 2, 1), out);
        be.sync();
      },
      "bad indices");
  // 300 pairs: the device-sorted tensor-core route.
  EXPECT_DEATH(
      {
        CudaBackend be;
        DeviceArena arena(be);
        const Tensor w = reshape(arena.weights(wb, GgmlType::Q8_0, 256, 40 * 6), 256, 40, 6);
        std::vector<int32_t> ids(300, 2);
        ids[123] = -1;
        const Tensor out = arena.poisoned(GgmlType::F32, 40, 1, 300);
        be.matmul_id(
            w, arena.from_host(std::vector<float>(256 * 300, 1.0f), GgmlType::F32, 256, 1, 300),
            arena.from_host(ids, GgmlType::I32, 1, 300), out);
        be.sync();
      },
      "bad indices");
}

// ---- moe_combine, mul_sigmoid ----

TEST_F(CudaHybrid, MoeCombineMatchesCpu) {
  auto rng = test_rng();
  const int64_t n = 19, d = 200;
  for (int64_t k : {1, 8, 10}) {  // 10: past one batch of the kernel's loads
    const auto y = random_floats(rng, static_cast<size_t>(n * k * d), -3.0f, 3.0f);
    const auto w = random_floats(rng, static_cast<size_t>(n * k), 0.0f, 1.0f);
    std::vector<float> got[2];
    Backend* bes[2] = {be_.get(), &cpu_};
    for (int side = 0; side < 2; ++side) {
      DeviceArena arena(*bes[side]);
      const Tensor out = arena.poisoned(GgmlType::F32, d, n);
      bes[side]->moe_combine(arena.from_host(y, GgmlType::F32, d, k, n),
                             arena.from_host(w, GgmlType::F32, k, n), out);
      got[side] = arena.download<float>(out);
    }
    // k products summed in rank order: each side within 2k u sum_j |w_j y_j| of exact (one
    // rounding per product and per add; a fused multiply-add only drops one).
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < d; ++i) {
        double mag = 0.0;
        for (int64_t j = 0; j < k; ++j)
          mag += std::fabs(static_cast<double>(w[t * k + j]) * y[(t * k + j) * d + i]);
        const size_t at = static_cast<size_t>(t * d + i);
        ASSERT_LE(std::fabs(got[0][at] - got[1][at]), 4.0 * k * kU * mag) << "k " << k;
      }
  }
}

// The fused routed + shared-expert combination is the three ops it replaces, bit for bit: out and
// the gated shared rows (left in `shared`, as mul_sigmoid in place leaves them), with a per-row
// gate (the models' [n, 1]) and a per-element one, for 1 and 8 experts per token.
TEST_F(CudaHybrid, MoeCombineSharedEqualsTheThreeOps) {
  auto rng = test_rng();
  const int64_t n = 19, d = 200;
  for (int64_t k : {1, 8, 10}) {  // 10: past one batch of the kernel's loads
    for (int64_t gate_cols : {int64_t{1}, d}) {
      SCOPED_TRACE(fmt::format("k {} gate columns {}", k, gate_cols));
      const auto y = random_floats(rng, static_cast<size_t>(n * k * d), -3.0f, 3.0f);
      const auto w = random_floats(rng, static_cast<size_t>(n * k), 0.0f, 1.0f);
      const auto sh = random_floats(rng, static_cast<size_t>(n * d), -3.0f, 3.0f);
      const auto g = random_floats(rng, static_cast<size_t>(n * gate_cols), -4.0f, 4.0f);
      std::vector<float> out[2], shared[2];
      for (int fused = 0; fused < 2; ++fused) {
        DeviceArena arena(*be_);
        const Tensor yt = arena.from_host(y, GgmlType::F32, d, k, n);
        const Tensor wt = arena.from_host(w, GgmlType::F32, k, n);
        const Tensor st = arena.from_host(sh, GgmlType::F32, d, n);
        const Tensor gt = arena.from_host(g, GgmlType::F32, gate_cols, n);
        const Tensor ot = arena.poisoned(GgmlType::F32, d, n);
        if (fused) {
          be_->moe_combine_shared(yt, wt, st, gt, ot);
        } else {
          be_->moe_combine(yt, wt, ot);
          be_->mul_sigmoid(st, gt, st);
          be_->add(ot, st, ot);
        }
        out[fused] = arena.download<float>(ot);
        shared[fused] = arena.download<float>(st);
      }
      for (size_t i = 0; i < out[0].size(); ++i) {
        ASSERT_EQ(float_bits(out[1][i]), float_bits(out[0][i])) << "out element " << i;
        ASSERT_EQ(float_bits(shared[1][i]), float_bits(shared[0][i])) << "shared element " << i;
      }
    }
  }
}

// The fused gated norm is rms_norm then the SwiGLU by z, bit for bit, in place (the model's
// call) and out of place; rows of 128 (Qwen3.5's d_v: the output projection then takes the
// fused op's codes, and its product equals the composed ops' too), 96, 200 (not a multiple of
// 32: the composed ops) and 300 (past the fused kernel's 256: the composed ops).
TEST_F(CudaHybrid, RmsNormGatedEqualsTheTwoOps) {
  auto rng = test_rng();
  const int64_t rows = 36;  // 9 tokens of 4 value heads
  for (int64_t d : {128, 96, 200, 300}) {
    for (bool in_place : {true, false}) {
      SCOPED_TRACE(fmt::format("d {} in place {}", d, in_place));
      const auto x = random_floats(rng, static_cast<size_t>(rows * d), -3.0f, 3.0f);
      const auto z = random_floats(rng, x.size(), -4.0f, 4.0f);
      const auto w = random_floats(rng, static_cast<size_t>(d), 0.5f, 1.5f);
      const auto wq =  // d = 128 only: 4 heads of 128 are one row of the projection
          d == 128 ? random_weights(rng, GgmlType::Q8_0, 4 * d, 24) : std::vector<uint8_t>{};
      std::vector<float> out[2], proj[2];
      long reused[2] = {0, 0};
      for (int fused = 0; fused < 2; ++fused) {
        DeviceArena arena(*be_);
        const Tensor xt = arena.from_host(x, GgmlType::F32, d, rows);
        const Tensor zt = arena.from_host(z, GgmlType::F32, d, rows);
        const Tensor wt = arena.from_host(w, GgmlType::F32, d);
        const Tensor ot = in_place ? xt : arena.poisoned(GgmlType::F32, d, rows);
        if (fused)
          be_->rms_norm_gated(xt, wt, 1e-6f, zt, ot);
        else
          be_->Backend::rms_norm_gated(xt, wt, 1e-6f, zt, ot);
        if (d == 128) {  // the output projection over 4 value heads (rows of 4 d)
          const Tensor wp = arena.weights(wq, GgmlType::Q8_0, 4 * d, 24);
          const Tensor pt = arena.poisoned(GgmlType::F32, 24, rows / 4);
          const long before = be_->rounding_reuses();
          be_->matmul(wp, reshape(ot, 4 * d, rows / 4), Tensor{}, pt);
          reused[fused] = be_->rounding_reuses() - before;
          proj[fused] = arena.download<float>(pt);
        }
        out[fused] = arena.download<float>(ot);
      }
      for (size_t i = 0; i < out[0].size(); ++i)
        ASSERT_EQ(float_bits(out[1][i]), float_bits(out[0][i])) << "element " << i;
      for (size_t i = 0; i < proj[0].size(); ++i)
        ASSERT_EQ(float_bits(proj[1][i]), float_bits(proj[0][i])) << "projection " << i;
      if (d == 128) {  // both hand the projection their codes (the GLU's, the fused op's)
        EXPECT_EQ(reused[0], 1);
        EXPECT_EQ(reused[1], 1);
      }
    }
  }
}

TEST_F(CudaHybrid, MulSigmoidMatchesCpu) {
  auto rng = test_rng();
  const int64_t rows = 23, d = 96;
  const auto a = random_floats(rng, static_cast<size_t>(rows * d), -3.0f, 3.0f);
  for (bool per_row : {false, true}) {
    for (bool in_place : {false, true}) {
      const int64_t gd = per_row ? 1 : d;
      const auto g = random_floats(rng, static_cast<size_t>(rows * gd), -10.0f, 10.0f);
      std::vector<float> got[2];
      Backend* bes[2] = {be_.get(), &cpu_};
      for (int side = 0; side < 2; ++side) {
        DeviceArena arena(*bes[side]);
        const Tensor at = arena.from_host(a, GgmlType::F32, d, rows);
        const Tensor out = in_place ? at : arena.poisoned(GgmlType::F32, d, rows);
        bes[side]->mul_sigmoid(at, arena.from_host(g, GgmlType::F32, gd, rows), out);
        got[side] = arena.download<float>(out);
      }
      // exp within 2 ulp on CUDA, 1 in glibc (an ulp is up to 2 u relative), then 1 + e, the
      // division and the product round once each: CUDA within 7 u of exact, the CPU 5 u; 16 u.
      for (size_t i = 0; i < got[0].size(); ++i)
        ASSERT_LE(std::fabs(got[0][i] - got[1][i]), 16 * kU * std::fabs(got[1][i]))
            << "per_row " << per_row << " in_place " << in_place << " at " << i;
    }
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
