// Our own contract (docs/ARCHITECTURE.md rule 7): a sequence's logits are bitwise identical
// whether its tokens run as one batch, one token at a time (decode), in chunks, or beside other
// sequences. The CPU kernels are batch-invariant and the KV is stored (F16) before attention
// reads it in every path, so exact equality is the expectation, not a tolerance.
#include <numeric>

#include "model/session.h"
#include "model_test_util.h"
#include "pipeline_check.h"

namespace t9::model {
namespace {

using testing::load_model;

// Deterministic, varied token ids (avoids depending on the tokenizer).
std::vector<int32_t> some_tokens(int n, int n_vocab, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed;
  for (int& id : t) {
    x = x * 1664525u + 1013904223u;
    id = static_cast<int>((x >> 8) % static_cast<uint32_t>(std::min(n_vocab, 30000)));
  }
  return t;
}

Logits run_chunked(Model& m, const std::vector<int32_t>& toks, int chunk) {
  Session s(m);
  Logits all;
  all.n_vocab = m.n_vocab();
  for (size_t i = 0; i < toks.size(); i += static_cast<size_t>(chunk)) {
    const size_t n = std::min(toks.size() - i, static_cast<size_t>(chunk));
    auto r = s.feed(std::span(toks).subspan(i, n), LogitRows::kAll);
    EXPECT_TRUE(r.ok()) << r.message();
    all.data.insert(all.data.end(), r->data.begin(), r->data.end());
    all.n_rows += r->n_rows;
  }
  return all;
}

void expect_same(const Logits& a, const Logits& b, const char* what) {
  ASSERT_EQ(a.n_rows, b.n_rows) << what;
  for (int r = 0; r < a.n_rows; ++r) {
    const auto x = a.row(r), y = b.row(r);
    ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << what << ": row " << r << " differs";
  }
}

void check_model(const char* file, int n_tokens) {
  auto m = load_model(file);
  ASSERT_TRUE(m);
  const auto toks = some_tokens(n_tokens, m->n_vocab(), 7);
  const Logits whole = run_chunked(*m, toks, n_tokens);
  expect_same(whole, run_chunked(*m, toks, 1), "token by token");
  expect_same(whole, run_chunked(*m, toks, 7), "chunks of 7");
}

TEST(ModelConsistency, SmolLM2WholeVsDecodeVsChunked) {
  check_model(testing::kSmolLM2, 40);
}
// 40 tokens with a 16-token window would exercise the sliding window only on a smaller window;
// gemma3's 512 window is covered by the golden test. Here: GeGLU, sandwich norms, head norms.
TEST(ModelConsistency, Gemma3WholeVsDecodeVsChunked) {
  check_model(testing::kGemma3, 24);
}

TEST(ModelConsistency, BatchOfSequencesMatchesEachAlone) {
  auto m = load_model(testing::kSmolLM2);
  ASSERT_TRUE(m);
  const auto a = some_tokens(19, m->n_vocab(), 1), b = some_tokens(5, m->n_vocab(), 2);
  const Logits la = run_chunked(*m, a, 19), lb = run_chunked(*m, b, 5);
  // Both at once, in fresh blocks 100.. (reserve first).
  ASSERT_TRUE(m->kv().reserve(m->kv().n_blocks() + 4).ok());
  const int base = m->kv().n_blocks() - 4;
  std::vector<int32_t> ta{base, base + 1}, tb{base + 2};
  std::vector<int32_t> toks(a);
  toks.insert(toks.end(), b.begin(), b.end());
  SeqInput sa{0, 19, 0, ta, LogitRows::kAll}, sb{19, 5, 0, tb, LogitRows::kAll};
  std::vector<SeqInput> seqs{sa, sb};
  auto r = m->forward(Batch{toks, {}, seqs});
  ASSERT_TRUE(r.ok()) << r.message();
  Logits ra, rb;
  ra.n_vocab = rb.n_vocab = r->n_vocab;
  ra.n_rows = 19;
  rb.n_rows = 5;
  const size_t split = 19 * static_cast<size_t>(r->n_vocab);
  ra.data.assign(r->data.begin(), r->data.begin() + split);
  rb.data.assign(r->data.begin() + split, r->data.end());
  expect_same(la, ra, "sequence a in a batch");
  expect_same(lb, rb, "sequence b in a batch");
}

// Pipelined batches (Model::enqueue / wait): the second batch names the first one's argmax rows
// as its input tokens (-1 - row), read on the backend, and both outputs equal forward() with the
// tokens given on the host; a batch naming rows the first did not decide is an error.
TEST(ModelConsistency, EnqueuedBatchReadsThePreviousArgmax) {
  auto m = load_model(testing::kSmolLM2);
  ASSERT_TRUE(m);
  const auto a = some_tokens(9, m->n_vocab(), 3), b = some_tokens(6, m->n_vocab(), 4);
  ASSERT_TRUE(m->kv().reserve(m->kv().n_blocks() + 4).ok());
  const int base = m->kv().n_blocks() - 4;
  std::vector<int32_t> ta{base, base + 1}, tb{base + 2, base + 3};
  // Step 1: both prompts, argmax of each last row. Step 2: one token each, the argmax of step 1.
  std::vector<int32_t> t1(a);
  t1.insert(t1.end(), b.begin(), b.end());
  const std::vector<SeqInput> s1{{0, 9, 0, ta, LogitRows::kLast}, {9, 6, 0, tb, LogitRows::kLast}};
  const std::vector<SeqInput> s2{{0, 1, 9, ta, LogitRows::kLast}, {1, 1, 6, tb, LogitRows::kLast}};
  Batch b1{t1, {}, s1};
  b1.argmax_only = true;
  auto r1 = m->forward(b1);
  ASSERT_TRUE(r1.ok()) << r1.message();
  ASSERT_EQ(r1->tokens.size(), 2u);
  const std::vector<int32_t> t2 = r1->tokens;
  Batch b2{t2, {}, s2};
  b2.argmax_only = true;
  auto r2 = m->forward(b2);
  ASSERT_TRUE(r2.ok()) << r2.message();
  // The same two steps pipelined (the KV of step 1 is rewritten with the same values).
  ASSERT_TRUE(m->enqueue(b1).ok());
  EXPECT_EQ(m->previous_tokens(), 2);
  const std::vector<int32_t> from_prev{-1, -2};  // rows 0 and 1 of step 1
  Batch p2{from_prev, {}, s2};
  p2.argmax_only = true;
  ASSERT_TRUE(m->enqueue(p2).ok());
  auto w1 = m->wait();
  auto w2 = m->wait();
  ASSERT_TRUE(w1.ok() && w2.ok());
  EXPECT_EQ(w1->tokens, r1->tokens);
  EXPECT_EQ(w2->tokens, r2->tokens);
  // Row 2 was never decided: an error, after which no tokens are left to read.
  const std::vector<int32_t> bad{-3, -1};
  ASSERT_TRUE(m->enqueue(b1).ok());
  auto e1 = m->enqueue(Batch{bad, {}, s2});
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.message().find("decided 2 tokens"), std::string::npos) << e1.message();
  EXPECT_EQ(m->previous_tokens(), 0);  // a failed batch leaves none to read
  ASSERT_TRUE(m->wait().ok());
}

// Batch::accepts (structured output's check of a decided token): a refused row comes back -1 with
// its logits, the same bits as a batch that asks for logits, and only its row is copied back (the
// others stay zero); accepted rows keep their token. For argmax batches and for sampled ones
// (after the edits: a bias here).
TEST(ModelConsistency, RefusedDecidedRowsComeBackWithTheirLogits) {
  auto m = load_model(testing::kSmolLM2);
  ASSERT_TRUE(m);
  const auto a = some_tokens(7, m->n_vocab(), 8), b = some_tokens(5, m->n_vocab(), 9);
  ASSERT_TRUE(m->kv().reserve(m->kv().n_blocks() + 2).ok());
  const int base = m->kv().n_blocks() - 2;
  std::vector<int32_t> ta{base}, tb{base + 1};
  std::vector<int32_t> toks(a);
  toks.insert(toks.end(), b.begin(), b.end());
  const std::vector<SeqInput> seqs{{0, 7, 0, ta, LogitRows::kLast},
                                   {7, 5, 0, tb, LogitRows::kLast}};
  auto full = m->forward(Batch{toks, {}, seqs});
  ASSERT_TRUE(full.ok()) << full.message();
  const size_t V = static_cast<size_t>(full->n_vocab);
  Batch argmax{toks, {}, seqs};
  argmax.argmax_only = true;
  auto plain = m->forward(argmax);
  ASSERT_TRUE(plain.ok() && plain->data.empty());
  EXPECT_EQ(m->previous_tokens(), 2);
  const std::vector<int32_t> want = plain->tokens;
  // Refuse row 1's argmax only.
  int n_asked = 0;
  argmax.accepts = [&](int r, int32_t t) {
    n_asked++;
    return !(r == 1 && t == want[1]);
  };
  auto checked = m->forward(argmax);
  ASSERT_TRUE(checked.ok()) << checked.message();
  EXPECT_EQ(n_asked, 2);
  EXPECT_EQ(m->previous_tokens(), 0);  // a checked batch's tokens are the host's to give
  EXPECT_EQ(checked->tokens, (std::vector<int32_t>{want[0], -1}));
  ASSERT_EQ(checked->data.size(), 2 * V);
  EXPECT_TRUE(std::equal(checked->data.begin() + V, checked->data.end(), full->data.begin() + V));
  const auto zero = [](float x) { return x == 0.0f; };
  EXPECT_TRUE(std::all_of(checked->data.begin(), checked->data.begin() + V, zero));
  // Every row accepted: no logits.
  argmax.accepts = [](int, int32_t) { return true; };
  auto all_ok = m->forward(argmax);
  ASSERT_TRUE(all_ok.ok());
  EXPECT_EQ(all_ok->tokens, want);
  EXPECT_TRUE(all_ok->data.empty());
  // Sampled rows (temperature 0) after a bias that makes token 3 row 0's argmax: refused, its
  // row comes back with the bias applied.
  const std::vector<RowSampling> greedy_rows(2);
  const std::vector<LogitEdit> edits{{0, 3, 1000.0f, 1.0f, 0.0f, 1}};
  Batch sampled{toks, {}, seqs};
  sampled.sampling = greedy_rows;
  sampled.edits = edits;
  sampled.accepts = [](int r, int32_t t) { return !(r == 0 && t == 3); };
  auto s = m->forward(sampled);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->tokens, (std::vector<int32_t>{-1, want[1]}));
  ASSERT_EQ(s->data.size(), 2 * V);
  EXPECT_EQ(s->data[3], full->data[3] + 1000.0f);
  EXPECT_TRUE(std::equal(s->data.begin() + 4, s->data.begin() + V, full->data.begin() + 4));
  EXPECT_TRUE(std::all_of(s->data.begin() + V, s->data.end(), zero));
}

// Greedy decode with each step enqueued before the previous one is waited for: the tokens of
// forward() steps (pipeline_check.h; the CUDA suite runs the same check).
TEST(ModelConsistency, PipelinedDecodeEqualsForwardSteps) {
  auto plain = load_model(testing::kSmolLM2), piped = load_model(testing::kSmolLM2);
  ASSERT_TRUE(plain && piped);
  t9::testing::check_pipelined_decode(*plain, *piped, some_tokens(11, plain->n_vocab(), 5),
                                      some_tokens(4, plain->n_vocab(), 6), 20);
}

TEST(ModelConsistency, BadInputIsAnError) {
  auto m = load_model(testing::kSmolLM2);
  ASSERT_TRUE(m);
  Session s(*m);
  std::vector<int32_t> bad{1, m->n_vocab()};
  auto r = s.feed(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("out of range"), std::string::npos) << r.message();
  // A block table that does not cover the context.
  std::vector<int32_t> toks(20, 1), table{0};
  ASSERT_TRUE(m->kv().reserve(1).ok());
  SeqInput q{0, 20, 0, table, LogitRows::kLast};
  auto r2 = m->forward(Batch{toks, {}, std::span(&q, 1)});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.message().find("needs 2 blocks"), std::string::npos) << r2.message();
}

}  // namespace
}  // namespace t9::model
