// Gated DeltaNet and MoE CPU ops against direct double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace t9 {
namespace {

Tensor host_tensor(std::vector<float>& v, Buffer& b, int64_t ne0, int64_t ne1 = 1,
                   int64_t ne2 = 1, int64_t ne3 = 1) {
  b = Buffer{v.data(), v.size() * 4, false};
  return make_tensor(&b, 0, GgmlType::F32, ne0, ne1, ne2, ne3);
}

// The delta rule token by token in double, from the formulas in backend.h.
std::vector<double> gdn_reference(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const std::vector<float>& a,
                                  const std::vector<float>& b, const std::vector<float>& A,
                                  const std::vector<float>& dt, int T, int nk, int nv, int dk,
                                  int dv) {
  std::vector<double> out(static_cast<size_t>(T * nv * dv));
  for (int h = 0; h < nv; ++h) {
    const int kh = h / (nv / nk);
    std::vector<double> S(static_cast<size_t>(dk * dv), 0.0);
    for (int t = 0; t < T; ++t) {
      std::vector<double> qq(dk), kk(dk);
      double nq = 0, nkk = 0;
      for (int i = 0; i < dk; ++i) {
        qq[i] = q[(t * nk + kh) * dk + i];
        kk[i] = k[(t * nk + kh) * dk + i];
        nq += qq[i] * qq[i];
        nkk += kk[i] * kk[i];
      }
      for (int i = 0; i < dk; ++i) {
        qq[i] /= std::sqrt(nq + 1e-6) * std::sqrt(static_cast<double>(dk));
        kk[i] /= std::sqrt(nkk + 1e-6);
      }
      const double x = a[t * nv + h] + dt[h];
      const double g = A[h] * (x > 20 ? x : std::log1p(std::exp(x)));
      const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(b[t * nv + h])));
      for (double& s : S) s *= std::exp(g);
      for (int j = 0; j < dv; ++j) {
        double mem = 0;
        for (int i = 0; i < dk; ++i) mem += S[i * dv + j] * kk[i];
        const double d = (v[(t * nv + h) * dv + j] - mem) * beta;
        for (int i = 0; i < dk; ++i) S[i * dv + j] += kk[i] * d;
      }
      for (int j = 0; j < dv; ++j) {
        double o = 0;
        for (int i = 0; i < dk; ++i) o += S[i * dv + j] * qq[i];
        out[(t * nv + h) * dv + j] = o;
      }
    }
  }
  return out;
}

// Chunked (chunks of 64 and of 5) and recurrent forms vs the double reference over 150 tokens,
// also split into two calls (state carried). float32 over ~150 steps of O(1) values: 1e-4.
TEST(GatedDeltaNet, ChunkedAndRecurrentMatchReference) {
  const int T = 150, nk = 2, nv = 4, dk = 16, dv = 8;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto rnd = [&](size_t n) {
    std::vector<float> x(n);
    for (float& f : x) f = nd(rng);
    return x;
  };
  std::vector<float> q = rnd(T * nk * dk), k = rnd(T * nk * dk), v = rnd(T * nv * dv);
  std::vector<float> a = rnd(T * nv), b = rnd(T * nv), A{-0.5f, -2.0f, -0.1f, -4.0f},
                     dt = rnd(nv);
  const std::vector<double> ref = gdn_reference(q, k, v, a, b, A, dt, T, nk, nv, dk, dv);
  CpuBackend be;
  for (int min_chunked : {2, 1000}) {
    for (int chunk : {64, 5}) {
      for (int split : {T, 61}) {
        std::vector<float> state(nv * dk * dv), out(T * nv * dv);
        Buffer bq, bk, bv, ba, bb, bA, bdt, bs, bo, bseq;
        GdnParams p{nk, nv, dk, dv, false, chunk, min_chunked, 1e-6f};
        int first = 0;
        for (int n : {split, T - split}) {
          if (n == 0) continue;
          std::vector<int32_t> seq{first, n, 0, first == 0};
          bseq = Buffer{seq.data(), 16, false};
          be.gated_delta_net(host_tensor(q, bq, dk, nk, T), host_tensor(k, bk, dk, nk, T),
                             host_tensor(v, bv, dv, nv, T), host_tensor(a, ba, nv, 1, T),
                             host_tensor(b, bb, nv, 1, T), host_tensor(A, bA, nv),
                             host_tensor(dt, bdt, nv), host_tensor(state, bs, dv, dk, nv, 1),
                             make_tensor(&bseq, 0, GgmlType::I32, 4, 1), p,
                             host_tensor(out, bo, dv, nv, T));
          first += n;
        }
        double mx = 0;
        for (size_t i = 0; i < out.size(); ++i) mx = std::max(mx, std::fabs(out[i] - ref[i]));
        EXPECT_LT(mx, 1e-4) << "min_chunked " << min_chunked << " chunk " << chunk << " split "
                            << split;
      }
    }
  }
}

// matmul_id gives every (token, rank) row the same bits as a plain matmul of that row with its
// expert's matrix (grouped dispatch is batch-invariant), for float and quantized-activation
// paths alike.
TEST(MatmulId, EqualsPerRowMatmulBitwise) {
  const int n_in = 64, n_out = 24, X = 5, n = 9, k = 2;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> w(X * n_out * n_in), x(n * n_in), out(n * k * n_out);
  for (float& f : w) f = nd(rng);
  for (float& f : x) f = nd(rng);
  std::vector<int32_t> ids(n * k);
  for (int t = 0; t < n; ++t) ids[t * k] = t % X, ids[t * k + 1] = (t * 3 + 1) % X;
  CpuBackend be;
  Buffer bw, bx, bo, bi{ids.data(), ids.size() * 4, false};
  const Tensor wt = host_tensor(w, bw, n_in, n_out, X);
  be.matmul_id(wt, host_tensor(x, bx, n_in, 1, n), make_tensor(&bi, 0, GgmlType::I32, k, n),
               host_tensor(out, bo, n_out, k, n));
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      std::vector<float> xr(x.begin() + t * n_in, x.begin() + (t + 1) * n_in), yr(n_out);
      std::vector<float> we(w.begin() + ids[t * k + j] * n_out * n_in,
                            w.begin() + (ids[t * k + j] + 1) * n_out * n_in);
      Buffer b1, b2, b3;
      be.matmul(host_tensor(we, b1, n_in, n_out), host_tensor(xr, b2, n_in, 1), Tensor{},
                host_tensor(yr, b3, n_out, 1));
      for (int i = 0; i < n_out; ++i) ASSERT_EQ(out[(t * k + j) * n_out + i], yr[i]);
    }
}

// Router: softmax, top-2, renormalised; the expected values are computed here by hand.
TEST(MoeRoute, TopKRenormalised) {
  std::vector<float> logits{0.0f, 2.0f, 1.0f, 2.0f}, w(2);
  std::vector<int32_t> ids(2);
  CpuBackend be;
  Buffer bl, bw, bi{ids.data(), 8, false};
  be.moe_route(host_tensor(logits, bl, 4, 1), 2, true, make_tensor(&bi, 0, GgmlType::I32, 2, 1),
               host_tensor(w, bw, 2, 1));
  EXPECT_EQ(ids[0], 1);  // tie with expert 3: lower index first
  EXPECT_EQ(ids[1], 3);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);
}

}  // namespace
}  // namespace t9
