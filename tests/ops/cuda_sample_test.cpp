// Backend::sample on CUDA vs the CPU backend (core/sampling.h, the host sampler itself), on fresh
// random rows (seed printed; TEMPO9_TEST_SEED reproduces), output poisoned before each call.
//
// The device follows the host's algorithm but sums its doubles in another order and uses expf
// (<= 2 ulp) for std::exp, so probabilities may differ by a few float ulps: the draw may differ
// only when u lies that close to a boundary of the host's cumulative distribution. Every row that
// differs must have u within 1e-5 of the boundary between the two tokens (a 248k-entry row's
// probabilities are ~1e-5 at most for the flat rows, so this is loose for them but exact enough
// to catch any wrong order, cut or scan: those miss by far more). -1 is allowed only where the
// host keeps more than the device's 1024 candidates.
#ifdef TEMPO9_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "core/sampling.h"
#include "cuda_test_util.h"
#include "ops_test_util.h"

namespace t9::test {
namespace {

class CudaSample : public cuda_util::CudaVsCpu {};

// The cumulative probability just before and just after `token` in the host's kept order; false
// when the host does not keep it.
bool host_interval(std::span<const float> row, const RowSampling& s, int32_t token, double* lo,
                   double* hi) {
  const auto c = truncate_candidates(row, {s.temperature, s.top_k, s.top_p, s.min_p});
  double cum = 0;
  for (const Candidate& x : c) {
    if (x.token == token) {
      *lo = cum, *hi = cum + x.p;
      return true;
    }
    cum += x.p;
  }
  return false;
}

std::vector<int32_t> run_sample(Backend& be, DeviceArena& ar, const std::vector<float>& logits,
                                int64_t v, const std::vector<RowSampling>& rows) {
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<int32_t> raw(static_cast<size_t>(n) * 6);
  std::memcpy(raw.data(), rows.data(), raw.size() * sizeof(int32_t));
  Tensor x = ar.from_host(logits, GgmlType::F32, v, n);
  Tensor p = ar.from_host(raw, GgmlType::I32, 6, n);
  Tensor out = ar.poisoned(GgmlType::I32, n);
  be.sample(x, p, out);
  return ar.download<int32_t>(out);
}

TEST_F(CudaSample, SameTokensAsTheHostSampler) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  const int64_t v = 151936;  // Qwen3's vocabulary: rows far longer than the block
  // Settings, each for a peaked row (a language model's: a normal bulk and a few far above) and a
  // flat one (top-p then keeps tens of thousands: -1 is allowed there).
  struct Setting {
    float temp, top_p, min_p;
    int top_k;
  };
  const Setting settings[] = {{0.0f, 1.0f, 0.0f, 0},    {1.0f, 1.0f, 0.0f, 0},
                              {0.7f, 0.95f, 0.0f, 0},   {0.7f, 0.8f, 0.0f, 20},
                              {1.0f, 1.0f, 0.05f, 0},   {1.3f, 0.9f, 0.02f, 40},
                              {1.0f, 1.0f, 0.0f, 1000}, {1.0f, 1.0f, 0.0f, 1},
                              {0.5f, 0.5f, 0.1f, 0},    {1.0f, 1.0f, 0.0f, 2000}};
  std::vector<RowSampling> rows;
  std::vector<float> logits;
  std::normal_distribution<float> bulk(0.0f, 2.5f);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  for (int draw = 0; draw < 6; ++draw) {
    for (const Setting& st : settings) {
      for (int flat = 0; flat < 2; ++flat) {
        const size_t base = logits.size();
        logits.resize(base + static_cast<size_t>(v));
        for (int64_t i = 0; i < v; ++i)
          logits[base + static_cast<size_t>(i)] = flat ? 0.02f * bulk(rng) : bulk(rng);
        for (int j = 0; j < 6 && !flat; ++j)
          logits[base + rng() % v] = 12.0f + static_cast<float>(j % 3);
        if (draw == 5) {  // ties across the whole row, and at the max
          for (int64_t i = 0; i < v; ++i)
            logits[base + static_cast<size_t>(i)] =
                std::round(logits[base + static_cast<size_t>(i)] * 2.0f) / 2.0f;
        }
        RowSampling s;
        s.temperature = st.temp, s.top_k = st.top_k, s.top_p = st.top_p, s.min_p = st.min_p;
        s.u = draw == 4 ? 0.999999 : unif(rng);
        rows.push_back(s);
      }
    }
  }
  const auto gpu = run_sample(*be_, ga, logits, v, rows);
  const auto cpu = run_sample(cpu_, ca, logits, v, rows);
  int same = 0, near = 0, deferred = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::span<const float> row(logits.data() + r * static_cast<size_t>(v),
                                     static_cast<size_t>(v));
    const RowSampling& s = rows[r];
    ASSERT_GE(cpu[r], 0);
    if (gpu[r] == cpu[r]) {
      ++same;
      continue;
    }
    if (gpu[r] == -1) {  // only where the host keeps more than the device's 1024 candidates
      const size_t kept =
          truncate_candidates(row, {s.temperature, s.top_k, s.top_p, s.min_p}).size();
      EXPECT_TRUE(s.top_k > 1024 || kept > 1000) << "row " << r << " kept " << kept;
      ++deferred;
      continue;
    }
    ASSERT_NE(s.temperature, 0.0f) << "argmax differs, row " << r;
    double glo = 0, ghi = 0, clo = 0, chi = 0;
    ASSERT_TRUE(host_interval(row, s, gpu[r], &glo, &ghi))
        << "row " << r << ": token " << gpu[r] << " is not kept";
    ASSERT_TRUE(host_interval(row, s, cpu[r], &clo, &chi));
    // Neighbours in the kept order, and u at their shared boundary.
    const double boundary = ghi <= clo ? ghi : glo;
    EXPECT_TRUE(std::fabs(ghi - clo) < 1e-12 || std::fabs(chi - glo) < 1e-12)
        << "row " << r << ": tokens " << gpu[r] << " / " << cpu[r] << " are not neighbours";
    EXPECT_LT(std::fabs(s.u - boundary), 1e-5) << "row " << r << " u " << s.u;
    ++near;
  }
  std::printf("[cuda sample] %zu rows: %d same, %d at a boundary, %d deferred to the host\n",
              rows.size(), same, near, deferred);
  // The peaked rows (half) never need more than 1024 candidates except top-k 2000, so at least
  // 3/4 of the rows are drawn on the device: the same token, or its neighbour when u sits at
  // their boundary (checked above; one of 120 rows did on the H200, run 67).
  EXPECT_GE(same + near, static_cast<int>(rows.size()) * 3 / 4);
}

TEST_F(CudaSample, ShortRowsAndBannedTokens) {
  // Rows shorter than the block, a row of all -inf (the host draws its first token), top-k equal
  // to the row length, and a single token.
  DeviceArena ga(*be_), ca(cpu_);
  const int64_t v = 37;
  std::vector<float> logits;
  std::vector<RowSampling> rows;
  auto rng = test_rng();
  std::uniform_real_distribution<float> val(-3.0f, 3.0f);
  for (int r = 0; r < 8; ++r) {
    for (int64_t i = 0; i < v; ++i) logits.push_back(r == 3 ? -INFINITY : val(rng));
    RowSampling s;
    s.temperature = r == 0 ? 0.0f : 0.9f;
    s.top_k = r == 4 ? static_cast<int32_t>(v) : r == 5 ? 1 : 0;
    s.top_p = r == 6 ? 0.6f : 1.0f;
    s.min_p = r == 7 ? 0.2f : 0.0f;
    s.u = 0.05 + 0.11 * r;
    rows.push_back(s);
  }
  const auto gpu = run_sample(*be_, ga, logits, v, rows);
  const auto cpu = run_sample(cpu_, ca, logits, v, rows);
  EXPECT_EQ(gpu, cpu);
  EXPECT_EQ(cpu[3], 0);
}

// adjust_logits: the same IEEE operations on both backends (the device spells them as
// intrinsics, never fused), so the edited rows must be equal bit for bit; padding rows (-1) and
// rows without edits stay as they were. With pending tokens (a pipelined row's token in flight,
// read from the call's ids): one on a token its row edits (the edit applies with sub_next), one
// on a token it does not (its own edit), one on a row without edits, padding.
TEST_F(CudaSample, AdjustLogitsEqualsTheCpuBitForBit) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  const int64_t v = 5000, n = 4;
  std::uniform_real_distribution<float> val(-6.0f, 6.0f);
  std::vector<float> logits(static_cast<size_t>(v * n));
  for (float& x : logits) x = val(rng);
  logits[7] = -0.0f, logits[8] = 0.0f;  // signed zeros: only a bias may add
  std::vector<LogitEdit> edits;
  for (int32_t row : {0, 2}) {
    for (int32_t t = 0; t < v; t += 3 + row) {
      LogitEdit e;
      e.row = row, e.token = t;
      e.has_add = t % 2, e.add = e.has_add ? val(rng) : 0.0f;
      e.rep = t % 5 == 0 ? 1.0f : 1.3f;
      e.sub = t % 7 == 0 ? 0.0f : 0.2f * static_cast<float>(t % 4) + 0.5f;
      e.sub_next = e.sub + 0.25f;
      edits.push_back(e);
    }
  }
  edits.resize(edits.size() + 37);  // padding
  // Row 0's token in flight is 3 (edited: t % 3 == 0), row 2's is 4 (not: t % 5 != 0), row 3's
  // is 11 (no edits in that row); row 1 has none.
  const std::vector<int32_t> ids{9, 3, 4, 11};
  std::vector<PendingEdit> pending{{0, 1, 1.3f, 0.75f}, {2, 2, 1.3f, 0.75f}, {3, 3, 0.8f, 0.5f}};
  pending.resize(8);  // padding
  std::vector<int32_t> raw(edits.size() * 8), raw_p(pending.size() * 4);
  std::memcpy(raw.data(), edits.data(), raw.size() * sizeof(int32_t));
  std::memcpy(raw_p.data(), pending.data(), raw_p.size() * sizeof(int32_t));
  for (const bool with_pending : {false, true}) {
    std::vector<float> out[2];
    int i = 0;
    for (Backend* be : {static_cast<Backend*>(be_.get()), static_cast<Backend*>(&cpu_)}) {
      DeviceArena& ar = i == 0 ? ga : ca;
      Tensor x = ar.from_host(logits, GgmlType::F32, v, n);
      be->adjust_logits(
          x, ar.from_host(raw, GgmlType::I32, 8, static_cast<int64_t>(edits.size())),
          with_pending ? ar.from_host(raw_p, GgmlType::I32, 4, static_cast<int64_t>(pending.size()))
                       : Tensor{},
          with_pending ? ar.from_host(ids, GgmlType::I32, static_cast<int64_t>(ids.size()))
                       : Tensor{});
      out[i++] = ar.download<float>(x);
    }
    ASSERT_EQ(out[0].size(), out[1].size());
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(out[0].data() + v, logits.data() + v, v * sizeof(float)), 0);  // row 1
    EXPECT_NE(out[1][3], logits[3]);  // the edits did something
    // The pending tokens' values, from the CPU's reference op (checked on its own in
    // SamplingTest): what each of the three cases must give.
    const LogitEdit& e3 = edits[1];  // row 0, token 3
    ASSERT_EQ(e3.token, 3);
    EXPECT_EQ(out[1][3],
              edited_logit(logits[3], with_pending ? pending_edit(&e3, pending[0]) : e3));
    EXPECT_EQ(out[1][2 * v + 4],
              with_pending ? edited_logit(logits[2 * v + 4], pending_edit(nullptr, pending[1]))
                           : logits[2 * v + 4]);
    EXPECT_EQ(out[1][3 * v + 11],
              with_pending ? edited_logit(logits[3 * v + 11], pending_edit(nullptr, pending[2]))
                           : logits[3 * v + 11]);
  }
}

// Backend::logprobs: the top ids equal the CPU's (the same order, ties lower id first: exact);
// the values may differ where lse does. Both take lse = max + float(log(double sum of exp(l -
// max))), the sums in different orders and CUDA's exp / log for glibc's (each within an ulp in
// double), so float(log(sum)) can round the other way and lse differ by an ulp of lse; then l -
// lse rounds once more. Bound: 2 ulp(lse) + ulp(value), lse taken from the CPU's own output.
TEST_F(CudaSample, LogprobsEqualTheCpu) {
  auto rng = test_rng();
  DeviceArena ga(*be_), ca(cpu_);
  std::normal_distribution<float> bulk(0.0f, 2.5f);
  auto ulp = [](float x) {
    x = std::fabs(x);
    return std::nextafter(x, INFINITY) - x;
  };
  for (const int64_t v : {int64_t{151936}, int64_t{37}}) {
    const int64_t n = 6;
    std::vector<float> logits(static_cast<size_t>(v * n));
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
      float* row = logits.data() + r * v;
      for (int64_t i = 0; i < v; ++i) row[i] = bulk(rng);
      for (int j = 0; j < 4 && v > 1000; ++j) row[rng() % v] = 12.0f + static_cast<float>(j % 2);
      if (r == 2)  // ties across the row and at the top
        for (int64_t i = 0; i < v; ++i) row[i] = std::round(row[i] * 2.0f) / 2.0f;
      if (r == 3) row[5] = -INFINITY;  // a banned token
      tokens[static_cast<size_t>(r)] = r == 4 ? -1 : static_cast<int32_t>(6 + rng() % (v - 6));
    }
    for (const int k : {0, 1, 5, 20}) {
      std::vector<float> lp[2];
      std::vector<int32_t> ids[2];
      int b = 0;
      for (Backend* be : {static_cast<Backend*>(be_.get()), static_cast<Backend*>(&cpu_)}) {
        DeviceArena& ar = b == 0 ? ga : ca;
        const Tensor x = ar.from_host(logits, GgmlType::F32, v, n);
        const Tensor t = ar.from_host(tokens, GgmlType::I32, n);
        const Tensor out = ar.poisoned(GgmlType::F32, 1 + k, n);
        const Tensor top = k > 0 ? ar.poisoned(GgmlType::I32, k, n) : Tensor{};
        be->logprobs(x, t, k, out, top);
        lp[b] = ar.download<float>(out);
        if (k > 0) ids[b] = ar.download<int32_t>(top);
        ++b;
      }
      SCOPED_TRACE(::testing::Message() << "vocabulary " << v << " k " << k);
      EXPECT_EQ(ids[0], ids[1]);
      for (int64_t r = 0; r < n; ++r) {
        const float* g = lp[0].data() + r * (1 + k);
        const float* c = lp[1].data() + r * (1 + k);
        const int32_t tok = tokens[static_cast<size_t>(r)];
        if (tok < 0) {
          EXPECT_TRUE(std::isnan(g[0]) && std::isnan(c[0])) << "row " << r;
          if (k == 0) continue;
        }
        const float lse = tok >= 0 ? logits[static_cast<size_t>(r * v + tok)] - c[0]
                                   : logits[static_cast<size_t>(r * v + ids[1][r * k])] - c[1];
        for (int j = tok >= 0 ? 0 : 1; j < 1 + k; ++j) {
          ASSERT_TRUE(std::isfinite(c[j])) << "row " << r << " entry " << j;
          EXPECT_NEAR(g[j], c[j], 2 * ulp(lse) + ulp(c[j])) << "row " << r << " entry " << j;
        }
        for (int j = 1; j < k; ++j) EXPECT_LE(c[j + 1], c[j]);  // most likely first
      }
    }
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
