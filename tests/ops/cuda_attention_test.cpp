// CUDA write_kv + paged attention vs a dense double-precision reference over the cache-rounded
// K/V (shuffled block tables, GQA, sliding window, soft-capping, F16 and F32 pools, head_dim up
// to 256), the pools vs the CPU backend's bit for bit, and batch invariance; the row forms' tests
// are cuda_attention_row_test.cpp's. Compiled to nothing without CUDA.
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "cuda_attention_case.h"
#include "quant/half.h"

namespace t9::test {
namespace {

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
