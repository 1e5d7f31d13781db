// CUDA write_kv + paged attention vs a dense double-precision reference over the cache-rounded
// K/V (shuffled block tables, GQA, sliding window, soft-capping, F16 and F32 pools, head_dim up
// to 256), the pools vs the CPU backend's bit for bit, and batch invariance. Compiled to nothing
// without CUDA.
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "ops_test_util.h"
#include "quant/half.h"

namespace t9::test {
namespace {

constexpr double kU = 1.0 / (1 << 24);

struct Seq {
  int n_past, n_q;
};

struct Case {
  AttnParams p;
  std::vector<Seq> seqs;
  GgmlType cache;
};

struct Data {
  std::vector<float> k, v,
      q;  // k, v: [n_ctx_rows, n_kv, hd] of every sequence; q: [rows, n_head, hd]
  std::vector<int32_t> tables;
  std::vector<AttnSeq> write_meta, attn_meta;
  int kv_rows = 0, q_rows = 0;
};

constexpr int kPoolBlocks = 256;  // 4096 slots: SharedPrefixDecodeRowsEqualAlone needs 203 blocks

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

struct Result2 {
  std::vector<float> out;
  std::vector<uint8_t> kpool, vpool;
};

// gate (optional): gated_attention with this [rows, n_head, head_dim] gate.
Result2 run(Backend& be, const Case& c, const Data& d, const std::vector<float>* gate = nullptr) {
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

float round_cache(float x, GgmlType t) {
  return t == GgmlType::F16 ? f16_to_f32(f32_to_f16(x)) : x;
}

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
  EXPECT_GT(worst, 0.0);
}

void check_case(const Case& c) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  auto rng = test_rng();
  const Data d = make_data(rng, c);
  CudaBackend gpu;
  CpuBackend cpu(CpuBackendConfig{2, std::nullopt});
  const Result2 g = run(gpu, c, d);
  const Result2 h = run(cpu, c, d);
  // write_kv stores the same rounded values in the same slots (unwritten slots keep the poison).
  EXPECT_EQ(g.kpool, h.kpool);
  EXPECT_EQ(g.vpool, h.vpool);
  check_vs_dense(c, d, g.out);
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

// 64/128/256: the tensor-core kernel; 512 (each lane loads its 16 consecutive values at once)
// and 80 (the strided layout lane, lane + 32, ... with dims past head_dim masked): the fp32 one.
TEST(CudaAttention, F16PoolGqaHeadDims) {
  for (int hd : {64, 80, 128, 256, 512}) {
    SCOPED_TRACE(hd);
    const Case c = base(GgmlType::F16, hd);
    const bool tensor = hd == 64 || hd == 128 || hd == 256;
    EXPECT_EQ(cuda_attention_path(c.p, c.cache, 17) == CudaAttnPath::kFloat, !tensor);
    check_case(c);
  }
}

TEST(CudaAttention, SlidingWindowSoftcapF32Pool) {
  Case c = base(GgmlType::F32, 128);
  c.p.sliding_window = 70;
  c.p.softcap = 5.0f;
  check_case(c);
}

TEST(CudaAttention, SlidingWindowSoftcapF16Pool) {
  for (int hd : {128, 256}) {
    SCOPED_TRACE(hd);
    Case c = base(GgmlType::F16, hd);
    c.p.sliding_window = 70;
    c.p.softcap = 5.0f;
    check_case(c);
  }
}

TEST(CudaAttention, MultiQueryOneKvHead) {
  Case c = base(GgmlType::F16, 64);
  c.p.n_kv_head = 1;
  c.p.sliding_window = 17;
  check_case(c);
}

// Contexts past 1024 keys: the fp32 kernel (F32 pool) cuts a row's keys into 16 ranges of more
// than one 64-key tile, and some trailing ranges come out empty (1502 keys: 12 ranges of 128, 4
// empty; 1031 keys: 9 ranges of 128, 7 empty); the tensor-core one (F16) into 128-key chunks.
// Then a window wider than 1024 keys.
TEST(CudaAttention, LongContextSplits) {
  for (GgmlType pool : {GgmlType::F32, GgmlType::F16}) {
    Case c = base(pool, 128);
    c.seqs = {{1500, 2}, {1030, 1}, {64, 1}};
    c.p.max_ctx = 1502;
    check_case(c);
    c.p.sliding_window = 1100;
    check_case(c);
  }
}

// Rows [first, first + n) of sequence si of (c, d) as a batch of their own over the same pool
// contents: its K/V rows up to the last query, the same block table.
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

// The tensor-core kernel either folds all of a block's key chunks itself (many row tiles: a long
// prefill) or splits them over blocks and combines (few: decode); both must give the same bits.
// A 2200-row prefill over 2200 keys runs folded; rows of it rerun as small batches run split.
TEST(CudaAttention, TensorCoreFoldEqualsSplit) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  for (int window : {0, 300}) {
    SCOPED_TRACE(window);
    auto rng = test_rng();
    Case big = base(GgmlType::F16, 128);
    big.seqs = {{0, 2200}};
    big.p.max_ctx = 2200;
    big.p.sliding_window = window;
    big.p.n_seqs = 1;
    ASSERT_EQ(cuda_attention_path(big.p, big.cache, 2200), CudaAttnPath::kTensorFold);
    const Data d = make_data(rng, big);
    CudaBackend gpu;
    const auto all = run(gpu, big, d).out;
    const size_t q_row = static_cast<size_t>(big.p.n_head * big.p.head_dim);
    // Decode-like rows and a chunk straddling a 128-key boundary and a tile boundary.
    for (auto [first, n] : {std::pair{2199, 1}, std::pair{2190, 3}, std::pair{1530, 20}}) {
      SCOPED_TRACE(first);
      auto [one, d1] = sub_batch(big, d, 0, first, n);
      one.p.n_seqs = 1;
      ASSERT_EQ(cuda_attention_path(one.p, one.cache, n), CudaAttnPath::kTensorSplit);
      const auto part = run(gpu, one, d1).out;
      for (size_t i = 0; i < part.size(); ++i)
        ASSERT_EQ(float_bits(part[i]), float_bits(all[static_cast<size_t>(first) * q_row + i]))
            << i;
      check_vs_dense(one, d1, part);
    }
  }
}

// Rows past 128 chunks of 128 keys: the split form's combine folds a row's partials in batches
// of 128 chunks (one per thread) and carries the running max from batch to batch. 2200 rows
// over 18,000 keys run folded (blocks of 128 keys make room in the test's pool), rows of it
// rerun alone run split; with a window the first chunk is not chunk 0.
TEST(CudaAttention, TensorCoreFoldEqualsSplitPastOneCombineBatch) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  constexpr int kPast = 15'800, kRows = 2'200;
  for (int window : {0, 16'500}) {
    SCOPED_TRACE(window);
    auto rng = test_rng();
    Case big = base(GgmlType::F16, 128);
    big.p.block_size = 128;
    big.seqs = {{kPast, kRows}};
    big.p.max_ctx = kPast + kRows;
    big.p.sliding_window = window;
    big.p.n_seqs = 1;
    ASSERT_EQ(cuda_attention_path(big.p, big.cache, kRows), CudaAttnPath::kTensorFold);
    const Data d = make_data(rng, big);
    CudaBackend gpu;
    const auto all = run(gpu, big, d).out;
    const size_t q_row = static_cast<size_t>(big.p.n_head * big.p.head_dim);
    for (auto [first, n] : {std::pair{kPast + kRows - 1, 1}, std::pair{kPast + 700, 3}}) {
      SCOPED_TRACE(first);
      auto [one, d1] = sub_batch(big, d, 0, first, n);
      one.p.n_seqs = 1;
      ASSERT_EQ(cuda_attention_path(one.p, one.cache, n), CudaAttnPath::kTensorSplit);
      const auto part = run(gpu, one, d1).out;
      const size_t at = static_cast<size_t>(first - kPast) * q_row;
      for (size_t i = 0; i < part.size(); ++i)
        ASSERT_EQ(float_bits(part[i]), float_bits(all[at + i])) << i;
      check_vs_dense(one, d1, part);
    }
  }
}

// A sequence's output is the same bits whether it runs alone or after other sequences.
TEST(CudaAttention, BatchInvariant) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  auto rng = test_rng();
  const Case both = base(GgmlType::F16, 128);
  const Data d = make_data(rng, both);
  CudaBackend gpu;
  const auto batched = run(gpu, both, d).out;
  // Alone: the last sequence, its K/V rows and queries moved to the front.
  const AttnSeq& a = d.attn_meta.back();
  const size_t q_row = static_cast<size_t>(both.p.n_head * both.p.head_dim);
  const auto [one, d1] = sub_batch(both, d, both.seqs.size() - 1, a.n_past, a.n_q);
  const auto alone = run(gpu, one, d1).out;
  for (size_t i = 0; i < alone.size(); ++i)
    ASSERT_EQ(float_bits(alone[i]), float_bits(batched[a.q_begin * q_row + i])) << i;
  ASSERT_FALSE(std::isnan(alone[0]));
}

// A decode row alone (one sequence, one row: split keys and the combine kernel) and the same row
// in a batch of four sequences (prefill chunks beside it, cohort tiles on): the same bits, for
// every tensor-core head_dim, with and without a window, and again on repeated calls.
TEST(CudaAttention, DecodeRowAloneEqualsBatchedEveryHeadDim) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  for (int head_dim : {64, 128, 256}) {
    for (int window : {0, 100}) {
      SCOPED_TRACE(testing::Message() << "head_dim " << head_dim << " window " << window);
      auto rng = test_rng();
      Case both = base(GgmlType::F16, head_dim);
      both.p.sliding_window = window;
      const Data d = make_data(rng, both);
      CudaBackend gpu;
      const auto batched = run(gpu, both, d).out;
      const AttnSeq& a = d.attn_meta[2];  // {200, 1}: the decode row, 201 keys in 2 chunks
      ASSERT_EQ(a.n_q, 1);
      const size_t q_row = static_cast<size_t>(both.p.n_head * both.p.head_dim);
      auto [one, d1] = sub_batch(both, d, 2, a.n_past, a.n_q);
      one.p.n_seqs = 1;
      ASSERT_EQ(cuda_attention_path(one.p, one.cache, 1), CudaAttnPath::kTensorSplit);
      for (int call = 0; call < 3; ++call) {
        const auto alone = run(gpu, one, d1).out;
        for (size_t i = 0; i < alone.size(); ++i)
          ASSERT_EQ(float_bits(alone[i]), float_bits(batched[a.q_begin * q_row + i]))
              << "call " << call << " element " << i;
      }
    }
  }
}

// F16 pools of blocks of 32 keys (8192 keys in the test's pool of 256 blocks) for these
// sequences, max_ctx their longest context.
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

// Split calls of a few rows fold each row's chunk partials in the block that finishes its last
// chunk (FlashArgs::counters) instead of launching the combine kernel: the same bits, call after
// call (the counters must be back at zero), for one and three decode rows, three prefill rows of
// one sequence (rows whose chunk ranges differ), with and without a window, every head dim, and
// the chunk count at the limit (32 chunks: 4096 keys).
TEST(CudaAttention, LastBlockFoldEqualsCombineKernel) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  CudaBackend folding({.device = 0, .attn_fold_rows = 4});
  CudaBackend combining({.device = 0, .attn_fold_rows = 0});
  const std::vector<std::vector<Seq>> batches = {
      {{2199, 1}}, {{700, 1}, {1030, 1}, {64, 1}}, {{2190, 3}}, {{4095, 1}}};
  for (int head_dim : {64, 128, 256}) {
    for (int window : {0, 300}) {
      for (size_t bi = 0; bi < batches.size(); ++bi) {
        SCOPED_TRACE(testing::Message()
                     << "head_dim " << head_dim << " window " << window << " batch " << bi);
        auto rng = test_rng();
        const Case c = case_of(head_dim, batches[bi], window);
        const Data d = make_data(rng, c);
        ASSERT_EQ(cuda_attention_path(c.p, c.cache, d.q_rows), CudaAttnPath::kTensorSplit);
        const auto want = run(combining, c, d).out;
        for (int call = 0; call < 3; ++call) {
          const long folds = folding.attention_kernel_folds();
          const auto got = run(folding, c, d).out;
          ASSERT_EQ(folding.attention_kernel_folds(), folds + 1);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << "call " << call << " at " << i;
        }
        EXPECT_EQ(combining.attention_kernel_folds(), 0);
        check_vs_dense(c, d, want);
      }
    }
  }
}

// A shape for the row forms' tests: query rows over n_head q heads (base()'s 2 KV heads), a
// window, and whether the form under test takes it.
struct RowShape {
  int n_head;
  std::vector<Seq> seqs;
  int window;
  bool taken;
};
// For head dims 128 and 256, each shape, ungated and gated: the case, its data, the gate (null
// when ungated) and the plain form's output to check(shape, case, data, gate, want), then the
// plain form's output against the dense reference.
template <typename Check>
void for_row_shapes(const std::vector<RowShape>& shapes, CudaBackend& plain, Check check) {
  for (int head_dim : {128, 256}) {
    for (size_t si = 0; si < shapes.size(); ++si) {
      for (bool gated : {false, true}) {
        const RowShape& sh = shapes[si];
        SCOPED_TRACE(testing::Message()
                     << "head_dim " << head_dim << " shape " << si << " gated " << gated);
        auto rng = test_rng();
        Case c = case_of(head_dim, sh.seqs, sh.window);
        c.p.n_head = sh.n_head;
        const Data d = make_data(rng, c);
        const auto gate = random_floats(
            rng, static_cast<size_t>(d.q_rows * c.p.n_head * c.p.head_dim), -4.0f, 4.0f);
        const std::vector<float>* g = gated ? &gate : nullptr;
        const auto want = run(plain, c, d, g).out;
        check(sh, c, d, g, want);
        if (!gated) check_vs_dense(c, d, want);
      }
    }
  }
}

// The row-warp form (CudaBackendConfig::attn_row_warps: a tile of at most 16 q-head slots has
// its key tiles' multiplies split over the block's four warps) against the plain form: the same
// bits, call after call. Head dims 128 and 256 at G = 4, 8 and 16 (the 8B's, the 35B's, and the
// 16-slot limit); one decode row over one chunk (the block folds: kSplit false) and over split
// chunks (with the combine launch and with the row's last block folding), under a window, with
// and without the output gate; two and four prefill rows at G = 4 (8 and 16 slots). Past 16 slots
// (four rows at G = 8), with cohorts (several sequences over split chunks) and with soft-capping
// the plain form runs.
TEST(CudaAttention, RowWarpsEqualThePlainForm) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  CudaBackend plain({.device = 0, .attn_row_warps = false});
  CudaBackend rows({.device = 0, .attn_row_warps = true});
  CudaBackend rows_fold({.device = 0, .attn_fold_rows = 4, .attn_row_warps = true});
  // The chunk kernel (cuda_flash_row.cu) serves the row form's split calls, with the combine
  // and with the row's last block folding.
  CudaBackend rows_chunk({.device = 0, .attn_row_warps = true, .attn_row_chunk = true});
  CudaBackend rows_chunk_fold(
      {.device = 0, .attn_fold_rows = 4, .attn_row_warps = true, .attn_row_chunk = true});
  // taken: the row-warp form runs it.
  const std::vector<RowShape> shapes = {
      {8, {{50, 1}}, 0, true},
      {16, {{50, 1}}, 0, true},
      {32, {{700, 1}}, 0, true},
      {16, {{700, 1}}, 0, true},
      {8, {{2199, 1}}, 300, true},
      {16, {{1030, 1}}, 300, true},
      {8, {{300, 2}}, 0, true},
      {8, {{300, 4}}, 0, true},
      {8, {{90, 4}}, 0, true},
      {16, {{300, 4}}, 0, false},
      {8, {{300, 1}, {45, 1}, {700, 1}}, 0, false},
  };
  const auto check = [&](const RowShape& sh, const Case& c, const Data& d,
                         const std::vector<float>* g, const std::vector<float>& want) {
    for (CudaBackend* be : {&rows, &rows_fold, &rows_chunk, &rows_chunk_fold}) {
      const bool chunk_form = be == &rows_chunk || be == &rows_chunk_fold;
      const char* form = be == &rows         ? "combine"
                         : be == &rows_fold  ? "fold"
                         : be == &rows_chunk ? "chunk"
                                             : "chunk fold";
      for (int call = 0; call < 2; ++call) {
        const long launches = be->attention_row_launches();
        const long chunks = be->attention_chunk_launches();
        const auto got = run(*be, c, d, g).out;
        ASSERT_EQ(be->attention_row_launches(), launches + (sh.taken ? 1 : 0));
        // The chunk kernel: split calls (every shape past one 128-key chunk) whose live blocks
        // (the row form's shapes are one sequence, one tile: KV heads x chunks) fit one wave.
        const bool split =
            cuda_attention_path(c.p, c.cache, d.q_rows) == CudaAttnPath::kTensorSplit;
        const bool one_wave = c.p.n_kv_head * ((c.p.max_ctx + 127) / 128) <= cuda_sm_count();
        ASSERT_EQ(be->attention_chunk_launches(),
                  chunks + (chunk_form && sh.taken && split && one_wave ? 1 : 0))
            << form;
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(float_bits(got[i]), float_bits(want[i]))
              << form << " call " << call << " at " << i;
      }
    }
  };
  for_row_shapes(shapes, plain, check);
  EXPECT_EQ(plain.attention_row_launches(), 0);
  // Six of the shapes are row-form split calls (head dims x gates x calls: 48 on a 132-SM card).
  EXPECT_GT(rows_chunk.attention_chunk_launches(), 0);
  EXPECT_EQ(rows_chunk_fold.attention_chunk_launches(), rows_chunk.attention_chunk_launches());
  EXPECT_EQ(rows_chunk.attention_kernel_folds(), 0);
  EXPECT_GT(rows_chunk_fold.attention_kernel_folds(), 0);
  EXPECT_EQ(rows.attention_chunk_launches(), 0);
  // Soft-capped logits keep the plain form.
  Case capped = case_of(128, {{700, 1}}, 0);
  capped.p.softcap = 30.0f;
  auto rng = test_rng();
  const Data dc = make_data(rng, capped);
  const long before = rows.attention_row_launches();
  const auto cap_rows = run(rows, capped, dc).out;
  EXPECT_EQ(rows.attention_row_launches(), before);
  EXPECT_EQ(cap_rows, run(plain, capped, dc).out);
}

// The one-chunk calls by the chunk kernel (CudaBackendConfig::attn_row_chunk_one) against the
// plain form: the same bits, call after call (the fold's counters back at zero between calls).
// Head dims 128 and 256; one decode row at G = 4, 8 and 16 over 1, 50, 127 and 128 keys, and
// under a window inside the chunk; two and four prefill rows at G = 4 (8 and 16 slots); gated
// and not. Not taken: 32 slots (the plain form) and 129 keys (the call splits).
TEST(CudaAttention, OneChunkRowEqualsThePlainForm) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  CudaBackend plain({.device = 0, .attn_row_warps = false});
  CudaBackend one({.device = 0, .attn_row_warps = true, .attn_row_chunk_one = true});
  // taken: the chunk kernel runs it.
  const std::vector<RowShape> shapes = {
      {8, {{0, 1}}, 0, true},    {8, {{49, 1}}, 0, true},    {16, {{126, 1}}, 0, true},
      {32, {{127, 1}}, 0, true}, {16, {{100, 1}}, 40, true}, {8, {{60, 2}}, 0, true},
      {8, {{90, 4}}, 0, true},   {16, {{90, 4}}, 0, false},  {8, {{128, 1}}, 0, false},
  };
  const auto check = [&](const RowShape& sh, const Case& c, const Data& d,
                         const std::vector<float>* g, const std::vector<float>& want) {
    for (int call = 0; call < 2; ++call) {
      const long chunks = one.attention_chunk_launches();
      const long folds = one.attention_kernel_folds();
      const auto got = run(one, c, d, g).out;
      ASSERT_EQ(one.attention_chunk_launches(), chunks + (sh.taken ? 1 : 0));
      ASSERT_EQ(one.attention_kernel_folds(), folds + (sh.taken ? 1 : 0));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << "call " << call << " at " << i;
    }
  };
  for_row_shapes(shapes, plain, check);
}

// rope_attention on decode rows: the tensor-core kernel normalizes and rotates q (from q_from
// for the gated form) and the new k itself and stores the new K/V rows (FlashPrep, on its own
// and with the last-block fold), against the
// base class's qk_norm_rope then (gated_)attention on the same backend: the output and both
// pools the same bits. Every head dim; one row over one chunk (the folded form), one and three
// rows over split chunks (the row's last block folds), one row past 32 chunks (the combine
// kernel); QK-norm on and off, partial rotary, a window; the pools hold every earlier position
// and poison at the new one, so a store that did not happen shows.
// row_warps: the row-warp form on too (one-row calls: both sides take it). chunk: its split
// calls by the chunk kernel (cuda_flash_row.cu); fold false: the combine launch instead of the
// last block's fold. one: its one-chunk calls by the chunk kernel too (attn_row_chunk_one).
void rope_attention_decode_equals_the_ops(bool row_warps, bool chunk = false, bool fold = true,
                                          bool one = false) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  // Every batch prepared in the kernel (three sequences are 12 q-head slots a KV head here), the
  // last-block fold on for the split calls up to 32 chunks (fold).
  CudaBackend be({.device = 0,
                  .attn_fold_rows = fold ? 4 : 0,
                  .attn_row_warps = row_warps,
                  .attn_row_chunk = chunk,
                  .attn_row_chunk_one = one,
                  .attn_prep_slots = 64});
  const std::vector<std::vector<int>> batches = {{50}, {200}, {700, 1030, 64}, {5000}};
  for (int head_dim : {64, 128, 256}) {
    for (int variant = 0; variant < 3; ++variant) {  // plain; no QK-norm + window; gated
      for (size_t bi = 0; bi < batches.size(); ++bi) {
        SCOPED_TRACE(testing::Message()
                     << "head_dim " << head_dim << " variant " << variant << " batch " << bi);
        auto rng = test_rng();
        std::vector<Seq> seqs;
        for (int n_past : batches[bi]) seqs.push_back({n_past, 1});
        const Case c = case_of(head_dim, seqs, variant == 1 ? 300 : 0);
        Data d = make_data(rng, c);
        for (AttnSeq& w : d.write_meta) w.n_q -= 1;  // the pools up to each row's own position
        const int n = d.q_rows, hd = head_dim;
        const int n_kv = c.p.n_kv_head, n_head = c.p.n_head;
        const auto k_new = random_floats(rng, static_cast<size_t>(n * n_kv * hd));
        const auto v_new = random_floats(rng, static_cast<size_t>(n * n_kv * hd));
        const auto wq = random_floats(rng, static_cast<size_t>(hd), 0.5f, 1.5f);
        const auto wk = random_floats(rng, static_cast<size_t>(hd), 0.5f, 1.5f);
        // [query, gate] head rows: q_from is the query halves (variant 2), the gate the others.
        const auto qg = random_floats(rng, static_cast<size_t>(2 * n * n_head * hd), -3.0f, 3.0f);
        std::vector<int32_t> pos;
        for (const Seq& sq : c.seqs) pos.push_back(sq.n_past);
        RopeParams rp;
        rp.layout = RopeLayout::kNeox;
        rp.n_rot = hd == 256 ? 64 : hd;  // Qwen3.5's partial rotary at 256
        rp.freq_base = 1e6f;
        const auto go = [&](bool fused) {
          DeviceArena ar(be);
          const AttnParams& p = c.p;
          Tensor kc = ar.poisoned(c.cache, hd, n_kv, kPoolBlocks * p.block_size);
          Tensor vc = ar.poisoned(c.cache, hd, n_kv, kPoolBlocks * p.block_size);
          Tensor bt = ar.from_host(d.tables, GgmlType::I32, static_cast<int64_t>(d.tables.size()));
          be.write_kv(ar.from_host(d.k, GgmlType::F32, hd, n_kv, d.kv_rows),
                      ar.from_host(d.v, GgmlType::F32, hd, n_kv, d.kv_rows), kc, vc,
                      ar.from_host(as_ints(d.write_meta), GgmlType::I32, 4, p.n_seqs), bt, p);
          Tensor qgt = ar.from_host(qg, GgmlType::F32, 2 * hd, n_head, n);
          Tensor q_half = qgt, gate = qgt;
          q_half.ne[0] = gate.ne[0] = hd;
          gate.offset += static_cast<size_t>(hd) * 4;
          Backend::RopeAttention ra;
          // Ungated: q is q_from's values in a contiguous tensor of its own.
          std::vector<float> q_plain(static_cast<size_t>(n * n_head * hd));
          for (size_t r = 0; r < q_plain.size() / static_cast<size_t>(hd); ++r)
            std::copy_n(qg.begin() + static_cast<int64_t>(2 * r) * hd, hd,
                        q_plain.begin() + static_cast<int64_t>(r) * hd);
          ra.q = variant == 2 ? ar.poisoned(GgmlType::F32, hd, n_head, n)
                              : ar.from_host(q_plain, GgmlType::F32, hd, n_head, n);
          ra.k = ar.from_host(k_new, GgmlType::F32, hd, n_kv, n);
          if (variant != 1) {
            ra.q_norm = ar.from_host(wq, GgmlType::F32, hd);
            ra.k_norm = ar.from_host(wk, GgmlType::F32, hd);
          }
          ra.positions = ar.from_host(pos, GgmlType::I32, n);
          ra.eps = 1e-6f;
          ra.rope = rp;
          ra.kv = {ar.from_host(v_new, GgmlType::F32, hd, n_kv, n),
                   kc,
                   vc,
                   ar.from_host(as_ints(d.attn_meta), GgmlType::I32, 4, p.n_seqs),
                   bt,
                   p};
          ra.q_from = variant == 2 ? &q_half : nullptr;
          ra.gate = variant == 2 ? &gate : nullptr;
          ra.out = ar.poisoned(GgmlType::F32, hd, n_head, n);
          if (fused)
            be.rope_attention(ra);
          else
            be.Backend::rope_attention(ra);
          return std::tuple{ar.download<float>(ra.out), ar.download<uint8_t>(kc),
                            ar.download<uint8_t>(vc)};
        };
        const long row_launches = be.attention_row_launches();
        const long chunk_launches = be.attention_chunk_launches();
        const auto [ops_out, ops_k, ops_v] = go(false);
        const long preps = be.attention_preps();
        const auto [out, kp, vp] = go(true);
        ASSERT_EQ(be.attention_preps(), preps + 1);
        // One row, head_dim 128 / 256: both sides ran the row-warp form when it is on.
        const bool row_form = row_warps && head_dim >= 128 && seqs.size() == 1;
        ASSERT_EQ(be.attention_row_launches(), row_launches + (row_form ? 2 : 0));
        // Past one 128-key chunk the calls split: the chunk kernel on both sides (the ops' side
        // stages the roped q as it is, the fused side prepares it) while its live blocks (KV
        // heads x chunks: one tile) fit one wave; past that the row-warp kernel ({5000}: 40
        // chunks, 80 blocks at base()'s two KV heads, so still the chunk kernel on 132 SMs).
        const int chunks = (seqs[0].n_past + 1 + 127) / 128;
        // One chunk ({50}): the chunk kernel with `one`.
        const bool chunked =
            row_form && ((chunk && chunks > 1 && c.p.n_kv_head * chunks <= cuda_sm_count()) ||
                         (one && chunks == 1));
        ASSERT_EQ(be.attention_chunk_launches(), chunk_launches + (chunked ? 2 : 0));
        ASSERT_EQ(out.size(), ops_out.size());
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_EQ(float_bits(out[i]), float_bits(ops_out[i])) << "out " << i;
        EXPECT_EQ(kp, ops_k);
        EXPECT_EQ(vp, ops_v);
        EXPECT_FALSE(std::isnan(out[0]));
      }
    }
  }
}

TEST(CudaAttention, RopeAttentionDecodeEqualsTheOps) {
  rope_attention_decode_equals_the_ops(false);
}
TEST(CudaAttention, RopeAttentionDecodeEqualsTheOpsRowWarps) {
  rope_attention_decode_equals_the_ops(true);
}
TEST(CudaAttention, RopeAttentionDecodeEqualsTheOpsRowChunk) {
  rope_attention_decode_equals_the_ops(true, true, false);
}
TEST(CudaAttention, RopeAttentionDecodeEqualsTheOpsRowChunkFold) {
  rope_attention_decode_equals_the_ops(true, true, true);
}
// Named apart from the row forms' tests (bench/device_plans/row_chunk_ab.sh runs those first).
TEST(CudaAttention, RopeAttentionDecodeOneChunkRowEqualsTheOps) {
  rope_attention_decode_equals_the_ops(true, true, true, true);
}

// Agents' decode rows over one shared prompt: sequences whose block tables start with the same
// pages (whole blocks, as the prefix cache shares them). Split launches compute the chunks that
// decode rows of a cohort (64 / G sequences) see whole through the same pages once for the
// cohort; each row must keep the bits it gets alone. With G = 8, cohort 0 (sequences 0..7) holds
// six sharing decode rows, a decode row with its own pages and a prefill chunk; cohort 1 two
// sharing rows. With G = 4 all ten form one cohort, under a window that ends inside the shared
// prefix for some rows and before it for the longest.
TEST(CudaAttention, SharedPrefixDecodeRowsEqualAlone) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  struct Row {
    int ctx;      // keys, including the row's own
    bool shares;  // table starts with the shared pages
    int n_q = 1;
  };
  const std::vector<Row> rows = {{700, true}, {701, true},  {1300, true},   {695, true},
                                 {900, true}, {820, false}, {760, true, 9}, {999, true},
                                 {703, true}, {1100, true}};
  const int kSharedBlocks = 43;  // 688 keys: chunks 0..4 whole, chunk 5 partly shared
  for (auto [hd, n_head, window] :
       {std::tuple{256, 16, 0}, std::tuple{128, 16, 0}, std::tuple{128, 8, 400}}) {
    SCOPED_TRACE(testing::Message()
                 << "head_dim " << hd << " n_head " << n_head << " window " << window);
    auto rng = test_rng();
    Case c = base(GgmlType::F16, hd);
    c.p.n_head = n_head;
    c.p.sliding_window = window;
    c.seqs.clear();
    for (const Row& r : rows) c.seqs.push_back({r.ctx - r.n_q, r.n_q});
    c.p.max_ctx = 1300;
    c.p.n_seqs = static_cast<int>(rows.size());
    ASSERT_EQ(cuda_attention_path(c.p, c.cache, 18), CudaAttnPath::kTensorSplit);
    std::vector<int32_t> ids(kPoolBlocks);
    for (int i = 0; i < kPoolBlocks; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = kSharedBlocks;  // ids[0 .. kSharedBlocks) are the shared pages
    const int shared_keys = kSharedBlocks * c.p.block_size;
    const size_t kv_row = static_cast<size_t>(c.p.n_kv_head * hd);
    // ref: every sequence's K/V rows in full (the dense reference and sub_batch read them);
    // d: the same, but a later sharer writes only its own keys (the pages hold the first's).
    Data ref;
    std::vector<bool> later(rows.size(), false);
    int first_sharer = -1;
    for (size_t si = 0; si < rows.size(); ++si) {
      const Row& r = rows[si];
      const int off = static_cast<int>(ref.tables.size());
      for (int b = 0; b < (r.ctx + c.p.block_size - 1) / c.p.block_size; ++b)
        ref.tables.push_back(r.shares && b < kSharedBlocks ? ids[static_cast<size_t>(b)]
                                                           : ids.at(next++));
      later[si] = r.shares && first_sharer >= 0;
      if (r.shares && first_sharer < 0) first_sharer = ref.kv_rows;
      ref.write_meta.push_back({ref.kv_rows, r.ctx, 0, off});
      ref.attn_meta.push_back({ref.q_rows, r.n_q, r.ctx - r.n_q, off});
      ref.kv_rows += r.ctx;
      ref.q_rows += r.n_q;
    }
    ref.k = random_floats(rng, static_cast<size_t>(ref.kv_rows) * kv_row);
    ref.v = random_floats(rng, static_cast<size_t>(ref.kv_rows) * kv_row);
    const size_t prefix = static_cast<size_t>(shared_keys) * kv_row;
    for (size_t si = 0; si < rows.size(); ++si) {
      if (!later[si]) continue;
      const size_t to = static_cast<size_t>(ref.write_meta[si].q_begin) * kv_row;
      const size_t from = static_cast<size_t>(first_sharer) * kv_row;
      std::copy_n(ref.k.begin() + from, prefix, ref.k.begin() + to);
      std::copy_n(ref.v.begin() + from, prefix, ref.v.begin() + to);
    }
    ref.q = random_floats(rng, static_cast<size_t>(ref.q_rows * n_head * hd), -3.0f, 3.0f);
    Data d = ref;
    for (size_t si = 0; si < rows.size(); ++si)
      if (later[si])
        d.write_meta[si] = {ref.write_meta[si].q_begin + shared_keys, rows[si].ctx - shared_keys,
                            shared_keys, ref.write_meta[si].block_table_offset};
    CudaBackend gpu;
    const auto batched = run(gpu, c, d).out;
    check_vs_dense(c, ref, batched);
    const size_t q_row = static_cast<size_t>(n_head * hd);
    for (size_t si = 0; si < rows.size(); ++si) {
      SCOPED_TRACE(si);
      const AttnSeq& a = ref.attn_meta[si];
      auto [one, d1] = sub_batch(c, ref, si, a.n_past, a.n_q);
      one.p.n_seqs = 1;
      const auto alone = run(gpu, one, d1).out;
      for (size_t i = 0; i < alone.size(); ++i)
        ASSERT_EQ(float_bits(alone[i]), float_bits(batched[a.q_begin * q_row + i])) << i;
    }
  }
}

// The attention writes its output's int8 codes (cuda_derived.cuh), and so does the gated form's
// mul_sigmoid, or gated_attention's output store (the gate in the attention kernels): the output
// projection takes them instead of rounding its x. Against a backend with producer-written codes
// off running attention then mul_sigmoid: the attention output, the gated output either way and
// the projection (Q8_0 and Q4_K: one decode row's GEMV, 17 rows' and 2200 rows' tensor-core
// tiles) are the same bits, and the fused backend took the codes. Every tensor-core head dim,
// through the split form (decode rows, a short batch: the combine kernel writes the codes) and
// the folded one (a long prefill: the block's final division does, from the mma layout). The
// gate is the second half of [query, gate] head rows, as the model lays them out.
TEST(CudaAttention, OutputWritesItsProjectionsCodes) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: these tests need a GPU";
  CudaBackend fused;
  CudaBackend plain({.device = 0, .fuse_rounding = false});
  for (const int hd : {64, 128, 256}) {
    for (const int form : {0, 1, 2}) {  // one decode row, a mixed batch (both split), a prefill
      const bool fold = form == 2;
      for (const GgmlType wt : {GgmlType::Q8_0, GgmlType::Q4_K}) {
        SCOPED_TRACE(testing::Message()
                     << "head_dim " << hd << " form " << form << " " << type_name(wt));
        auto rng = test_rng();
        Case c = base(GgmlType::F16, hd);
        if (form == 0) c.seqs = {{200, 1}};
        if (fold) {  // enough row tiles to fill the GPU: folded (TensorCoreFoldEqualsSplit)
          c.seqs = {{0, 2200}};
          c.p.max_ctx = 2200;
        }
        c.p.n_seqs = static_cast<int>(c.seqs.size());
        const Data d = make_data(rng, c);
        ASSERT_EQ(cuda_attention_path(c.p, c.cache, d.q_rows),
                  fold ? CudaAttnPath::kTensorFold : CudaAttnPath::kTensorSplit);
        const int64_t n_in = int64_t{c.p.n_head} * hd;
        const auto w = random_weights(rng, wt, n_in, 96);
        const auto gate = random_floats(rng, static_cast<size_t>(2 * n_in * d.q_rows), -3.0f, 3.0f);
        // gated: 0 none, 1 attention then mul_sigmoid, 2 gated_attention.
        const auto go = [&](CudaBackend& be, int gated) {
          DeviceArena ar(be);
          const AttnParams& p = c.p;
          Tensor kc = ar.poisoned(c.cache, hd, p.n_kv_head, kPoolBlocks * p.block_size);
          Tensor vc = ar.poisoned(c.cache, hd, p.n_kv_head, kPoolBlocks * p.block_size);
          Tensor bt = ar.from_host(d.tables, GgmlType::I32, static_cast<int64_t>(d.tables.size()));
          be.write_kv(ar.from_host(d.k, GgmlType::F32, hd, p.n_kv_head, d.kv_rows),
                      ar.from_host(d.v, GgmlType::F32, hd, p.n_kv_head, d.kv_rows), kc, vc,
                      ar.from_host(as_ints(d.write_meta), GgmlType::I32, 4, p.n_seqs), bt, p);
          Tensor out = ar.poisoned(GgmlType::F32, hd, p.n_head, d.q_rows);
          Tensor g = ar.from_host(gate, GgmlType::F32, 2 * hd, p.n_head, d.q_rows);
          g.ne[0] = hd;  // the gate halves
          g.offset += static_cast<size_t>(hd) * 4;
          const Tensor qt = ar.from_host(d.q, GgmlType::F32, hd, p.n_head, d.q_rows);
          const Tensor st = ar.from_host(as_ints(d.attn_meta), GgmlType::I32, 4, p.n_seqs);
          if (gated == 2) {
            be.gated_attention(qt, kc, vc, st, bt, p, g, out);
          } else {
            be.attention(qt, kc, vc, st, bt, p, out);
            if (gated == 1) be.mul_sigmoid(out, g, out);
          }
          Tensor y = ar.poisoned(GgmlType::F32, 96, d.q_rows);
          const Tensor x = reshape(out, n_in, d.q_rows);
          const long before = be.rounding_reuses();
          be.matmul(ar.weights(w, wt, n_in, 96), x, Tensor{}, y);
          const long reused = be.rounding_reuses() - before;
          return std::tuple{ar.download<float>(out), ar.download<float>(y), reused};
        };
        for (const int gated : {0, 1, 2}) {
          SCOPED_TRACE(gated == 0 ? "plain" : gated == 1 ? "mul_sigmoid" : "gated_attention");
          const auto [fo, fy, fr] = go(fused, gated);
          const auto [po, py, pr] = go(plain, gated == 0 ? 0 : 1);
          ASSERT_EQ(fo.size(), po.size());
          for (size_t i = 0; i < fo.size(); ++i)
            ASSERT_EQ(float_bits(fo[i]), float_bits(po[i])) << "out " << i;
          for (size_t i = 0; i < fy.size(); ++i)
            ASSERT_EQ(float_bits(fy[i]), float_bits(py[i])) << "projection " << i;
          EXPECT_FALSE(std::isnan(fy[0]));
          EXPECT_EQ(fr, 1);
          EXPECT_EQ(pr, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
