// CPU mixture-of-experts ops: routing (softmax + top-k), grouped expert matmul and the weighted
// combination, plus the sigmoid gate shared with gated attention and the shared expert.
//
// matmul_id groups the batch's (token, rank) rows by expert and runs each used expert once over
// its rows through the ordinary matmul (so every weight type and ISA path is reused, and a row's
// bits stay independent of the other rows: matmul is batch-invariant).
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"

namespace t9 {
namespace {

using cpu::check_f32_rows;
using cpu::f32_row;

int32_t* i32_row(const Tensor& t, int64_t r) {
  return reinterpret_cast<int32_t*>(cpu::row_ptr(t, r));
}

float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}

}  // namespace

void CpuBackend::moe_route(const Tensor& logits, int k, bool normalize, const Tensor& ids,
                           const Tensor& weights) {
  check_f32_rows(logits, "moe_route logits");
  check_f32_rows(weights, "moe_route weights");
  const int64_t n = logits.n_rows(), n_expert = logits.ne[0];
  T9_CHECK(k >= 1 && k <= n_expert, "moe_route: k = {} of {} experts", k, n_expert);
  T9_CHECK(ids.type == GgmlType::I32 && ids.ne[0] == k && ids.n_rows() == n,
           "moe_route: ids must be I32 [{}, {}]", n, k);
  T9_CHECK(weights.ne[0] == k && weights.n_rows() == n, "moe_route: weights must be [{}, {}]", n,
           k);
  std::vector<float> p(static_cast<size_t>(n_expert));
  std::vector<bool> taken(static_cast<size_t>(n_expert));
  for (int64_t r = 0; r < n; ++r) {
    const float* x = f32_row(logits, r);
    float mx = x[0];
    for (int64_t e = 1; e < n_expert; ++e) mx = std::max(mx, x[e]);
    double sum = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
      p[e] = std::exp(x[e] - mx);
      sum += p[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (float& v : p) v *= inv;
    std::fill(taken.begin(), taken.end(), false);
    int32_t* id = i32_row(ids, r);
    float* w = f32_row(weights, r);
    float picked = 0.0f;
    for (int j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < n_expert; ++e)
        if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;  // ties: lower index
      taken[best] = true;
      id[j] = static_cast<int32_t>(best);
      w[j] = p[best];
      picked += p[best];
    }
    if (normalize)
      for (int j = 0; j < k; ++j) w[j] /= picked;
  }
}

void CpuBackend::matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids,
                           const Tensor& out) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_expert = w.ne[2];
  check_f32_rows(x, "matmul_id x");
  check_f32_rows(out, "matmul_id out");
  T9_CHECK(w.ne[3] == 1, "matmul_id: weights must be [n_expert, n_out, n_in]");
  T9_CHECK(ids.type == GgmlType::I32 && ids.ne[2] == 1 && ids.ne[3] == 1,
           "matmul_id: ids must be I32 [n, k]");
  const int64_t k = ids.ne[0], n = ids.ne[1];
  T9_CHECK(x.ne[0] == n_in && x.ne[2] == n && (x.ne[1] == 1 || x.ne[1] == k),
           "matmul_id: x must be [{}, 1 or {}, {}]", n, k, n_in);
  T9_CHECK(out.ne[0] == n_out && out.ne[1] == k && out.ne[2] == n,
           "matmul_id: out must be [{}, {}, {}]", n, k, n_out);
  // (token, rank) rows per expert, in row order.
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* id = reinterpret_cast<const int32_t*>(cpu::row_ptr(ids, t));
    for (int64_t j = 0; j < k; ++j) {
      T9_CHECK(id[j] >= 0 && id[j] < n_expert, "matmul_id: expert id {} of {}", id[j], n_expert);
      rows[static_cast<size_t>(id[j])].push_back(t * k + j);
    }
  }
  std::vector<float> xin, yout;
  for (int64_t e = 0; e < n_expert; ++e) {
    const std::vector<int64_t>& rs = rows[static_cast<size_t>(e)];
    if (rs.empty()) continue;
    const auto m = static_cast<int64_t>(rs.size());
    xin.resize(static_cast<size_t>(m * n_in));
    yout.resize(static_cast<size_t>(m * n_out));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = rs[i] / k, j = rs[i] % k;
      const float* src = f32_row(x, t * x.ne[1] + (x.ne[1] == 1 ? 0 : j));
      std::copy_n(src, n_in, &xin[static_cast<size_t>(i * n_in)]);
    }
    Buffer xb{xin.data(), xin.size() * 4, false}, yb{yout.data(), yout.size() * 4, false};
    Tensor we = w;  // expert e: a 2-D [n_out, n_in] view
    we.offset = w.offset + static_cast<size_t>(e) * w.nb[2];
    we.ne = {n_in, n_out, 1, 1};
    we.nb[3] = we.nb[2] = w.nb[1] * static_cast<size_t>(n_out);
    matmul(we, make_tensor(&xb, 0, GgmlType::F32, n_in, m), Tensor{},
           make_tensor(&yb, 0, GgmlType::F32, n_out, m));
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(&yout[static_cast<size_t>(i * n_out)], n_out, f32_row(out, rs[i]));
  }
}

void CpuBackend::moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
  check_f32_rows(y, "moe_combine y");
  check_f32_rows(weights, "moe_combine weights");
  check_f32_rows(out, "moe_combine out");
  const int64_t d = y.ne[0], k = y.ne[1], n = y.ne[2];
  T9_CHECK(weights.ne[0] == k && weights.n_rows() == n, "moe_combine: weights must be [{}, {}]", n,
           k);
  T9_CHECK(out.ne[0] == d && out.n_rows() == n, "moe_combine: out must be [{}, {}]", n, d);
  pool_.parallel_for(n, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* w = f32_row(weights, t);
      float* o = f32_row(out, t);
      const float* y0 = f32_row(y, t * k);
      for (int64_t i = 0; i < d; ++i) o[i] = w[0] * y0[i];
      for (int64_t j = 1; j < k; ++j) {
        const float* yj = f32_row(y, t * k + j);
        for (int64_t i = 0; i < d; ++i) o[i] += w[j] * yj[i];
      }
    }
  });
}

void CpuBackend::mul_sigmoid(const Tensor& a, const Tensor& g, const Tensor& out) {
  check_f32_rows(a, "mul_sigmoid a");
  check_f32_rows(g, "mul_sigmoid g");
  check_f32_rows(out, "mul_sigmoid out");
  cpu::check_same_shape(a, out, "mul_sigmoid");
  const bool per_row = g.ne[0] == 1 && a.ne[0] != 1;
  T9_CHECK(g.n_rows() == a.n_rows() && (per_row || g.ne[0] == a.ne[0]),
           "mul_sigmoid: g must be a's shape or [rows, 1]");
  for (int64_t r = 0; r < a.n_rows(); ++r) {
    const float* ar = f32_row(a, r);
    const float* gr = f32_row(g, r);
    float* o = f32_row(out, r);
    if (per_row) {
      const float s = sigmoid(gr[0]);
      for (int64_t i = 0; i < a.ne[0]; ++i) o[i] = ar[i] * s;
    } else {
      for (int64_t i = 0; i < a.ne[0]; ++i) o[i] = ar[i] * sigmoid(gr[i]);
    }
  }
}

}  // namespace t9
