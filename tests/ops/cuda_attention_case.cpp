// The CUDA attention tests' cases (cuda_attention_case.h). Compiled to nothing without CUDA.
#ifdef TEMPO9_HAVE_CUDA

#include "cuda_attention_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "quant/half.h"

namespace t9::test {

Data make_data(std::mt19937_64& rng, const Case& c) {
  std::vector<int32_t> ids(kPoolBlocks);
  for (int i = 0; i < kPoolBlocks; ++i) ids[static_cast<size_t>(i)] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  Data d;
  size_t next = 0;
  const AttnParams& p = c.p;
  for (const Seq& s : c.seqs) {
    const int ctx = s.n_past + s.n_q;
    const int off = static_cast<int>(d.tables.size());
    d.write_meta.push_back({d.kv_rows, ctx, 0, off});
    d.attn_meta.push_back({d.q_rows, s.n_q, s.n_past, off});
    for (int b = 0; b < (ctx + p.block_size - 1) / p.block_size; ++b)
      d.tables.push_back(ids.at(next++));
    d.kv_rows += ctx;
    d.q_rows += s.n_q;
  }
  d.k = random_floats(rng, static_cast<size_t>(d.kv_rows * p.n_kv_head * p.head_dim));
  d.v = random_floats(rng, static_cast<size_t>(d.kv_rows * p.n_kv_head * p.head_dim));
  // Large queries spread the logits over ~10 so softmax, window and softcap all matter.
  d.q = random_floats(rng, static_cast<size_t>(d.q_rows * p.n_head * p.head_dim), -3.0f, 3.0f);
  return d;
}

std::vector<int32_t> as_ints(const std::vector<AttnSeq>& m) {
  std::vector<int32_t> v(m.size() * 4);
  std::memcpy(v.data(), m.data(), v.size() * 4);
  return v;
}

Result2 run(Backend& be, const Case& c, const Data& d, const std::vector<float>* gate) {
  DeviceArena ar(be);
  AttnParams p = c.p;
  p.n_seqs = static_cast<int>(c.seqs.size());
  Tensor kc = ar.poisoned(c.cache, p.head_dim, p.n_kv_head, kPoolBlocks * p.block_size);
  Tensor vc = ar.poisoned(c.cache, p.head_dim, p.n_kv_head, kPoolBlocks * p.block_size);
  Tensor bt = ar.from_host(d.tables, GgmlType::I32, static_cast<int64_t>(d.tables.size()));
  be.write_kv(ar.from_host(d.k, GgmlType::F32, p.head_dim, p.n_kv_head, d.kv_rows),
              ar.from_host(d.v, GgmlType::F32, p.head_dim, p.n_kv_head, d.kv_rows), kc, vc,
              ar.from_host(as_ints(d.write_meta), GgmlType::I32, 4, p.n_seqs), bt, p);
  Tensor out = ar.poisoned(GgmlType::F32, p.head_dim, p.n_head, d.q_rows);
  const Tensor q = ar.from_host(d.q, GgmlType::F32, p.head_dim, p.n_head, d.q_rows);
  const Tensor seqs = ar.from_host(as_ints(d.attn_meta), GgmlType::I32, 4, p.n_seqs);
  if (gate != nullptr)
    be.gated_attention(q, kc, vc, seqs, bt, p,
                       ar.from_host(*gate, GgmlType::F32, p.head_dim, p.n_head, d.q_rows), out);
  else
    be.attention(q, kc, vc, seqs, bt, p, out);
  return {ar.download<float>(out), ar.download<uint8_t>(kc), ar.download<uint8_t>(vc)};
}

namespace {

float round_cache(float x, GgmlType t) {
  return t == GgmlType::F16 ? f16_to_f32(f32_to_f16(x)) : x;
}

}  // namespace

// Checks every output against a double reference. Error budget per (row, head), u = 2^-24:
// each logit is a head_dim-term float dot, scaled, maybe soft-capped: off by at most
// ds = (head_dim + 4) u * scale * sum|q k| (tanh and the scale are 1-Lipschitz). Normalized
// softmax weights then move by <= 2 ds relatively; the float sums over n keys (weights, V) and
// the rescalings (one per group of kernel-side keys: groups of 16 / 8 / 4 / 2 keys for head_dim
// <= 64 / 128 / 256 / 512, plus the warp and split merges) add <= (2 n + n / group + 6) u
// relative (+ 2 slack); |v| <= 1 bounds the output's scale.
// The tensor-core path (F16 pools, head_dim 64 / 128 / 256) also rounds q to f16 (relative
// h = 2^-11 per element, or 2^-25 absolute below the normal range: ds grows by h * scale *
// sum|q k| + head_dim 2^-25 scale) and each weight to f16 before the V product (<= h relative
// per weight, so <= h on the output, plus n 2^-25 for weights below the normal range, the sum
// of weights being >= 1); its fp32 mma accumulation (not round-to-nearest on every add) is
// given 2^-22 per term, n + head_dim terms.
void check_vs_dense(const Case& c, const Data& d, const std::vector<float>& got) {
  const AttnParams& p = c.p;
  const bool tensor = cuda_attention_path(p, c.cache, d.q_rows) != CudaAttnPath::kFloat;
  const double h16 = tensor ? 1.0 / 2048 : 0.0, sub16 = tensor ? 1.0 / (1 << 25) : 0.0,
               acc22 = tensor ? 1.0 / (1 << 22) : 0.0;
  const int group = p.n_head / p.n_kv_head;
  double worst = 0.0;
  int most_keys = 0;  // the most keys a row saw
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    const AttnSeq& w = d.write_meta[si];
    const AttnSeq& a = d.attn_meta[si];
    for (int j = 0; j < a.n_q; ++j) {
      const int pos = a.n_past + j;
      const int lo = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      for (int h = 0; h < p.n_head; ++h) {
        const float* q = &d.q[static_cast<size_t>(((a.q_begin + j) * p.n_head + h) * p.head_dim)];
        std::vector<double> sc;
        double max_abs_dot = 0.0;
        for (int kp = lo; kp <= pos; ++kp) {
          const size_t kr =
              static_cast<size_t>(((w.q_begin + kp) * p.n_kv_head + h / group) * p.head_dim);
          double dot = 0.0, adot = 0.0;
          for (int e = 0; e < p.head_dim; ++e) {
            const double t = double(q[e]) * round_cache(d.k[kr + static_cast<size_t>(e)], c.cache);
            dot += t;
            adot += std::fabs(t);
          }
          dot *= p.scale;
          if (p.softcap > 0) dot = p.softcap * std::tanh(dot / p.softcap);
          sc.push_back(dot);
          max_abs_dot = std::max(max_abs_dot, adot * p.scale);
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        std::vector<double> ref(static_cast<size_t>(p.head_dim), 0.0);
        double sum = 0.0;
        for (int kp = lo; kp <= pos; ++kp) {
          const double wt = std::exp(sc[static_cast<size_t>(kp - lo)] - mx);
          sum += wt;
          const size_t vr =
              static_cast<size_t>(((w.q_begin + kp) * p.n_kv_head + h / group) * p.head_dim);
          for (int e = 0; e < p.head_dim; ++e)
            ref[static_cast<size_t>(e)] +=
                wt * round_cache(d.v[vr + static_cast<size_t>(e)], c.cache);
        }
        const int n = pos - lo + 1;
        most_keys = std::max(most_keys, n);
        const double ds = ((p.head_dim + 4) * kU + h16 + p.head_dim * acc22) * max_abs_dot +
                          p.head_dim * sub16 * p.scale;
        const int key_group = p.head_dim <= 64    ? 16
                              : p.head_dim <= 128 ? 8
                              : p.head_dim <= 256 ? 4
                                                  : 2;
        const double tol = 2 * ds + (2 * n + n / key_group + 8) * kU + h16 + n * (sub16 + acc22);
        for (int e = 0; e < p.head_dim; ++e) {
          const double r = ref[static_cast<size_t>(e)] / sum;
          const float g =
              got[static_cast<size_t>(((a.q_begin + j) * p.n_head + h) * p.head_dim + e)];
          ASSERT_LE(std::fabs(g - r), tol) << "seq " << si << " q " << j << " head " << h << " dim "
                                           << e << " got " << g << " ref " << r;
          worst = std::max(worst, std::fabs(g - r) / tol);
        }
      }
    }
  }
  std::printf("[cuda attention] head_dim %d worst err/bound %.3g\n", p.head_dim, worst);
  // Past one key the float sums always round somewhere: a zero there means nothing was compared.
  // A row over one key is its v row itself (weight 1, exact), so zero is what such a case gives.
  if (most_keys > 1) {
    EXPECT_GT(worst, 0.0);
  }
  EXPECT_GT(most_keys, 0);
}

Case base(GgmlType cache, int head_dim) {
  Case c;
  c.p.n_head = 8;
  c.p.n_kv_head = 2;
  c.p.head_dim = head_dim;
  c.p.block_size = 16;
  c.p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // Chunked prefill, a fresh prompt, a decode step past several tiles of 64 keys, and another
  // chunk: contexts up to 201 keys over 13 blocks.
  c.seqs = {{20, 3}, {0, 9}, {200, 1}, {131, 4}};
  c.cache = cache;
  c.p.max_ctx = 201;
  return c;
}

std::pair<Case, Data> sub_batch(const Case& c, const Data& d, size_t si, int first, int n) {
  Case one = c;
  one.seqs = {{first, n}};
  one.p.max_ctx = first + n;
  const AttnSeq& w = d.write_meta[si];
  const AttnSeq& a = d.attn_meta[si];
  const size_t kv_row = static_cast<size_t>(c.p.n_kv_head * c.p.head_dim);
  const size_t q_row = static_cast<size_t>(c.p.n_head * c.p.head_dim);
  const int first_q = a.q_begin + (first - a.n_past);
  Data d1;
  d1.k.assign(d.k.begin() + w.q_begin * kv_row, d.k.begin() + (w.q_begin + first + n) * kv_row);
  d1.v.assign(d.v.begin() + w.q_begin * kv_row, d.v.begin() + (w.q_begin + first + n) * kv_row);
  d1.q.assign(d.q.begin() + first_q * q_row, d.q.begin() + (first_q + n) * q_row);
  d1.tables = d.tables;
  d1.write_meta = {{0, first + n, 0, w.block_table_offset}};
  d1.attn_meta = {{0, n, first, a.block_table_offset}};
  d1.kv_rows = first + n;
  d1.q_rows = n;
  return {one, d1};
}

Case case_of(int head_dim, const std::vector<Seq>& seqs, int window) {
  Case c = base(GgmlType::F16, head_dim);
  c.p.block_size = 32;
  c.seqs = seqs;
  c.p.sliding_window = window;
  c.p.n_seqs = static_cast<int>(c.seqs.size());
  c.p.max_ctx = 0;
  for (const Seq& s : c.seqs) c.p.max_ctx = std::max(c.p.max_ctx, s.n_past + s.n_q);
  return c;
}

}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
