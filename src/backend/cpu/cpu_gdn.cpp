// CPU ops of Gated DeltaNet layers: the short causal conv1d with its rolling state, and the gated
// delta rule in two forms — token by token (decode) and chunked-parallel (prefill; the UT/WY
// form of the reference implementations, chunks of 64). Work is split over (sequence, value
// head) pairs, each computed start to end by one thread, so results never depend on the thread
// count or on the other sequences of the batch.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"

namespace t9 {
namespace {

using cpu::check_f32_rows;
using cpu::f32_row;

float silu(float v) {
  return v / (1.0f + std::exp(-v));
}
float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}
// torch.nn.functional.softplus (beta 1, threshold 20).
float softplus(float v) {
  return v > 20.0f ? v : std::log1p(std::exp(v));
}

std::vector<RecurrentSeq> read_seqs(const Tensor& seqs) {
  T9_CHECK(seqs.type == GgmlType::I32 && seqs.ne[0] == 4 && seqs.is_contiguous(),
           "recurrent seqs must be I32 [n_seqs, 4]");
  std::vector<RecurrentSeq> out(static_cast<size_t>(seqs.ne[1]));
  std::memcpy(out.data(), cpu::base_ptr(seqs), out.size() * sizeof(RecurrentSeq));
  return out;
}

// Element h of the value heads of token t in a [n_tokens, r, n_v / r] tensor.
float head_value(const Tensor& t, int64_t tok, int64_t h) {
  return f32_row(t, tok * t.ne[1] + h / t.ne[0])[h % t.ne[0]];
}

// One (sequence, value head) of the gated delta rule: inputs gathered into dense arrays.
struct GdnTask {
  int64_t T, dk, dv;
  const float* q;     // [T, dk], normalised and scaled
  const float* k;     // [T, dk], normalised
  const float* v;     // [T, dv]
  const float* g;     // [T] log decay
  const float* beta;  // [T]
  float* S;           // [dk, dv] state, updated
  float* out;         // [T, dv]
};

void gdn_recurrent(const GdnTask& x) {
  std::vector<float> delta(static_cast<size_t>(x.dv));
  for (int64_t t = 0; t < x.T; ++t) {
    const float* q = x.q + t * x.dk;
    const float* k = x.k + t * x.dk;
    const float* v = x.v + t * x.dv;
    const float decay = std::exp(x.g[t]);
    for (int64_t i = 0; i < x.dk * x.dv; ++i) x.S[i] *= decay;
    for (int64_t j = 0; j < x.dv; ++j) delta[j] = 0.0f;
    for (int64_t i = 0; i < x.dk; ++i) {
      const float* s = x.S + i * x.dv;
      for (int64_t j = 0; j < x.dv; ++j) delta[j] += s[j] * k[i];
    }
    for (int64_t j = 0; j < x.dv; ++j) delta[j] = (v[j] - delta[j]) * x.beta[t];
    float* o = x.out + t * x.dv;
    for (int64_t j = 0; j < x.dv; ++j) o[j] = 0.0f;
    for (int64_t i = 0; i < x.dk; ++i) {
      float* s = x.S + i * x.dv;
      for (int64_t j = 0; j < x.dv; ++j) {
        s[j] += k[i] * delta[j];
        o[j] += s[j] * q[i];
      }
    }
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One chunk of L tokens starting at c0: the UT transform turns the chunk's L sequential
// rank-1 updates into triangular solves; the state is read once and written once.
void gdn_chunk(const GdnTask& x, int64_t c0, int64_t L, std::vector<float>& ws) {
  const int64_t dk = x.dk, dv = x.dv;
  ws.resize(static_cast<size_t>(L + L * L + L * dv + L * dk + L * dv));
  float* G = ws.data();           // [L] cumulative log decay
  float* A = G + L;               // [L, L] strictly lower: (beta_i k_i . k_j) exp(G_i - G_j)
  float* U = A + L * L;           // [L, dv] (I + A)^-1 (beta v)
  float* W = U + L * dv;          // [L, dk] (I + A)^-1 (beta k exp(G))
  float* Vn = W + L * dk;         // [L, dv] corrected values
  const float* q = x.q + c0 * dk;
  const float* k = x.k + c0 * dk;
  const float* v = x.v + c0 * dv;
  const float* beta = x.beta + c0;
  float acc = 0.0f;
  for (int64_t i = 0; i < L; ++i) G[i] = acc += x.g[c0 + i];
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < i; ++j)
      A[i * L + j] = beta[i] * dot(k + i * dk, k + j * dk, dk) * std::exp(G[i] - G[j]);
  // Forward substitution with the unit lower-triangular I + A.
  for (int64_t i = 0; i < L; ++i) {
    float* u = U + i * dv;
    float* w = W + i * dk;
    const float eg = std::exp(G[i]);
    for (int64_t m = 0; m < dv; ++m) u[m] = beta[i] * v[i * dv + m];
    for (int64_t m = 0; m < dk; ++m) w[m] = beta[i] * k[i * dk + m] * eg;
    for (int64_t j = 0; j < i; ++j) {
      const float a = A[i * L + j];
      for (int64_t m = 0; m < dv; ++m) u[m] -= a * U[j * dv + m];
      for (int64_t m = 0; m < dk; ++m) w[m] -= a * W[j * dk + m];
    }
  }
  // Vn = U - W S: what the old state does not already predict.
  for (int64_t i = 0; i < L; ++i) {
    float* vn = Vn + i * dv;
    for (int64_t m = 0; m < dv; ++m) vn[m] = U[i * dv + m];
    for (int64_t l = 0; l < dk; ++l) {
      const float wl = W[i * dk + l];
      const float* s = x.S + l * dv;
      for (int64_t m = 0; m < dv; ++m) vn[m] -= wl * s[m];
    }
  }
  // out_i = (q_i exp(G_i)) S + sum_{j <= i} (q_i . k_j) exp(G_i - G_j) Vn_j
  for (int64_t i = 0; i < L; ++i) {
    float* o = x.out + (c0 + i) * dv;
    const float eg = std::exp(G[i]);
    for (int64_t m = 0; m < dv; ++m) o[m] = 0.0f;
    for (int64_t l = 0; l < dk; ++l) {
      const float ql = q[i * dk + l] * eg;
      const float* s = x.S + l * dv;
      for (int64_t m = 0; m < dv; ++m) o[m] += ql * s[m];
    }
    for (int64_t j = 0; j <= i; ++j) {
      const float c = dot(q + i * dk, k + j * dk, dk) * std::exp(G[i] - G[j]);
      for (int64_t m = 0; m < dv; ++m) o[m] += c * Vn[j * dv + m];
    }
  }
  // S = exp(G_last) S + sum_i (k_i exp(G_last - G_i)) Vn_i^T
  const float last = G[L - 1], el = std::exp(last);
  for (int64_t l = 0; l < dk * dv; ++l) x.S[l] *= el;
  for (int64_t i = 0; i < L; ++i) {
    const float e = std::exp(last - G[i]);
    for (int64_t l = 0; l < dk; ++l) {
      const float kl = k[i * dk + l] * e;
      float* s = x.S + l * dv;
      for (int64_t m = 0; m < dv; ++m) s[m] += kl * Vn[i * dv + m];
    }
  }
}

void l2_normalize(float* x, int64_t n, float eps, float scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void CpuBackend::ssm_conv(const Tensor& x, const Tensor& w, const Tensor& state,
                          const Tensor& seqs, const Tensor& out) {
  check_f32_rows(x, "ssm_conv x");
  check_f32_rows(w, "ssm_conv w");
  check_f32_rows(state, "ssm_conv state");
  check_f32_rows(out, "ssm_conv out");
  const int64_t K = w.ne[0], C = w.ne[1];
  T9_CHECK(K >= 2 && x.ne[0] == C && out.ne[0] == C && out.n_rows() == x.n_rows(),
           "ssm_conv: x, out must be [n, {}] for a kernel of {}", C, K);
  T9_CHECK(state.ne[0] == C && state.ne[1] == K - 1, "ssm_conv: state must be [slots, {}, {}]",
           K - 1, C);
  const int64_t n_slots = state.ne[2] * state.ne[3];
  for (const RecurrentSeq& s : read_seqs(seqs)) {
    T9_CHECK(s.slot >= 0 && s.slot < n_slots && s.q_begin >= 0 && s.n_q >= 0 &&
                 s.q_begin + s.n_q <= x.n_rows(),
             "ssm_conv: sequence rows [{}, +{}) slot {}", s.q_begin, s.n_q, s.slot);
    auto st_row = [&](int64_t i) { return f32_row(state, s.slot * (K - 1) + i); };
    if (s.reset)
      for (int64_t i = 0; i < K - 1; ++i) std::fill_n(st_row(i), C, 0.0f);
    // xx[r] for r in [0, K - 1 + n_q): the state's rows, then this step's.
    auto xx = [&](int64_t r) { return r < K - 1 ? st_row(r) : f32_row(x, s.q_begin + r - (K - 1)); };
    pool_.parallel_for(C, 64, [&](int64_t c0, int64_t c1) {
      for (int64_t t = 0; t < s.n_q; ++t) {
        float* o = f32_row(out, s.q_begin + t);
        for (int64_t c = c0; c < c1; ++c) {
          const float* wc = f32_row(w, c);
          float sum = 0.0f;
          for (int64_t i = 0; i < K; ++i) sum += wc[i] * xx(t + i)[c];
          o[c] = silu(sum);
        }
      }
      // New state: the last K - 1 rows of xx, moved forward in place (row i takes row i + n_q).
      for (int64_t i = 0; i < K - 1; ++i) {
        const float* src = xx(i + s.n_q);
        float* dst = st_row(i);
        for (int64_t c = c0; c < c1; ++c) dst[c] = src[c];
      }
    });
  }
}

void CpuBackend::gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& a, const Tensor& b, const Tensor& A,
                                 const Tensor& dt_bias, const Tensor& state, const Tensor& seqs,
                                 const GdnParams& p, const Tensor& out) {
  for (const Tensor* t : {&q, &k, &v, &a, &b, &A, &dt_bias, &state, &out})
    check_f32_rows(*t, "gated_delta_net input");
  const int64_t nk = p.n_k_heads, nv = p.n_v_heads, dk = p.d_k, dv = p.d_v;
  T9_CHECK(nk > 0 && nv % nk == 0 && p.chunk_size > 0, "gated_delta_net: {} v heads, {} k heads",
           nv, nk);
  const int64_t n = q.ne[2];
  T9_CHECK(q.ne[0] == dk && q.ne[1] == nk && k.ne == q.ne, "gated_delta_net: q, k shape");
  T9_CHECK(v.ne[0] == dv && v.ne[1] == nv && v.ne[2] == n, "gated_delta_net: v shape");
  T9_CHECK(out.ne[0] == dv && out.ne[1] == nv && out.ne[2] == n, "gated_delta_net: out shape");
  T9_CHECK(a.ne[0] * a.ne[1] == nv && a.ne[2] == n && b.ne == a.ne, "gated_delta_net: a, b shape");
  T9_CHECK(A.n_elements() == nv && dt_bias.n_elements() == nv, "gated_delta_net: A, dt_bias");
  T9_CHECK(state.ne[0] == dv && state.ne[1] == dk && state.ne[2] == nv && state.is_contiguous(),
           "gated_delta_net: state must be [slots, {}, {}, {}]", nv, dk, dv);
  const std::vector<RecurrentSeq> ss = read_seqs(seqs);
  const float* Ah = f32_row(A, 0);
  const float* dt = f32_row(dt_bias, 0);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const auto n_tasks = static_cast<int64_t>(ss.size()) * nv;
  pool_.parallel_for(n_tasks, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> buf, ws;
    for (int64_t task = i0; task < i1; ++task) {
      const RecurrentSeq& s = ss[static_cast<size_t>(task / nv)];
      const int64_t h = task % nv, T = s.n_q;
      T9_CHECK(s.slot >= 0 && s.slot < state.ne[3] && s.q_begin >= 0 && s.q_begin + T <= n,
               "gated_delta_net: sequence rows [{}, +{}) slot {}", s.q_begin, T, s.slot);
      const int64_t kh = p.v_heads_tiled ? h % nk : h / (nv / nk);
      buf.resize(static_cast<size_t>(T * (2 * dk + 2 * dv + 2)));
      GdnTask x{T, dk, dv, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
      float* qb = buf.data();
      float* kb = qb + T * dk;
      float* vb = kb + T * dk;
      float* gb = vb + T * dv;
      float* bb = gb + T;
      float* ob = bb + T;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = s.q_begin + t;
        std::copy_n(f32_row(q, r * nk + kh), dk, qb + t * dk);
        std::copy_n(f32_row(k, r * nk + kh), dk, kb + t * dk);
        std::copy_n(f32_row(v, r * nv + h), dv, vb + t * dv);
        l2_normalize(qb + t * dk, dk, p.l2_eps, q_scale);
        l2_normalize(kb + t * dk, dk, p.l2_eps, 1.0f);
        gb[t] = Ah[h] * softplus(head_value(a, r, h) + dt[h]);
        bb[t] = sigmoid(head_value(b, r, h));
      }
      x.q = qb, x.k = kb, x.v = vb, x.g = gb, x.beta = bb, x.out = ob;
      x.S = f32_row(state, (s.slot * nv + h) * dk);
      if (s.reset) std::fill_n(x.S, dk * dv, 0.0f);
      if (T >= p.min_chunked_tokens) {
        for (int64_t c0 = 0; c0 < T; c0 += p.chunk_size)
          gdn_chunk(x, c0, std::min<int64_t>(p.chunk_size, T - c0), ws);
      } else {
        gdn_recurrent(x);
      }
      for (int64_t t = 0; t < T; ++t)
        std::copy_n(ob + t * dv, dv, f32_row(out, (s.q_begin + t) * nv + h));
    }
  });
}

}  // namespace t9
