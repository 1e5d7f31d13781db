// Parity with llama.cpp on the real GGUFs. tests/data/model/<model>.golden.json was made by
// scripts/golden_logits.py with llama-cpp-python 0.3.36 (the peer): 600 token ids of varied text,
// teacher-forced, and per position llama.cpp's top-16 token ids and logits. We run our forward
// pass on those ids in chunks of 256 tokens (so chunked prefill, the KV pool and, for gemma3,
// the 512-token sliding window past position 512 are what is compared) and check:
//   1. top-1: our argmax over the whole vocabulary == llama.cpp's top-1 at every position >= 1
//      where llama.cpp's own top-1/top-2 margin is >= kDecidedMargin (1.0 logit);
//   2. max |our logit - llama.cpp's| over the 16 stored ids of every position <= a bound;
//   3. mean of those |differences| <= a tighter bound (the sharper regression detector).
//
// Why the logits differ at all, and why these bounds. Neither side computes exact math: both
// quantize every activation row to 8 bits before the integer dot products (llama.cpp: Q8_0
// blocks of 32, or Q8_K blocks of 256 for the K-quants; ours: blocks of 32 with float scales),
// store K/V as F16 and sum in different orders. To see how far each side is from exact math we
// ran (while writing this test, not in CI) a float32 numpy forward pass over the dequantized
// weights (gguf.quants) on the same ids and compared the 16 stored ids per position:
//   SmolLM2 (96 positions):  llama.cpp vs fp32 max 0.63 mean 0.142; ours vs fp32 max 0.61 mean
//   0.147 gemma3 (420 positions):  llama.cpp vs fp32 max 2.87 mean 0.258; ours vs fp32 max 2.44
//   mean 0.159 Qwen2.5 (8 positions):   position 0: llama.cpp 12.09 off, ours 1.81; positions 1-7
//   both <0.33
// i.e. the two programs are about equally far from exact math (ours slightly closer), so their
// mutual difference is the sum of two independent quantization noises. Even exact fp32 math
// agrees with llama.cpp's top-1 at only ~95% of positions: every disagreement is a near-tie
// (all observed ones had margins < 0.6), hence rule 1's margin.
// Qwen2.5's position 0 (the first token, no BOS: the attention-sink token whose hidden state has
// outliers in the thousands) is where 256-element Q8_K activation blocks lose the most; llama.cpp
// is 12 logits from exact there (and its top-1 there differs from exact math's, which ours
// matches), so position 0 is held only to kFirstPositionBound and left out of rule 1.
// The bounds are ~1.5x the largest value measured here (printed by the test) so that rounding
// noise passes, while the bugs this test exists for (a wrong norm convention, RoPE layout, scale
// or window: errors of many logits at most positions, and a mean of several units) cannot.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "model/session.h"
#include "model_test_util.h"

namespace t9::model {
namespace {

struct Golden {
  std::vector<int32_t> tokens;
  std::vector<std::vector<int>> top_ids;
  std::vector<std::vector<float>> top_logits;
};

Golden read_golden(const std::string& model_file) {
  const std::string path =
      std::string(TEMPO9_SOURCE_DIR) + "/tests/data/model/" + model_file + ".golden.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing " << path;
  Golden g;
  if (!in.good()) return g;
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("model").get<std::string>(), model_file);
  g.tokens = j.at("tokens").get<std::vector<int32_t>>();
  g.top_ids = j.at("top_ids").get<std::vector<std::vector<int>>>();
  g.top_logits = j.at("top_logits").get<std::vector<std::vector<float>>>();
  return g;
}

constexpr float kDecidedMargin = 1.0f;
constexpr float kFirstPositionBound = 16.0f;

struct Bounds {
  float max_abs;   // over positions >= 1
  float mean_abs;  // over all positions
};

void check_parity(const char* model_file, Bounds bounds) {
  const Golden g = read_golden(model_file);
  ASSERT_GE(g.tokens.size(), 512u);
  auto m = testing::load_model(model_file);
  ASSERT_TRUE(m);
  Session s(*m);
  constexpr size_t kChunk = 256;
  int n_agree = 0, n_decided = 0, n_decided_agree = 0;
  double max_abs = 0, first_abs = 0, sum_abs = 0;
  size_t n_entries = 0, worst_pos = 0;
  for (size_t first = 0; first < g.tokens.size(); first += kChunk) {
    const size_t n = std::min(kChunk, g.tokens.size() - first);
    auto r = s.feed(std::span(g.tokens).subspan(first, n), LogitRows::kAll);
    ASSERT_TRUE(r.ok()) << r.message();
    for (size_t i = 0; i < n; ++i) {
      const size_t pos = first + i;
      const auto row = r->row(static_cast<int>(i));
      const std::vector<int>& ids = g.top_ids[pos];
      const std::vector<float>& ref = g.top_logits[pos];
      const int ours = testing::argmax(row);
      n_agree += ours == ids[0];
      if (pos > 0 && ref[0] - ref[1] >= kDecidedMargin) {
        ++n_decided;
        n_decided_agree += ours == ids[0];
        EXPECT_EQ(ours, ids[0]) << model_file << " position " << pos << ": our logit "
                                << row[static_cast<size_t>(ours)] << ", llama.cpp's top-1 "
                                << ref[0] << " (ours " << row[static_cast<size_t>(ids[0])] << ")";
      }
      for (size_t k = 0; k < ids.size(); ++k) {
        const double d = std::fabs(row[static_cast<size_t>(ids[k])] - ref[k]);
        if (pos == 0) first_abs = std::max(first_abs, d);
        if (pos > 0 && d > max_abs) max_abs = d, worst_pos = pos;
        sum_abs += d;
        ++n_entries;
      }
    }
  }
  const size_t n_pos = g.tokens.size();
  const double mean_abs = sum_abs / static_cast<double>(n_entries);
  std::printf(
      "[parity] %s: %zu positions | top-1 agreement %d/%zu (%.2f%%), on decided positions "
      "(margin >= %.1f) %d/%d | |dlogit| over %zu entries: max %.4f (position %zu, bound "
      "%.2f), position 0 max %.4f (bound %.1f), mean %.4f (bound %.3f)\n",
      model_file, n_pos, n_agree, n_pos, 100.0 * n_agree / static_cast<double>(n_pos),
      kDecidedMargin, n_decided_agree, n_decided, n_entries, max_abs, worst_pos, bounds.max_abs,
      first_abs, kFirstPositionBound, mean_abs, bounds.mean_abs);
  EXPECT_EQ(n_decided_agree, n_decided);
  EXPECT_GT(n_decided, static_cast<int>(n_pos) / 2);  // the check above must have teeth
  EXPECT_LE(max_abs, bounds.max_abs);
  EXPECT_LE(first_abs, kFirstPositionBound);
  EXPECT_LE(mean_abs, bounds.mean_abs);
}

TEST(ModelParity, SmolLM2Q4_1MatchesLlamaCpp) {
  check_parity(testing::kSmolLM2, {2.0f, 0.26f});
}
TEST(ModelParity, Gemma3Q4_K_MMatchesLlamaCpp) {
  check_parity(testing::kGemma3, {4.5f, 0.40f});
}
TEST(ModelParity, Qwen25CoderQ4_K_MMatchesLlamaCpp) {
  check_parity(testing::kQwen25, {1.5f, 0.15f});
}

}  // namespace
}  // namespace t9::model
