// The decode row's forms (CudaBackendConfig::attn_row_warps, attn_row_chunk, attn_row_chunk_one)
// against the plain tensor-core form, bit for bit, and rope_attention's decode rows against
// qk_norm_rope then attention in each form. Compiled to nothing without CUDA.
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "cuda_attention_case.h"

namespace t9::test {
namespace {

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
  CudaBackend rows({.device = 0, .attn_row_warps = true, .attn_row_chunk = false});
  CudaBackend rows_fold(
      {.device = 0, .attn_fold_rows = 4, .attn_row_warps = true, .attn_row_chunk = false});
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
// and not. Not taken: 32 slots (the plain form) and 129 keys (the call splits: the chunk kernel's
// split form, on by default).
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
      // The 129-key row is a split call, which the chunk kernel runs too (attn_row_chunk is on
      // by default) with the combine launch: one more chunk launch, no fold.
      const bool split_chunk =
          cuda_attention_path(c.p, c.cache, d.q_rows) == CudaAttnPath::kTensorSplit &&
          c.p.n_kv_head * ((c.p.max_ctx + 127) / 128) <= cuda_sm_count();
      ASSERT_EQ(one.attention_chunk_launches(), chunks + (sh.taken || split_chunk ? 1 : 0));
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

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
