// CUDA's MoE block fusions, each against the same backend's unfused ops (which
// tests/ops/cuda_hybrid_test.cpp checks against the CPU op by op): Backend::moe_down's decode-sized
// calls run as two launches (cuda_moe_down.cu) and must give `out` the bits of the composed ops
// (the base implementation: glu, matmul_id, glu, matmul, moe_combine(_shared)); the shared
// expert's gate/up ride in the experts' launch (SliceParts' plain rows). Fresh random inputs per
// run (seed printed; TEMPO9_TEST_SEED reproduces), outputs NaN-poisoned. Compiled to nothing
// without CUDA; on a CUDA build with no GPU the tests fail (they never skip).
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace t9::test {
namespace {

using namespace cuda_util;

class CudaMoeDown : public cuda_util::CudaVsCpu {};

struct DownCase {
  GgmlType type;
  int64_t n, k, fe, fs;  // fs 0: no shared expert
  bool gate_per_row;
};

// One token's k distinct experts of n_expert (a router's), the tokens' sets independent (so
// experts repeat across tokens).
std::vector<int32_t> router_ids(std::mt19937_64& rng, int64_t n, int64_t k, int n_expert) {
  std::vector<int32_t> ids(static_cast<size_t>(n * k)), perm(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy_n(perm.begin(), k, ids.begin() + t * k);
  }
  return ids;
}

// Decode calls: 1 and 2 tokens (the fused route's default limit), and 3-8 tokens with a shared
// expert of the experts' shape (CudaBackend::moe_down_pairs: both GLUs' codes in one launch, the
// shared rows as plain rows of the by-pair launch; short rows and, at 2048 inputs, the one-row
// tiles). n_out = 203: partial row blocks for 2 (16 units) and 4 (8 units) rows per warp.
void check_equals_composed(CudaBackend& be) {
  auto rng = test_rng();
  const int64_t d = 203;
  const int n_expert = 32;
  for (const DownCase& c : {DownCase{GgmlType::Q8_0, 1, 8, 512, 512, true},
                            DownCase{GgmlType::Q8_0, 2, 8, 512, 512, true},
                            DownCase{GgmlType::Q8_0, 2, 8, 512, 0, true},
                            DownCase{GgmlType::Q8_0, 2, 10, 256, 512, false},
                            DownCase{GgmlType::Q4_K, 1, 8, 512, 512, true},
                            DownCase{GgmlType::Q4_K, 2, 4, 1024, 256, false},
                            DownCase{GgmlType::Q6_K, 2, 8, 512, 512, true},
                            DownCase{GgmlType::Q6_K, 1, 8, 256, 0, true},
                            DownCase{GgmlType::Q8_0, 3, 8, 512, 512, true},
                            DownCase{GgmlType::Q8_0, 8, 8, 512, 512, false},
                            DownCase{GgmlType::Q8_0, 7, 8, 2048, 2048, true},
                            DownCase{GgmlType::Q4_K, 8, 4, 1024, 1024, true},
                            DownCase{GgmlType::Q6_K, 5, 8, 256, 256, false}}) {
    SCOPED_TRACE(fmt::format("{} n {} k {} fe {} fs {} per-row gate {}", type_name(c.type), c.n,
                             c.k, c.fe, c.fs, c.gate_per_row));
    const bool shared = c.fs > 0;
    const auto w_exps = random_weights(rng, c.type, c.fe, d * n_expert);
    const auto w_sh = shared ? random_weights(rng, c.type, c.fs, d) : std::vector<uint8_t>{};
    const auto eg = random_floats(rng, static_cast<size_t>(c.n * c.k * c.fe), -3.0f, 3.0f);
    const auto eu = random_floats(rng, eg.size(), -3.0f, 3.0f);
    const auto sg = random_floats(rng, static_cast<size_t>(c.n * c.fs), -3.0f, 3.0f);
    const auto su = random_floats(rng, sg.size(), -3.0f, 3.0f);
    const auto ids = router_ids(rng, c.n, c.k, n_expert);
    const auto wts = random_floats(rng, static_cast<size_t>(c.n * c.k), 0.0f, 1.0f);
    const int64_t gate_cols = c.gate_per_row ? 1 : d;
    const auto gate = random_floats(rng, static_cast<size_t>(c.n * gate_cols), -4.0f, 4.0f);
    std::vector<float> out[2], eg_after;
    for (int fused = 0; fused < 2; ++fused) {
      DeviceArena arena(be);
      Backend::MoeDown m;
      m.down_exps = reshape(arena.weights(w_exps, c.type, c.fe, d * n_expert), c.fe, d, n_expert);
      m.eg = arena.from_host(eg, GgmlType::F32, c.fe, c.k, c.n);
      m.eu = arena.from_host(eu, GgmlType::F32, c.fe, c.k, c.n);
      m.ids = arena.from_host(ids, GgmlType::I32, c.k, c.n);
      m.wts = arena.from_host(wts, GgmlType::F32, c.k, c.n);
      m.ed = arena.poisoned(GgmlType::F32, d, c.k, c.n);
      m.out = arena.poisoned(GgmlType::F32, d, c.n);
      if (shared) {
        m.down_shexp = arena.weights(w_sh, c.type, c.fs, d);
        m.sg = arena.from_host(sg, GgmlType::F32, c.fs, c.n);
        m.su = arena.from_host(su, GgmlType::F32, c.fs, c.n);
        m.so = arena.poisoned(GgmlType::F32, d, c.n);
        m.sgate = arena.from_host(gate, GgmlType::F32, gate_cols, c.n);
      }
      if (fused) {
        be.moe_down(m);
        eg_after = arena.download<float>(m.eg);
      } else {
        be.Backend::moe_down(m);
      }
      out[fused] = arena.download<float>(m.out);
    }
    // The fused routes leave eg as it was (the composed GLU overwrites it): one of them ran.
    for (size_t i = 0; i < eg.size(); ++i)
      ASSERT_EQ(float_bits(eg_after[i]), float_bits(eg[i])) << "eg element " << i;
    for (size_t i = 0; i < out[0].size(); ++i)
      ASSERT_EQ(float_bits(out[1][i]), float_bits(out[0][i])) << "out element " << i;
  }
}

// Every split of moe_down_kernel's row groups (CudaBackendConfig::moe_down_split: 1-4 warps,
// each taking that share of a token's terms) gives the composed ops' bits. (An A/B run's
// TEMPO9_CUDA_MOE_DOWN_SPLIT in the environment overrides the config: leave it unset here.)
TEST_F(CudaMoeDown, EqualsTheComposedOps) {
  for (const int split : {3, 1, 2, 4}) {
    SCOPED_TRACE(fmt::format("moe_down_split {}", split));
    CudaBackendConfig cfg;
    cfg.moe_down_split = split;
    CudaBackend be(cfg);
    check_equals_composed(be);
  }
}

void check_composed_route(CudaBackend& be, int64_t n) {
  auto rng = test_rng();
  const int64_t k = 8, fe = 512, d = 64;
  const int n_expert = 16;
  const auto w_exps = random_weights(rng, GgmlType::Q8_0, fe, d * n_expert);
  const auto eg = random_floats(rng, static_cast<size_t>(n * k * fe), -3.0f, 3.0f);
  const auto eu = random_floats(rng, eg.size(), -3.0f, 3.0f);
  const auto ids = router_ids(rng, n, k, n_expert);
  const auto wts = random_floats(rng, static_cast<size_t>(n * k), 0.0f, 1.0f);
  DeviceArena arena(be);
  Backend::MoeDown m;
  m.down_exps = reshape(arena.weights(w_exps, GgmlType::Q8_0, fe, d * n_expert), fe, d, n_expert);
  m.eg = arena.from_host(eg, GgmlType::F32, fe, k, n);
  m.eu = arena.from_host(eu, GgmlType::F32, fe, k, n);
  m.ids = arena.from_host(ids, GgmlType::I32, k, n);
  m.wts = arena.from_host(wts, GgmlType::F32, k, n);
  m.ed = arena.poisoned(GgmlType::F32, d, k, n);
  m.out = arena.poisoned(GgmlType::F32, d, n);
  be.moe_down(m);
  const auto glu = arena.download<float>(m.eg);
  const auto ed = arena.download<float>(m.ed);
  const auto out = arena.download<float>(m.out);
  for (size_t i = 0; i < eg.size(); ++i) {  // the SwiGLU, to float rounding (expf: 2 ulp)
    const double ref = eg[i] / (1.0 + std::exp(-static_cast<double>(eg[i]))) * eu[i];
    ASSERT_NEAR(glu[i], ref, 8 * kU * std::fabs(ref) + 1e-30) << "eg element " << i;
  }
  // out = moe_combine(ed): rank order, the first a product, then fused multiply-adds.
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < d; ++o) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const float y = ed[static_cast<size_t>((t * k + j) * d + o)];
        const float w = wts[static_cast<size_t>(t * k + j)];
        acc = j == 0 ? w * y : std::fmaf(w, y, acc);
      }
      ASSERT_EQ(float_bits(out[static_cast<size_t>(t * d + o)]), float_bits(acc))
          << "token " << t << " out " << o;
    }
}

// Past the fused route's tokens without a shared expert (3: the composed one-row GEMVs; 33
// tokens of k 8, past 256 pairs: the grouped tensor-core route) the call takes the composed ops,
// which overwrite eg with the GLU; the result is still theirs.
TEST_F(CudaMoeDown, LargerCallsTakeTheComposedOps) {
  for (const int64_t n : {3, 33}) {
    SCOPED_TRACE(fmt::format("{} tokens", n));
    check_composed_route(*be_, n);
  }
}

// matmul_shared_x with the experts' gate/up (over one ids) beside the shared expert's gate/up of
// the same shape (the MoE block's call, model/moe.cpp): up to 8 tokens the shared matmuls ride as
// plain rows of the experts' launch (one fused launch for the four), past that the shared ones
// are a fused launch of their own (two). Either way every output has the bits of its own
// matmul_id / matmul, with the plain rows' weights copied after the wait or before it
// (CudaBackendConfig::plain_early). n_in 256 takes the short-row kernel; 2048 gemv_slice_kernel
// (Q8_0) and gemv_coal_kernel (Q4_K, Q6_K). n_out 72: partial row blocks.
void check_shared_rides(CudaBackend& be, std::mt19937_64& rng) {
  const int64_t n_out = 72, k = 8;
  const int n_expert = 16;
  for (GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q5_K}) {
    for (const int64_t n_in : {256, 2048}) {
      for (const int64_t n : {1, 2, 8, 9}) {
        SCOPED_TRACE(fmt::format("{} n_in {} tokens {}", type_name(t), n_in, n));
        DeviceArena arena(be);
        const Tensor wg = random_experts(arena, rng, t, n_in, n_out, n_expert);
        const Tensor wu = random_experts(arena, rng, t, n_in, n_out, n_expert);
        const Tensor sg = arena.weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
        const Tensor su = arena.weights(random_weights(rng, t, n_in, n_out), t, n_in, n_out);
        const Tensor x = arena.from_host(
            random_floats(rng, static_cast<size_t>(n * n_in), -2.0f, 2.0f), GgmlType::F32, n_in, n);
        const Tensor ids = arena.from_host(router_ids(rng, n, k, n_expert), GgmlType::I32, k, n);
        const Backend::MatmulOut outs[] = {
            {wg, Tensor{}, arena.poisoned(GgmlType::F32, n_out, k, n), ids},
            {wu, Tensor{}, arena.poisoned(GgmlType::F32, n_out, k, n), ids},
            {sg, Tensor{}, arena.poisoned(GgmlType::F32, n_out, n)},
            {su, Tensor{}, arena.poisoned(GgmlType::F32, n_out, n)}};
        const long fused_before = be.fused_matmuls();
        be.matmul_shared_x(x, outs);
        EXPECT_EQ(be.fused_matmuls() - fused_before, n <= 8 ? 1 : 2);
        expect_each_output_alone(be, arena, x, outs);
      }
    }
  }
}

TEST_F(CudaMoeDown, SharedExpertRidesInTheExpertsLaunch) {
  auto rng = test_rng();
  check_shared_rides(*be_, rng);
  CudaBackend early_plain(CudaBackendConfig{.plain_early = true});  // stages_early's plain rows
  check_shared_rides(early_plain, rng);
}

// Backend::add_rms_norm_matmul: a decode row's residual add and pre-norm with the float matmuls of
// its output (the MoE router and shared-expert gate) in one launch (norm_gemv_f_kernel) must give
// sum, out, every y and out's int8 codes (read by a Q8_0 matmul of out after it) the bits of
// add_rms_norm then matmul_shared_x (the base implementation). Rows of 2048 and 4096 (8 and 16
// norm chunks), F32 router + one-output gate (129 gemv_f blocks: an odd count, so the last
// block's second half has no rows), F16 and BF16 with a bias on one output (130 rows: a partial
// last row pair), Gemma's weight bias; two rows take the two ops (no fused launch).
TEST(CudaNormMatmul, EqualsTheOps) {
  auto rng = test_rng();
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  CudaBackend be(CudaBackendConfig{.norm_gemv = true});
  struct Case {
    GgmlType type;
    int64_t n, rows;
    float weight_bias;
    std::vector<int64_t> n_out;
  };
  for (const Case& c :
       {Case{GgmlType::F32, 2048, 1, 0.0f, {256, 1}}, Case{GgmlType::F32, 4096, 1, 1.0f, {256, 1}},
        Case{GgmlType::F16, 2048, 1, 0.0f, {130, 64}}, Case{GgmlType::BF16, 4096, 1, 0.0f, {130}},
        Case{GgmlType::F32, 2048, 2, 0.0f, {256, 1}}}) {
    SCOPED_TRACE(std::string(type_name(c.type)) + " n " + std::to_string(c.n) + " rows " +
                 std::to_string(c.rows));
    DeviceArena arena(be);
    const int64_t n = c.n, rows = c.rows;
    const auto row_floats = [&](float lo, float hi) {
      return arena.from_host(random_floats(rng, static_cast<size_t>(n * rows), lo, hi),
                             GgmlType::F32, n, rows);
    };
    const Tensor a = row_floats(-2.0f, 2.0f), b = row_floats(-1.0f, 1.0f);
    const Tensor norm_w =
        arena.from_host(random_floats(rng, static_cast<size_t>(n), 0.5f, 1.5f), GgmlType::F32, n);
    const Tensor q8 =
        arena.weights(random_weights(rng, GgmlType::Q8_0, n, 96), GgmlType::Q8_0, n, 96);
    std::vector<Tensor> ws, biases;
    for (size_t i = 0; i < c.n_out.size(); ++i) {
      ws.push_back(
          arena.weights(random_weights(rng, c.type, n, c.n_out[i]), c.type, n, c.n_out[i]));
      biases.push_back(i == 0 && c.type != GgmlType::F32
                           ? arena.from_host(random_floats(rng, static_cast<size_t>(c.n_out[i])),
                                             GgmlType::F32, c.n_out[i])
                           : Tensor{});
    }
    // Run f (fused: the backend's call; else the base implementation's two ops) into fresh
    // outputs; return sum, out, the ys and a Q8_0 matmul of out, downloaded.
    const auto run = [&](bool fused) {
      const Tensor sum = arena.poisoned(GgmlType::F32, n, rows);
      const Tensor out = arena.poisoned(GgmlType::F32, n, rows);
      std::vector<Backend::MatmulOut> outs;
      for (size_t i = 0; i < ws.size(); ++i)
        outs.push_back({ws[i], biases[i], arena.poisoned(GgmlType::F32, c.n_out[i], rows)});
      const Backend::AddRmsNorm nr{a, b, norm_w, 1e-6f, c.weight_bias, sum, out};
      const long before = be.fused_norm_matmuls();
      if (fused)
        be.add_rms_norm_matmul(nr, outs);
      else
        be.Backend::add_rms_norm_matmul(nr, outs);
      EXPECT_EQ(be.fused_norm_matmuls() - before, fused && rows == 1 ? 1 : 0);
      const Tensor yq = arena.poisoned(GgmlType::F32, 96, rows);
      const long reuses = be.rounding_reuses();
      be.matmul(q8, out, Tensor{}, yq);
      EXPECT_EQ(be.rounding_reuses() - reuses, 1);  // out's codes, as its producer wrote them
      std::vector<std::vector<float>> got = {arena.download<float>(sum), arena.download<float>(out),
                                             arena.download<float>(yq)};
      for (const auto& o : outs) got.push_back(arena.download<float>(o.y));
      return got;
    };
    const auto fused = run(true), ops = run(false);
    ASSERT_EQ(fused.size(), ops.size());
    const char* names[] = {"sum", "out", "q8 of out"};
    for (size_t t = 0; t < fused.size(); ++t) {
      SCOPED_TRACE(t < 3 ? std::string(names[t]) : "y " + std::to_string(t - 3));
      ASSERT_EQ(fused[t].size(), ops[t].size());
      EXPECT_FALSE(std::isnan(fused[t][0]));
      for (size_t e = 0; e < fused[t].size(); ++e)
        if (float_bits(fused[t][e]) != float_bits(ops[t][e])) {
          ADD_FAILURE() << "element " << e << ": " << fused[t][e] << " vs " << ops[t][e];
          break;
        }
    }
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
