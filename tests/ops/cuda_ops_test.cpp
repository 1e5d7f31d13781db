// CUDA backend ops vs the CPU backend and the quant/dequantize.h oracle, on fresh random inputs
// (seed printed; TEMPO9_TEST_SEED reproduces), outputs NaN-poisoned before every op. Compiled to
// nothing without CUDA; on a CUDA build with no GPU the tests fail (they never skip). The matmuls
// are cuda_matmul_test.cpp's.
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "core/argmax.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"
#include "quant/dequantize.h"
#include "quant/half.h"

namespace t9::test {
namespace {

using namespace cuda_util;

// ---- get_rows, copy ----

// Dequantization is exact arithmetic on the same fp16 scales with the oracle's rounding order
// (no fused multiply-adds), so rows match the oracle bit for bit.
TEST_F(Cuda, GetRowsEveryTypeBitExact) {
  auto rng = test_rng();
  const int64_t n_embd = 512, n_vocab = 23;
  for (GgmlType t : kWeightTypes) {
    SCOPED_TRACE(type_name(t));
    DeviceArena arena(*be_);
    const auto wb = random_weights(rng, t, n_embd, n_vocab);
    std::vector<int32_t> ids = {22, 0, 5, 5, 17};
    Tensor out = arena.poisoned(GgmlType::F32, n_embd, 5);
    be_->get_rows(arena.weights(wb, t, n_embd, n_vocab), arena.from_host(ids, GgmlType::I32, 5),
                  out);
    const auto got = arena.download<float>(out);
    std::vector<float> ref(static_cast<size_t>(n_embd));
    for (size_t i = 0; i < ids.size(); ++i) {
      dequantize_row(t, wb.data() + row_bytes(t, n_embd) * static_cast<size_t>(ids[i]), ref.data(),
                     n_embd);
      for (int64_t e = 0; e < n_embd; ++e)
        ASSERT_EQ(float_bits(got[i * n_embd + e]), float_bits(ref[e])) << "row " << i << " " << e;
    }
  }
}

// take_tokens on the device equals the CPU op (the negative ids read prev's rows in place).
TEST_F(Cuda, TakeTokensEqualsCpu) {
  auto rng = test_rng();
  std::vector<int32_t> prev(40), ids(300);
  for (auto& p : prev) p = static_cast<int32_t>(rng() % 150000);
  for (auto& i : ids)
    i = rng() % 2 ? static_cast<int32_t>(rng() % 150000) : -1 - static_cast<int32_t>(rng() % 40);
  std::vector<int32_t> got[2];
  Backend* backends[2] = {be_.get(), &cpu_};
  for (int k = 0; k < 2; ++k) {
    DeviceArena arena(*backends[k]);
    Tensor it = arena.from_host(ids, GgmlType::I32, static_cast<int64_t>(ids.size()));
    backends[k]->take_tokens(arena.from_host(prev, GgmlType::I32, 40), it);
    got[k] = arena.download<int32_t>(it);
  }
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(std::count_if(got[0].begin(), got[0].end(), [](int32_t t) { return t < 0; }), 0);
}

using CudaDeathTest = Cuda;

TEST_F(CudaDeathTest, GetRowsBadIdFailsAtSync) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CudaBackend be;
        DeviceArena arena(be);
        std::vector<float> table(64 * 4, 1.0f);
        Tensor tt = arena.from_host(table, GgmlType::F32, 64, 4);
        Tensor out = arena.poisoned(GgmlType::F32, 64, 1);
        be.get_rows(tt, arena.from_host(std::vector<int32_t>{4}, GgmlType::I32, 1), out);
        be.sync();
      },
      "bad indices");
}

// Casts round to nearest even on both backends: bit-exact, also from a strided view.
TEST_F(Cuda, CopyCastsBitExact) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  const auto x = random_floats(rng, 96 * 10, -70000.0f, 70000.0f);  // beyond fp16's range too
  for (GgmlType to : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    Tensor gx = view_rows(ga.from_host(x, GgmlType::F32, 96, 10), 2, 5);
    Tensor cx = view_rows(ca.from_host(x, GgmlType::F32, 96, 10), 2, 5);
    Tensor gy = ga.poisoned(to, 96, 5), cy = ca.poisoned(to, 96, 5);
    be_->copy(gx, gy);
    cpu_.copy(cx, cy);
    Tensor gback = ga.poisoned(GgmlType::F32, 96, 5);
    be_->copy(gy, gback);
    EXPECT_EQ(ga.download<uint8_t>(gy), ca.download<uint8_t>(cy)) << type_name(to);
    Tensor cback = ca.poisoned(GgmlType::F32, 96, 5);
    cpu_.copy(cy, cback);
    EXPECT_EQ(ga.download<uint8_t>(gback), ca.download<uint8_t>(cback)) << type_name(to);
  }
}

// ---- row ops vs the CPU backend ----

// |got - ref| <= rel * |ref| + abs, element by element.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double rel,
                  double abs, const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - ref[i]), rel * std::fabs(ref[i]) + abs)
        << what << " element " << i << " got " << got[i] << " ref " << ref[i];
}

TEST_F(Cuda, ElementwiseMatchCpu) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  const int64_t d = 300, n = 7;
  const auto a = random_floats(rng, d * n, -4.0f, 4.0f);
  const auto b = random_floats(rng, d * n, -4.0f, 4.0f);
  const auto row = random_floats(rng, d, -2.0f, 2.0f);
  auto run = [&](auto&& op) {
    Tensor gy = ga.poisoned(GgmlType::F32, d, n), cy = ca.poisoned(GgmlType::F32, d, n);
    op(*be_, ga, gy);
    op(cpu_, ca, cy);
    return std::pair{ga.download<float>(gy), ca.download<float>(cy)};
  };
  // add/mul/scale are single IEEE operations: bit-exact.
  for (int which = 0; which < 5; ++which) {
    auto [g, c] = run([&](Backend& be, DeviceArena& ar, const Tensor& y) {
      Tensor at = ar.from_host(a, GgmlType::F32, d, n);
      if (which == 0) be.add(at, ar.from_host(b, GgmlType::F32, d, n), y);
      if (which == 1) be.add(at, ar.from_host(row, GgmlType::F32, d), y);
      if (which == 2) be.mul(at, ar.from_host(b, GgmlType::F32, d, n), y);
      if (which == 3) be.mul(at, ar.from_host(row, GgmlType::F32, d), y);
      if (which == 4) be.scale(at, 0.37f, y);
    });
    expect_close(g, c, 0.0, 0.0, "add/mul/scale");
  }
  // Transcendentals: CUDA's expf/tanhf are within 2 ulp, glibc's within 1, so each differs by
  // <= 3 ulp (4e-7 relative); silu/gelu/glu chain 2-3 of them, and 1 + tanh near -1 turns a
  // tanh ulp into an absolute 1.2e-7 * |x| (|x| <= 4). 4e-6 relative + 2e-6 absolute is > 2x that.
  for (int which = 0; which < 5; ++which) {
    auto [g, c] = run([&](Backend& be, DeviceArena& ar, const Tensor& y) {
      Tensor at = ar.from_host(a, GgmlType::F32, d, n);
      Tensor bt = ar.from_host(b, GgmlType::F32, d, n);
      if (which == 0) be.unary(at, UnaryKind::kSilu, y);
      if (which == 1) be.unary(at, UnaryKind::kGeluTanh, y);
      if (which == 2) be.glu(at, bt, GluKind::kSwiGLU, y);
      if (which == 3) be.glu(at, bt, GluKind::kGeGLU, y);
      if (which == 4) be.softcap(at, 3.0f, y);
    });
    expect_close(g, c, 4e-6, 2e-6, "activation");
  }
}

// The elementwise ops' vector kernel (contiguous, 16-byte aligned tensors of at least 2^16
// elements: 4 elements a thread) against the per-element kernel (the same floats in tensors 4
// bytes off alignment): the same bits for every op, in place too, and the GLU's codes the same
// (the next Q8_0 matmul reads them, so its outputs must be equal as well).
TEST_F(Cuda, ElementwiseVectorKernelEqualsPerElement) {
  auto rng = test_rng();
  DeviceArena ar(*be_);
  const int64_t d = 2048, n = 40;  // 81920 elements: the vector kernel's size
  const auto a = random_floats(rng, d * n, -4.0f, 4.0f);
  const auto b = random_floats(rng, d * n, -4.0f, 4.0f);
  // [d, n] holding v, at the start of its buffer (aligned) or one float in (4 bytes off).
  const auto put = [&](const std::vector<float>& v, bool aligned) {
    std::vector<float> p(v.size() + 1, 0.0f);
    std::copy(v.begin(), v.end(), p.begin() + (aligned ? 0 : 1));
    Tensor t = ar.from_host(p, GgmlType::F32, static_cast<int64_t>(p.size()));
    Tensor r = make_tensor(t.buf, t.offset + (aligned ? 0 : 4), GgmlType::F32, d, n);
    return r;
  };
  const auto wb = random_weights(rng, GgmlType::Q8_0, d, 40);
  const Tensor w = ar.weights(wb, GgmlType::Q8_0, d, 40);
  for (int which = 0; which < 9; ++which) {
    SCOPED_TRACE(which);
    std::vector<float> got[2], proj[2];
    for (const bool aligned : {true, false}) {
      const Tensor at = put(a, aligned), bt = put(b, aligned);
      const Tensor y = which == 8 ? at : put(std::vector<float>(a.size(), NAN), aligned);
      if (which == 0) be_->add(at, bt, y);
      if (which == 1) be_->mul(at, bt, y);
      if (which == 2) be_->scale(at, 0.37f, y);
      if (which == 3) be_->unary(at, UnaryKind::kSilu, y);
      if (which == 4) be_->unary(at, UnaryKind::kGeluTanh, y);
      if (which == 5) be_->glu(at, bt, GluKind::kSwiGLU, y);
      if (which == 6) be_->glu(at, bt, GluKind::kGeGLU, y);
      if (which == 7) be_->softcap(at, 3.0f, y);
      if (which == 8) be_->glu(at, bt, GluKind::kSwiGLU, y);  // in place
      got[aligned ? 0 : 1] = ar.download<float>(y);
      const Tensor py = ar.poisoned(GgmlType::F32, 40, n);
      be_->matmul(w, y, Tensor{}, py);  // the GLUs: through the codes they wrote
      proj[aligned ? 0 : 1] = ar.download<float>(py);
    }
    ASSERT_EQ(got[0].size(), got[1].size());
    for (size_t i = 0; i < got[0].size(); ++i)
      ASSERT_EQ(float_bits(got[0][i]), float_bits(got[1][i])) << "element " << i;
    for (size_t i = 0; i < proj[0].size(); ++i)
      ASSERT_EQ(float_bits(proj[0][i]), float_bits(proj[1][i])) << "projection " << i;
    ASSERT_FALSE(std::isnan(got[0][0]));
  }
}

// Rows of 2144 (one block per row), 128 and 200 (one warp per row, the per-head norms; 200 leaves
// part of the last 32 lanes idle), 37 rows: several warp-kernel blocks and a partial one.
TEST_F(Cuda, RmsNormSoftmaxMatchCpu) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  for (const int64_t d : {int64_t{2048 + 96}, int64_t{128}, int64_t{200}})
    for (int which = 0; which < 4; ++which) {
      SCOPED_TRACE(fmt::format("row of {}", d));
      const int64_t n = 37;
      const auto x = random_floats(rng, d * n, -3.0f, 3.0f);
      const auto w = random_floats(rng, d);
      std::vector<float> out[2];
      int i = 0;
      for (Backend* be : {static_cast<Backend*>(be_.get()), static_cast<Backend*>(&cpu_)}) {
        DeviceArena& ar = i == 0 ? ga : ca;
        Tensor xt = ar.from_host(x, GgmlType::F32, d, n);
        Tensor y = which == 3 ? xt : ar.poisoned(GgmlType::F32, d, n);  // softmax in place
        if (which == 0) be->rms_norm(xt, ar.from_host(w, GgmlType::F32, d), 1e-6f, 1.0f, y);
        if (which == 1) be->rms_norm(xt, Tensor{}, 1e-5f, 0.0f, y);
        if (which >= 2) be->softmax(xt, y);
        out[i++] = ar.download<float>(y);
      }
      // rms_norm: both sum squares in double, so 1/rms agrees to 1 ulp; two products add 2 ulp.
      // softmax: expf within 2 ulp (glibc 1), the double sums agree, the float scale adds 1 ulp.
      expect_close(out[0], out[1], which < 2 ? 5e-7 : 8e-7, 0.0,
                   which < 2 ? "rms_norm" : "softmax");
    }
}

// The fused residual add + pre-norm: the sum and the normed rows are the bits of add() then
// rms_norm() on CUDA (in place, as the forward pass runs it: sum aliases a), and the CPU's
// add_rms_norm within rms_norm's bound. Rows of 2144 take the kernel's tail loop.
TEST_F(Cuda, AddRmsNormEqualsAddThenRmsNorm) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  const int64_t d = 2048 + 96, n = 5;
  const auto a = random_floats(rng, d * n, -3.0f, 3.0f);
  const auto b = random_floats(rng, d * n, -3.0f, 3.0f);
  const auto w = random_floats(rng, d);
  for (bool weight : {true, false}) {
    SCOPED_TRACE(weight ? "weight" : "no weight");
    const auto run = [&](Backend& be, DeviceArena& ar, bool fused) {
      Tensor at = ar.from_host(a, GgmlType::F32, d, n), bt = ar.from_host(b, GgmlType::F32, d, n);
      Tensor wt = weight ? ar.from_host(w, GgmlType::F32, d) : Tensor{};
      Tensor y = ar.poisoned(GgmlType::F32, d, n);
      if (fused) {
        be.add_rms_norm(at, bt, wt, 1e-6f, 1.0f, at, y);
      } else {
        be.add(at, bt, at);
        be.rms_norm(at, wt, 1e-6f, 1.0f, y);
      }
      return std::pair{ar.download<float>(at), ar.download<float>(y)};
    };
    const auto [fs, fy] = run(*be_, ga, true);
    const auto [ss, sy] = run(*be_, ga, false);
    const auto [cs, cy] = run(cpu_, ca, true);
    expect_close(fs, ss, 0.0, 0.0, "add_rms_norm sum vs add");
    expect_close(fy, sy, 0.0, 0.0, "add_rms_norm vs add + rms_norm");
    expect_close(fs, cs, 0.0, 0.0, "add_rms_norm sum vs cpu");
    expect_close(fy, cy, 5e-7, 0.0, "add_rms_norm vs cpu");  // RmsNormSoftmaxMatchCpu's bound
  }
}

// Decode-sized norms (up to 64 rows of 256 k <= 4096 elements, output and sum apart from the
// inputs) run as rms_norm_codes_kernel: k blocks per row, each writing its 256 elements' floats,
// sum and int8 codes, which the next matmul takes instead of rounding its x. Against a backend
// with producer-written codes off (one block per row, then the matmul's own rounding): the sums,
// the normed rows and the matmul outputs (Q8_0, Q4_K: GEMV rows 1 and 8, tensor cores at 40; 70
// rows keep the one-block kernel) are the same bits, with and without a weight; the in-place add
// (sum aliases a, as the forward pass ran it before) keeps the one-block kernel too.
TEST_F(Cuda, FewRowNormsWriteTheirMatmulsCodes) {
  auto rng = test_rng();
  CudaBackend plain({.device = 0, .fuse_rounding = false});
  for (const int64_t d : {int64_t{2048}, int64_t{4096}}) {
    for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
      const auto wb = random_weights(rng, t, d, 96);
      const auto w = random_floats(rng, static_cast<size_t>(d));
      for (const int64_t n : {int64_t{1}, int64_t{8}, int64_t{40}, int64_t{70}}) {
        const auto a = random_floats(rng, static_cast<size_t>(d * n), -3.0f, 3.0f);
        const auto b = random_floats(rng, static_cast<size_t>(d * n), -3.0f, 3.0f);
        for (int form = 0; form < 3; ++form) {  // add_rms_norm apart, in place; rms_norm
          SCOPED_TRACE(fmt::format("{} d {} rows {} form {}", type_name(t), d, n, form));
          const auto run = [&](CudaBackend& be) {
            DeviceArena ar(be);
            Tensor at = ar.from_host(a, GgmlType::F32, d, n);
            Tensor bt = ar.from_host(b, GgmlType::F32, d, n);
            Tensor wt = form == 2 ? Tensor{} : ar.from_host(w, GgmlType::F32, d);
            Tensor sum = form == 0 ? ar.poisoned(GgmlType::F32, d, n) : at;
            Tensor h = ar.poisoned(GgmlType::F32, d, n), y = ar.poisoned(GgmlType::F32, 96, n);
            if (form == 2)
              be.rms_norm(at, wt, 1e-6f, 0.0f, h);
            else
              be.add_rms_norm(at, bt, wt, 1e-6f, 1.0f, sum, h);
            be.matmul(ar.weights(wb, t, d, 96), h, Tensor{}, y);
            const long reused = be.rounding_reuses();
            return std::tuple{ar.download<float>(sum), ar.download<float>(h), ar.download<float>(y),
                              reused};
          };
          const long before = be_->rounding_reuses();
          const auto [fs, fh, fy, fr] = run(*be_);
          const auto [ps, ph, py, pr] = run(plain);
          expect_close(fs, ps, 0.0, 0.0, "sum");
          expect_close(fh, ph, 0.0, 0.0, "normed rows");
          expect_close(fy, py, 0.0, 0.0, "matmul of the normed rows");
          EXPECT_FALSE(std::isnan(fy[0]));
          // The codes were taken where the codes kernel ran (apart or rms_norm, <= 64 rows).
          EXPECT_EQ(fr - before, form != 1 && n <= 64 ? 1 : 0);
          EXPECT_EQ(pr, 0);
        }
      }
    }
  }
}

TEST_F(Cuda, ArgmaxTopKExactWithTies) {
  // 50000: every row 16-byte aligned (argmax's float4 scan); 50001: rows 1 and 2 are not (the
  // scalar scan) and row 0 has a one-element tail, where row 0's maximum is put.
  for (const int64_t v : {int64_t{50000}, int64_t{50001}}) {
    SCOPED_TRACE(v);
    auto rng = test_rng();
    DeviceArena ga(*be_), ca(cpu_);
    const int64_t n = 3, k = 40;
    auto x = random_floats(rng, v * n, -10.0f, 10.0f);
    // Row 1: the max appears three times (lowest index wins); row 2: ties inside the top k.
    x[v + 41234] = 11.0f, x[v + 777] = 11.0f, x[v + 49999] = 11.0f;
    for (int64_t i : {100, 200, 300, 40000}) x[2 * v + i] = 9.5f;
    x[v - 1] = 12.0f;  // row 0: the last element
    std::vector<int32_t> am[2], ids[2];
    std::vector<float> vals[2];
    int i = 0;
    for (Backend* be : {static_cast<Backend*>(be_.get()), static_cast<Backend*>(&cpu_)}) {
      DeviceArena& ar = i == 0 ? ga : ca;
      Tensor xt = ar.from_host(x, GgmlType::F32, v, n);
      Tensor a = ar.poisoned(GgmlType::I32, n), it = ar.poisoned(GgmlType::I32, k, n),
             vt = ar.poisoned(GgmlType::F32, k, n);
      be->argmax(xt, a);
      be->top_k(xt, static_cast<int>(k), it, vt);
      am[i] = ar.download<int32_t>(a);
      ids[i] = ar.download<int32_t>(it);
      vals[i++] = ar.download<float>(vt);
    }
    EXPECT_EQ(am[0], am[1]);
    EXPECT_EQ(am[0][0], v - 1);
    EXPECT_EQ(am[0][1], 777);
    EXPECT_EQ(ids[0], ids[1]);
    EXPECT_EQ(vals[0], vals[1]);
  }
}

// Rows of a real vocabulary's size (61 chunks of the device's 4096-logit blocks) with the maximum
// in different chunks, ties across chunks, a row of -inf (the first index) and NaNs that never
// win (a NaN row gives 0): ids equal to the CPU's where its scan defines them (NaN not at 0).
TEST_F(Cuda, ArgmaxAcrossChunksNanAndInf) {
  auto rng = test_rng();
  const int64_t v = 248320, n = 6;
  auto x = random_floats(rng, v * n, -10.0f, 10.0f);
  x[0 * v + 200000] = 20.0f;                                 // row 0: in a late chunk
  x[1 * v + 4096] = 20.0f, x[1 * v + 8191] = 20.0f;          // row 1: chunk 1's first element...
  x[1 * v + 3] = std::nanf(""), x[1 * v + 9000] = INFINITY;  // ...NaN loses, +inf wins
  for (int64_t i = 0; i < v; ++i) x[2 * v + i] = -INFINITY;  // row 2: all -inf -> 0
  x[2 * v + 5] = std::nanf("");                              //   (a NaN does not win)
  for (int64_t i = 0; i < v; ++i) x[3 * v + i] = std::nanf("");  // row 3: all NaN -> 0
  x[4 * v + v - 1] = 30.0f;                                      // row 4: the last element
  x[5 * v + 12345] = 15.0f, x[5 * v + 123456] = 15.0f;           // row 5: tie across chunks
  DeviceArena ga(*be_);
  Tensor xt = ga.from_host(x, GgmlType::F32, v, n), a = ga.poisoned(GgmlType::I32, n);
  be_->argmax(xt, a);
  EXPECT_EQ(ga.download<int32_t>(a), (std::vector<int32_t>{200000, 9000, 0, 0, v - 1, 12345}));
  std::vector<int32_t> cpu;
  for (int64_t r : {0, 1, 2, 4, 5}) cpu.push_back(static_cast<int32_t>(first_argmax(&x[r * v], v)));
  EXPECT_EQ(cpu, (std::vector<int32_t>{200000, 9000, 0, v - 1, 12345}));
}

// ---- rope ----

// Both backends build theta with the same float operations; only cos/sin differ (CUDA <= 2 ulp,
// glibc <= 1), so each output moves by <= (|x0| + |x1|) * mscale * 3 ulp plus a rounding of the
// rotation; 16 u (u = 2^-24) covers it.
void check_rope(CudaBackend& gpu, CpuBackend& cpu, const RopeParams& p, int64_t head_dim,
                bool in_place) {
  auto rng = test_rng();
  DeviceArena ga(gpu), ca(cpu);
  const int64_t n_heads = 5, n_tok = 9;
  const auto x = random_floats(rng, n_tok * n_heads * head_dim, -2.0f, 2.0f);
  std::vector<int32_t> pos(n_tok);
  for (auto& v : pos) v = static_cast<int32_t>(rng() % 8000);
  std::vector<float> out[2];
  int i = 0;
  for (Backend* be : {static_cast<Backend*>(&gpu), static_cast<Backend*>(&cpu)}) {
    DeviceArena& ar = i == 0 ? ga : ca;
    Tensor xt = ar.from_host(x, GgmlType::F32, head_dim, n_heads, n_tok);
    Tensor y = in_place ? xt : ar.poisoned(GgmlType::F32, head_dim, n_heads, n_tok);
    be->rope(xt, ar.from_host(pos, GgmlType::I32, n_tok), p, y);
    out[i++] = ar.download<float>(y);
  }
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  for (size_t e = 0; e < x.size(); e += 2) {
    // Pairs are (e, e+1) or (e, e+n_rot/2); bound with the row's two largest inputs.
    const size_t row = e / static_cast<size_t>(head_dim) * static_cast<size_t>(head_dim);
    const double xmax = std::fabs(*std::max_element(
        x.begin() + static_cast<ptrdiff_t>(row), x.begin() + static_cast<ptrdiff_t>(row + head_dim),
        [](float p0, float p1) { return std::fabs(p0) < std::fabs(p1); }));
    const double tol = 2 * xmax * mscale * 16 * kU;
    ASSERT_NEAR(out[0][e], out[1][e], tol) << "element " << e;
    ASSERT_NEAR(out[0][e + 1], out[1][e + 1], tol) << "element " << e + 1;
  }
}

TEST_F(Cuda, RopeMatchesCpu) {
  RopeParams p;
  p.n_rot = 64;
  check_rope(*be_, cpu_, p, 64, false);  // llama, normal layout
  p.layout = RopeLayout::kNeox;
  p.n_rot = 32;
  p.freq_base = 1e6f;
  p.freq_scale = 0.25f;
  check_rope(*be_, cpu_, p, 128, true);  // partial rotary, linear scaling, in place
  p.n_rot = 128;
  p.freq_scale = 0.125f;
  p.ext_factor = 1.0f;
  p.n_ctx_orig = 4096;
  check_rope(*be_, cpu_, p, 128, false);  // YaRN
}

// qk_norm_rope is one launch on CUDA: the bits of rms_norm over the head rows of q and of k, then
// rope of each (the base Backend's four ops, run here on the same CUDA backend), and with a
// KvWrite the bits write_kv stores (F16 and F32 pools: the rotated k and v in every slot, the
// other slots' poison untouched). Cases: QK-norm with NeoX rotary over all of head_dim 128
// (Qwen3), no norm with the normal layout (llama, qwen2), a norm without weight bias and partial
// rotary over 64 of 256 (Qwen3.5's gated attention), YaRN; GQA (8 q heads, 2 kv heads); 17
// tokens of two sequences (a prefill chunk of 10 at position 5, 7 at 90 over shuffled blocks of
// 16) at positions up to 100k. Store 3: q read from the query halves of [q, gate] head rows
// (q_from, the gated attention's layout), the F32 pool.
TEST_F(Cuda, QkNormRopeEqualsTheSeparateOps) {
  auto rng = test_rng();
  struct Case {
    int64_t head_dim;
    bool norm;
    RopeParams p;
    float weight_bias;
  };
  RopeParams neox;
  neox.layout = RopeLayout::kNeox;
  neox.n_rot = 128;
  neox.freq_base = 1e6f;
  RopeParams normal;
  normal.n_rot = 64;
  RopeParams partial = neox;
  partial.n_rot = 64;
  RopeParams yarn = neox;
  yarn.freq_scale = 0.125f;
  yarn.ext_factor = 1.0f;
  yarn.n_ctx_orig = 4096;
  const Case cases[] = {{128, true, neox, 0.0f},
                        {64, false, normal, 0.0f},
                        {256, true, partial, 1.0f},
                        {128, true, yarn, 0.0f}};
  const int64_t n_tok = 17, n_head = 8, n_kv = 2;
  constexpr int kBlock = 16, kPoolBlocks = 12;
  // Sequence 0: rows 0..9 at positions 5..14; sequence 1: rows 10..16 at 90..96.
  const std::vector<int32_t> seqs = {0, 10, 5, 0, 10, 7, 90, 1};
  std::vector<int32_t> tables(kPoolBlocks);
  for (int i = 0; i < kPoolBlocks; ++i) tables[static_cast<size_t>(i)] = i;
  std::shuffle(tables.begin(), tables.end(), rng);  // seq 0: entry 0; seq 1: 1..7 (6, 7 used)
  for (const Case& c : cases) {
    for (const int store : {0, 1, 2, 3}) {  // none, F16 pool, F32 pool, F32 pool + q_from
      SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + " n_rot " +
                   std::to_string(c.p.n_rot) + " store " + std::to_string(store));
      DeviceArena arena(*be_);
      const auto q =
          random_floats(rng, static_cast<size_t>(n_tok * n_head * c.head_dim), -3.0f, 3.0f);
      const auto k =
          random_floats(rng, static_cast<size_t>(n_tok * n_kv * c.head_dim), -3.0f, 3.0f);
      const auto v =
          random_floats(rng, static_cast<size_t>(n_tok * n_kv * c.head_dim), -3.0f, 3.0f);
      const Tensor wq =
          arena.from_host(random_floats(rng, static_cast<size_t>(c.head_dim), -2.0f, 2.0f),
                          GgmlType::F32, c.head_dim);
      const Tensor wk =
          arena.from_host(random_floats(rng, static_cast<size_t>(c.head_dim), -2.0f, 2.0f),
                          GgmlType::F32, c.head_dim);
      std::vector<int32_t> pos(static_cast<size_t>(n_tok));
      for (auto& x : pos) x = static_cast<int32_t>(1 + rng() % 100000);  // 0 would not rotate
      const Tensor pt = arena.from_host(pos, GgmlType::I32, n_tok);
      AttnParams ap;
      ap.n_head = static_cast<int>(n_head);
      ap.n_kv_head = static_cast<int>(n_kv);
      ap.head_dim = static_cast<int>(c.head_dim);
      ap.block_size = kBlock;
      ap.n_seqs = 2;
      ap.max_ctx = 97;
      const GgmlType pool = store == 1 ? GgmlType::F16 : GgmlType::F32;
      std::vector<float> got[2][2];      // [fused, separate][q, k]
      std::vector<uint8_t> pools[2][2];  // [fused, separate][k, v]
      // [q row, gate row] per head for q_from: the gate halves are noise the op must not read.
      std::vector<float> qg = random_floats(rng, q.size() * 2, -3.0f, 3.0f);
      for (size_t r = 0; r < q.size() / static_cast<size_t>(c.head_dim); ++r)
        std::copy_n(q.begin() + static_cast<int64_t>(r) * c.head_dim, c.head_dim,
                    qg.begin() + static_cast<int64_t>(2 * r) * c.head_dim);
      for (int way = 0; way < 2; ++way) {
        const Tensor qt = store == 3 ? arena.poisoned(GgmlType::F32, c.head_dim, n_head, n_tok)
                                     : arena.from_host(q, GgmlType::F32, c.head_dim, n_head, n_tok);
        Tensor qf = arena.from_host(qg, GgmlType::F32, 2 * c.head_dim, n_head, n_tok);
        qf.ne[0] = c.head_dim;  // the query halves
        const Tensor* q_from = store == 3 ? &qf : nullptr;
        const Tensor kt = arena.from_host(k, GgmlType::F32, c.head_dim, n_kv, n_tok);
        const Tensor nq = c.norm ? wq : Tensor{}, nk = c.norm ? wk : Tensor{};
        const Backend::KvWrite kv{arena.from_host(v, GgmlType::F32, c.head_dim, n_kv, n_tok),
                                  arena.poisoned(pool, c.head_dim, n_kv, kPoolBlocks * kBlock),
                                  arena.poisoned(pool, c.head_dim, n_kv, kPoolBlocks * kBlock),
                                  arena.from_host(seqs, GgmlType::I32, 4, 2),
                                  arena.from_host(tables, GgmlType::I32, kPoolBlocks),
                                  ap};
        const Backend::KvWrite* kvp = store != 0 ? &kv : nullptr;
        if (way == 0)
          be_->qk_norm_rope(qt, kt, nq, nk, 1e-6f, c.weight_bias, pt, c.p, kvp, q_from);
        else
          be_->Backend::qk_norm_rope(qt, kt, nq, nk, 1e-6f, c.weight_bias, pt, c.p, kvp, q_from);
        got[way][0] = arena.download<float>(qt);
        got[way][1] = arena.download<float>(kt);
        if (store != 0) {
          pools[way][0] = arena.download<uint8_t>(kv.k_cache);
          pools[way][1] = arena.download<uint8_t>(kv.v_cache);
        }
      }
      for (int t = 0; t < 2; ++t) {
        ASSERT_EQ(got[0][t].size(), got[1][t].size());
        for (size_t e = 0; e < got[0][t].size(); ++e)
          ASSERT_EQ(float_bits(got[0][t][e]), float_bits(got[1][t][e]))
              << (t == 0 ? "q" : "k") << " element " << e;
        // The op did something: rotated (and normalised) values differ from the input.
        const auto& in = t == 0 ? q : k;
        ASSERT_NE(float_bits(got[0][t][0]), float_bits(in[0]));
        EXPECT_EQ(pools[0][t], pools[1][t]) << (t == 0 ? "k pool" : "v pool");
      }
      if (store != 0) {  // row 0's v (seq 0, position 5, head 0) sits in table entry 0's block
        const size_t es = store == 1 ? 2 : 4, slot = static_cast<size_t>(tables[0]) * kBlock + 5;
        const uint8_t* at = pools[0][1].data() + slot * n_kv * c.head_dim * es;
        float v0 = 0.0f;
        if (store == 1) {
          uint16_t h;
          std::memcpy(&h, at, 2);
          v0 = f16_to_f32(h);
        } else {
          std::memcpy(&v0, at, 4);
        }
        EXPECT_EQ(v0, store == 1 ? f16_to_f32(f32_to_f16(v[0])) : v[0]);
      }
    }
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
