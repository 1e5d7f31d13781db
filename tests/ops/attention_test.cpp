// write_kv + paged attention vs a dense double-precision reference: shuffled non-contiguous block
// tables, GQA, sliding window, logit soft-capping, F16 and F32 pools; batch and thread invariance.
#include <algorithm>
#include <cmath>

#include "ops_test_util.h"
#include "quant/half.h"

namespace t9::test {
namespace {

struct SeqSpec {
  int n_past, n_q;
};

struct AttnCase {
  AttnParams p;
  std::vector<SeqSpec> seqs;
  GgmlType cache_type;
};

struct SeqData {
  std::vector<float> k, v;  // [ctx, n_kv_head, head_dim]
  std::vector<float> q;     // [n_q, n_head, head_dim]
  std::vector<int32_t> blocks;
};

float round_cache(float x, GgmlType t) {
  return t == GgmlType::F16 ? f16_to_f32(f32_to_f16(x)) : x;
}

// Dense reference for one query row/head, in double, over the cache-rounded K/V.
std::vector<double> ref_attention(const AttnCase& s, const SeqData& d, int j, int h, int n_past) {
  const AttnParams& p = s.p;
  const int pos = n_past + j, kvh = h / (p.n_head / p.n_kv_head);
  const int lo = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
  std::vector<double> sc;
  for (int kp = lo; kp <= pos; ++kp) {
    double dot = 0;
    for (int i = 0; i < p.head_dim; ++i)
      dot += double(d.q[(j * p.n_head + h) * p.head_dim + i]) *
             round_cache(d.k[(kp * p.n_kv_head + kvh) * p.head_dim + i], s.cache_type);
    dot *= p.scale;
    if (p.softcap > 0) dot = p.softcap * std::tanh(dot / p.softcap);
    sc.push_back(dot);
  }
  const double mx = *std::max_element(sc.begin(), sc.end());
  double sum = 0;
  std::vector<double> out(p.head_dim, 0.0);
  for (int kp = lo; kp <= pos; ++kp) {
    const double w = std::exp(sc[kp - lo] - mx);
    sum += w;
    for (int i = 0; i < p.head_dim; ++i)
      out[i] += w * round_cache(d.v[(kp * p.n_kv_head + kvh) * p.head_dim + i], s.cache_type);
  }
  for (auto& o : out) o /= sum;
  return out;
}

// Runs write_kv for every sequence's whole context, then attention for the new rows; returns
// the attention output [n_tokens, n_head, head_dim]. Also checks the pool slots write_kv filled.
std::vector<float> run_paged(Backend& be, const AttnCase& s, const std::vector<SeqData>& data,
                             int n_pool_blocks) {
  DeviceArena arena(be);
  const AttnParams& p = s.p;
  std::vector<float> kall, vall, qall;
  std::vector<AttnSeq> write_meta, attn_meta;
  std::vector<int32_t> tables;
  int n_kv_rows = 0, n_q_rows = 0;
  for (size_t i = 0; i < s.seqs.size(); ++i) {
    const int ctx = s.seqs[i].n_past + s.seqs[i].n_q;
    const int off = static_cast<int>(tables.size());
    write_meta.push_back({n_kv_rows, ctx, 0, off});
    attn_meta.push_back({n_q_rows, s.seqs[i].n_q, s.seqs[i].n_past, off});
    kall.insert(kall.end(), data[i].k.begin(), data[i].k.end());
    vall.insert(vall.end(), data[i].v.begin(), data[i].v.end());
    qall.insert(qall.end(), data[i].q.begin(), data[i].q.end());
    tables.insert(tables.end(), data[i].blocks.begin(), data[i].blocks.end());
    n_kv_rows += ctx;
    n_q_rows += s.seqs[i].n_q;
  }
  const int n_seqs = static_cast<int>(s.seqs.size());
  auto as_ints = [](const std::vector<AttnSeq>& m) {
    std::vector<int32_t> v(m.size() * 4);
    std::memcpy(v.data(), m.data(), v.size() * 4);
    return v;
  };
  Tensor kc = arena.poisoned(s.cache_type, p.head_dim, p.n_kv_head, n_pool_blocks * p.block_size);
  Tensor vc = arena.poisoned(s.cache_type, p.head_dim, p.n_kv_head, n_pool_blocks * p.block_size);
  Tensor bt = arena.from_host(tables, GgmlType::I32, static_cast<int64_t>(tables.size()));
  AttnParams pw = p;
  pw.n_seqs = n_seqs;
  be.write_kv(arena.from_host(kall, GgmlType::F32, p.head_dim, p.n_kv_head, n_kv_rows),
              arena.from_host(vall, GgmlType::F32, p.head_dim, p.n_kv_head, n_kv_rows), kc, vc,
              arena.from_host(as_ints(write_meta), GgmlType::I32, 4, n_seqs), bt, pw);
  // Every written slot holds the cache-rounded row of its (sequence, position).
  if (s.cache_type == GgmlType::F32) {
    const auto kpool = arena.download<float>(kc);
    const int64_t row = p.n_kv_head * p.head_dim;
    for (size_t i = 0; i < s.seqs.size(); ++i)
      for (int pos = 0; pos < s.seqs[i].n_past + s.seqs[i].n_q; ++pos) {
        const int64_t slot = data[i].blocks[pos / p.block_size] * p.block_size + pos % p.block_size;
        for (int64_t e = 0; e < row; ++e)
          EXPECT_EQ(kpool[slot * row + e], data[i].k[pos * row + e])
              << "seq " << i << " pos " << pos;
      }
  }
  Tensor out = arena.poisoned(GgmlType::F32, p.head_dim, p.n_head, n_q_rows);
  be.attention(arena.from_host(qall, GgmlType::F32, p.head_dim, p.n_head, n_q_rows), kc, vc,
               arena.from_host(as_ints(attn_meta), GgmlType::I32, 4, n_seqs), bt, pw, out);
  return arena.download<float>(out);
}

std::vector<SeqData> make_data(std::mt19937_64& rng, const AttnCase& s, int n_pool_blocks) {
  std::vector<int32_t> ids(n_pool_blocks);
  for (int i = 0; i < n_pool_blocks; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  std::vector<SeqData> out;
  const AttnParams& p = s.p;
  for (const SeqSpec& q : s.seqs) {
    const int ctx = q.n_past + q.n_q;
    SeqData d;
    d.k = random_floats(rng, static_cast<size_t>(ctx * p.n_kv_head * p.head_dim));
    d.v = random_floats(rng, static_cast<size_t>(ctx * p.n_kv_head * p.head_dim));
    // Large queries make the logits span ~10 so softmax, window and softcap all matter.
    d.q = random_floats(rng, static_cast<size_t>(q.n_q * p.n_head * p.head_dim), -3.0f, 3.0f);
    for (int b = 0; b < (ctx + p.block_size - 1) / p.block_size; ++b)
      d.blocks.push_back(ids.at(next++));
    out.push_back(std::move(d));
  }
  return out;
}

void check_against_dense(const AttnCase& s, double tol = 1e-4) {
  auto rng = test_rng();
  const int n_pool_blocks = 24;
  const auto data = make_data(rng, s, n_pool_blocks);
  for (CpuIsa isa : supported_isas()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    CpuBackend be(CpuBackendConfig{2, isa});
    const auto got = run_paged(be, s, data, n_pool_blocks);
    const AttnParams& p = s.p;
    int row = 0;
    for (size_t i = 0; i < s.seqs.size(); ++i) {
      for (int j = 0; j < s.seqs[i].n_q; ++j, ++row) {
        for (int h = 0; h < p.n_head; ++h) {
          const auto ref = ref_attention(s, data[i], j, h, s.seqs[i].n_past);
          for (int e = 0; e < p.head_dim; ++e) {
            // Worst case: each logit (head_dim float products, |q.k| * scale <= 17) is off by
            // <= head_dim * u * 17 ~ 3e-5, moving the softmax weights by that relatively; the
            // float V sum over <= 64 keys adds 64 u. |v| <= 1, so 1e-4 bounds it.
            ASSERT_NEAR(got[(row * p.n_head + h) * p.head_dim + e], ref[e], tol)
                << "seq " << i << " q " << j << " head " << h << " dim " << e;
          }
        }
      }
    }
  }
}

AttnCase base_setup(GgmlType cache) {
  AttnCase s;
  s.p.n_head = 4;
  s.p.n_kv_head = 2;
  s.p.head_dim = 32;
  s.p.block_size = 16;
  s.p.scale = 1.0f / std::sqrt(32.0f);
  s.seqs = {{20, 3}, {0, 6}, {45, 1}, {31, 2}};
  s.cache_type = cache;
  s.p.max_ctx = 46;
  return s;
}

TEST(Attention, PagedMatchesDenseF16Pool) {
  check_against_dense(base_setup(GgmlType::F16));
}

TEST(Attention, SlidingWindowAndSoftcapF32Pool) {
  AttnCase s = base_setup(GgmlType::F32);
  s.p.sliding_window = 8;
  s.p.softcap = 1.5f;  // logits reach ~5, so the cap changes them
  check_against_dense(s);
}

TEST(Attention, MultiQueryHeads) {
  AttnCase s = base_setup(GgmlType::F16);
  s.p.n_head = 6;
  s.p.n_kv_head = 1;
  check_against_dense(s);
}

// A sequence's output rows are bitwise the same alone, in a batch, and with 1 or 2 threads (the
// thread count also changes how queries are grouped into tasks).
void check_invariant(const AttnCase& s) {
  auto rng = test_rng();
  const auto data = make_data(rng, s, 24);
  for (CpuIsa isa : supported_isas()) {
    SCOPED_TRACE(cpu_isa_name(isa));
    CpuBackend be1(CpuBackendConfig{1, isa}), be2(CpuBackendConfig{2, isa});
    const auto batched1 = run_paged(be1, s, data, 24);
    const auto batched2 = run_paged(be2, s, data, 24);
    ASSERT_EQ(batched1.size(), batched2.size());
    for (size_t i = 0; i < batched1.size(); ++i)
      ASSERT_EQ(float_bits(batched1[i]), float_bits(batched2[i])) << i;
    AttnCase alone = s;
    alone.seqs = {s.seqs[0]};
    const auto single = run_paged(be2, alone, {data[0]}, 24);
    for (size_t i = 0; i < single.size(); ++i)
      ASSERT_EQ(float_bits(single[i]), float_bits(batched2[i])) << i;
    ASSERT_FALSE(std::isnan(single[0]));
  }
}

TEST(Attention, BatchAndThreadInvariant) {
  AttnCase s = base_setup(GgmlType::F16);
  s.p.sliding_window = 30;
  check_invariant(s);
}

// Qwen2.5-like GQA (6 query heads per KV head, head_dim 128): a 45-row prefill chunk fills tasks
// of 60 query vectors and one of 30 (four and two vectors of lanes in the AVX-512 kernel), a
// decode row a task of 6 (one vector).
AttnCase wide_gqa_setup() {
  AttnCase s;
  s.p.n_head = 12;
  s.p.n_kv_head = 2;
  s.p.head_dim = 128;
  s.p.block_size = 16;
  s.p.scale = 1.0f / std::sqrt(128.0f);
  s.seqs = {{60, 45}, {90, 1}};
  s.cache_type = GgmlType::F16;
  s.p.max_ctx = 105;
  return s;
}

TEST(Attention, WideGqaMatchesDense) {
  // Per logit, head_dim float products with |scale q.k| <= 34 err by <= 128 u 34 ~ 2.6e-4 in the
  // worst case (random signs keep it far smaller); the V sum over <= 105 keys adds 105 u.
  check_against_dense(wide_gqa_setup(), 3e-4);
}

TEST(Attention, WideGqaBatchAndThreadInvariant) {
  AttnCase s = wide_gqa_setup();
  s.p.sliding_window = 50;
  check_invariant(s);
}

}  // namespace
}  // namespace t9::test
