#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace t9::engine {
namespace {

std::vector<TokenId> kept(const std::vector<Candidate>& c) {
  std::vector<TokenId> ids;
  for (const Candidate& x : c) ids.push_back(x.token);
  return ids;
}

// Logits whose softmax is exactly the given distribution (up to float rounding).
std::vector<float> logits_of(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

SamplingParams temp1() {
  SamplingParams p;
  p.temperature = 1.0f;
  return p;
}

TEST(Sampler, TopKKeepsTheKLargestAndRenormalizes) {
  SamplingParams p = temp1();
  p.top_k = 2;
  auto c = truncate_candidates(std::vector<float>{1, 3, 2, 5, 4}, p);
  EXPECT_EQ(kept(c), (std::vector<TokenId>{3, 4}));
  // softmax([5, 4]) = [1 / (1 + e^-1), e^-1 / (1 + e^-1)]
  EXPECT_NEAR(c[0].p, 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(c[1].p, std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  auto l = logits_of({0.5, 0.2, 0.15, 0.1, 0.05});
  SamplingParams p = temp1();
  p.top_p = 0.8f;  // 0.5 + 0.2 = 0.7 < 0.8 <= 0.85
  EXPECT_EQ(kept(truncate_candidates(l, p)), (std::vector<TokenId>{0, 1, 2}));
  p.top_p = 0.7f;  // reached exactly by {0, 1}
  auto c = truncate_candidates(l, p);
  EXPECT_EQ(kept(c), (std::vector<TokenId>{0, 1}));
  EXPECT_NEAR(c[0].p, 0.5 / 0.7, 1e-6);
  p.top_p = 0.1f;  // the top token alone already exceeds it
  EXPECT_EQ(kept(truncate_candidates(l, p)), (std::vector<TokenId>{0}));
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheTopProbability) {
  auto l = logits_of({0.1, 0.5, 0.2, 0.15, 0.05});
  SamplingParams p = temp1();
  p.min_p = 0.29f;  // threshold 0.145: 0.15 is kept, 0.1 is not
  EXPECT_EQ(kept(truncate_candidates(l, p)), (std::vector<TokenId>{1, 2, 3}));
  p.min_p = 0.35f;  // threshold 0.175
  EXPECT_EQ(kept(truncate_candidates(l, p)), (std::vector<TokenId>{1, 2}));
}

TEST(Sampler, TopKThenTopPThenMinPCompose) {
  auto l = logits_of({0.3, 0.25, 0.2, 0.15, 0.1});
  SamplingParams p = temp1();
  p.top_k = 4;     // {0.3, 0.25, 0.2, 0.15} / 0.9
  p.top_p = 0.6f;  // 0.333 + 0.278 = 0.611 >= 0.6: {0, 1}
  p.min_p = 0.9f;  // 0.25 / 0.3 = 0.83 < 0.9: {0}
  EXPECT_EQ(kept(truncate_candidates(l, p)), (std::vector<TokenId>{0}));
  p.min_p = 0.8f;
  EXPECT_EQ(kept(truncate_candidates(l, p)), (std::vector<TokenId>{0, 1}));
}

// The definition with a full sort: probabilities over the whole vocabulary summed in token
// order, then the sorted order (ties: lower id first) cut by top-p, renormalized, cut by min-p,
// renormalized. truncate_candidates sorts only the prefix the cuts read (4096, grown 4x as
// needed); the kept tokens and their probabilities must be the same bits.
std::vector<Candidate> full_sort_oracle(const std::vector<float>& l, float top_p, float min_p) {
  std::vector<Candidate> c;
  float mx = -INFINITY;
  for (float x : l) mx = std::max(mx, x);
  double sum = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    c.push_back({static_cast<TokenId>(i), l[i], std::exp(l[i] - mx)});
    sum += c.back().p;
  }
  for (Candidate& x : c) x.p = static_cast<float>(x.p / sum);
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
  });
  auto renorm = [&] {
    double s = 0;
    for (const Candidate& x : c) s += x.p;
    for (Candidate& x : c) x.p = static_cast<float>(x.p / s);
  };
  if (top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      cum += c[i].p;
      if (cum >= top_p - 1e-6) {
        c.resize(i + 1);
        break;
      }
    }
    renorm();
  }
  if (min_p > 0.0f) {
    size_t keep = 1;
    while (keep < c.size() && c[keep].p >= min_p * c[0].p) ++keep;
    c.resize(keep);
    renorm();
  }
  return c;
}

TEST(Sampler, TopPAndMinPOverALargeVocabularyEqualAFullSort) {
  // 50k tokens: a few peaked ones, a flat tail, and ties (quantized logits), so that top-p
  // 0.5 stops within the first 4096 sorted tokens and 0.9 / 0.99 need the prefix to grow.
  std::vector<float> l(50000);
  uint64_t state = 12345;
  for (size_t i = 0; i < l.size(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    l[i] = static_cast<float>((state >> 40) % 64) / 16.0f;
  }
  l[777] = 12.0f, l[31337] = 11.0f, l[4] = 11.0f;
  for (auto [top_p, min_p] : std::vector<std::pair<float, float>>{
           {0.5f, 0.0f}, {0.9f, 0.0f}, {0.99f, 0.0f}, {1.0f, 0.05f}, {0.95f, 0.02f}}) {
    SamplingParams p = temp1();
    p.top_p = top_p, p.min_p = min_p;
    const auto got = truncate_candidates(l, p), want = full_sort_oracle(l, top_p, min_p);
    ASSERT_EQ(got.size(), want.size()) << top_p << " " << min_p;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].token, want[i].token) << i;
      ASSERT_EQ(got[i].p, want[i].p) << i;
    }
    if (top_p == 0.5f) {
      EXPECT_LT(got.size(), 4096u);  // the cases span both sides of 4096
    }
    if (top_p == 0.99f) {
      EXPECT_GT(got.size(), 8192u);
    }
  }
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  auto l = logits_of({0.8, 0.2});
  SamplingParams p = temp1();
  p.temperature = 0.5f;  // p^2 renormalized: 0.64 / 0.68
  auto c = truncate_candidates(l, p);
  EXPECT_NEAR(c[0].p, 0.64 / 0.68, 1e-6);
  p.temperature = 2.0f;  // sqrt(p) renormalized
  c = truncate_candidates(l, p);
  EXPECT_NEAR(c[0].p, std::sqrt(0.8) / (std::sqrt(0.8) + std::sqrt(0.2)), 1e-6);
}

// Bias, repetition, presence and frequency on overlapping tokens, as per-token edits (what the
// backends apply) and through apply_bias_and_penalties (the host): per token, bias first, then
// the repetition penalty, then presence + frequency.
TEST(Sampler, LogitEditsComposeBiasRepetitionAndPresencePerToken) {
  SamplingParams p = temp1();
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{4, -1.0f}, {1, 1.0f}, {99, 5.0f}};  // 99: out of the vocabulary, ignored
  const std::vector<TokenId> prompt = {0, 1, 0}, generated = {1, 2, 2};
  std::vector<LogitEdit> edits;
  const std::vector<TokenId> prompt_distinct = distinct_tokens(prompt, 5);
  ASSERT_TRUE(make_logit_edits(p, {5, prompt_distinct, generated, 3, true}, &edits));
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  std::vector<TokenId> tokens;
  for (const LogitEdit& e : edits) {
    EXPECT_EQ(e.row, 3);
    tokens.push_back(e.token);
    l[static_cast<size_t>(e.token)] = edited_logit(l[static_cast<size_t>(e.token)], e);
  }
  EXPECT_EQ(tokens, (std::vector<TokenId>{0, 1, 2, 4}));  // one each, in token order
  // 0: 2 / 2. 1: (-2 + 1) * 2 - (0.25 + 0.5). 2: 1 / 2 - (0.5 + 0.5). 3: untouched. 4: 3 - 1.
  const std::vector<float> want = {1.0f, -2.75f, -0.5f, 0.5f, 2.0f};
  EXPECT_EQ(l, want);
  std::vector<float> host = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  apply_bias_and_penalties(host, p, prompt, generated);
  EXPECT_EQ(host, want);
  p.logit_bias.push_back({4, 0.5f});  // a token biased twice: the host adds both, in order
  EXPECT_FALSE(make_logit_edits(p, {5, prompt_distinct, generated, 0, true}, &edits));
}

// A pipelined row's token in flight (PendingEdit, read from the call's ids): for every token it
// can be and every mix of penalties and bias, the row edited with it pending is bit for bit the
// row edited once the token is known (appended to the generated tokens). The cases: a token in
// the prompt only, generated once or twice, biased only, or new.
TEST(Sampler, TokenInFlightEditsEqualTheKnownTokensEdits) {
  const int v = 7;
  const std::vector<TokenId> prompt = {0, 1, 0}, generated = {1, 2, 2};
  const std::vector<TokenId> prompt_distinct = distinct_tokens(prompt, v);
  const std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f, -0.75f, 0.0f};
  int n_cases = 0;
  for (const float rep : {1.0f, 1.3f})
    for (const float presence : {0.0f, 0.5f})
      for (const float frequency : {0.0f, 0.3f})
        for (const bool bias : {false, true}) {
          SamplingParams p = temp1();
          p.repetition_penalty = rep, p.presence_penalty = presence;
          p.frequency_penalty = frequency;
          if (bias) p.logit_bias = {{4, -1.0f}, {1, 1.0f}};
          for (TokenId t = 0; t < v; ++t) {
            // Input 2 of the call is the token in flight.
            const std::vector<int32_t> ids{5, 6, t};
            std::vector<LogitEdit> edits;
            std::vector<PendingEdit> pending;
            ASSERT_TRUE(
                make_logit_edits(p, {v, prompt_distinct, generated, 0, true, 2}, &edits, &pending));
            ASSERT_EQ(pending.size(), has_penalties(p) ? 1u : 0u);
            std::vector<float> got = logits;
            ASSERT_TRUE(apply_logit_edits(got, v, edits, pending, ids));
            std::vector<TokenId> known = generated;
            known.push_back(t);
            std::vector<LogitEdit> want_edits;
            ASSERT_TRUE(make_logit_edits(p, {v, prompt_distinct, known, 0, true}, &want_edits));
            std::vector<float> want = logits;
            ASSERT_TRUE(apply_logit_edits(want, v, want_edits, {}, {}));
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                << "token " << t << " rep " << rep << " presence " << presence << " frequency "
                << frequency << " bias " << bias;
            n_cases += got != logits ? 1 : 0;
          }
        }
  EXPECT_GE(n_cases, 7 * 15);  // every mix but the plain one edits something
}

// The reference op refuses entries out of range instead of writing past the row.
TEST(Sampler, ApplyLogitEditsRefusesOutOfRangeEntries) {
  std::vector<float> l(10, 1.0f);  // 2 rows of 5
  LogitEdit e;
  e.row = 2, e.token = 0;
  EXPECT_FALSE(apply_logit_edits(l, 5, std::vector<LogitEdit>{e}, {}, {}));
  e.row = 1, e.token = 5;
  EXPECT_FALSE(apply_logit_edits(l, 5, std::vector<LogitEdit>{e}, {}, {}));
  const std::vector<int32_t> ids{9};
  EXPECT_FALSE(apply_logit_edits(l, 5, {}, std::vector<PendingEdit>{{0, 0, 1.0f, 1.0f}}, ids));
  EXPECT_FALSE(apply_logit_edits(l, 5, {}, std::vector<PendingEdit>{{0, 1, 1.0f, 1.0f}}, ids));
  EXPECT_EQ(l, std::vector<float>(10, 1.0f));
}

TEST(Sampler, PenaltiesFollowCtrlAndOpenAiFormulas) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  SamplingParams p = temp1();
  p.repetition_penalty = 2.0f;
  // Token 1 appears in prompt and output: penalized once. Positive logits shrink, negative grow.
  apply_bias_and_penalties(l, p, std::vector<TokenId>{0, 1}, std::vector<TokenId>{1, 1});
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, 3.0f}));
  l = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  p = temp1();
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  // Only generated tokens count: token 2 three times, token 3 once; the prompt's 4 is ignored.
  apply_bias_and_penalties(l, p, std::vector<TokenId>{4}, std::vector<TokenId>{2, 3, 2, 2});
  EXPECT_EQ(l, (std::vector<float>{2.0f, -2.0f, 1.0f - 0.75f - 0.5f, 0.5f - 0.25f - 0.5f, 3.0f}));
  l = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  p = temp1();
  p.logit_bias = {{1, 10.0f}, {4, -100.0f}};
  apply_bias_and_penalties(l, p, {}, {});
  EXPECT_EQ(l, (std::vector<float>{2.0f, 8.0f, 1.0f, 0.5f, -97.0f}));
}

TEST(Sampler, GreedyTakesTheArgmaxAfterBiasAndPenalties) {
  std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  Rng rng(1);
  EXPECT_EQ(sample_token(l, p, {}, {}, rng, false, 0).token, 1);  // tie: lower id
  p.repetition_penalty = 4.0f;                                    // 3 / 4 < 2
  EXPECT_EQ(sample_token(l, p, {}, std::vector<TokenId>{1, 2}, rng, false, 0).token, 3);
  p = SamplingParams{};
  p.temperature = 0.0f;
  p.logit_bias = {{0, 5.0f}};
  EXPECT_EQ(sample_token(l, p, {}, {}, rng, false, 0).token, 0);
}

// Greedy on the raw row: the first index of the largest logit at every position modulo the
// 8-way unrolled scan and in the tail, ties to the lower index, NaNs never winning (a NaN at 0
// gives 0, the old scan's answer), across lengths around the unroll width.
TEST(Sampler, GreedyArgmaxFirstMaxTiesAndNaNs) {
  SamplingParams p;
  p.temperature = 0.0f;
  const float nan = std::nanf("");
  for (int n : {1, 7, 8, 9, 16, 23, 1000}) {
    for (int at = 0; at < n; at += std::max(1, n / 11)) {
      std::vector<float> l(static_cast<size_t>(n), -1.0f);
      l[static_cast<size_t>(at)] = 2.0f;
      if (at + 3 < n) l[static_cast<size_t>(at + 3)] = 2.0f;  // a later tie loses
      if (at + 1 < n) l[static_cast<size_t>(at + 1)] = nan;
      Rng rng(1);
      EXPECT_EQ(sample_token(l, p, {}, {}, rng, false, 0).token, at) << "n " << n << " at " << at;
    }
  }
  std::vector<float> l{nan, 5.0f, 7.0f};
  Rng rng(1);
  EXPECT_EQ(sample_token(l, p, {}, {}, rng, false, 0).token, 0);
}

TEST(Sampler, SeededDrawsAreReproducibleAndFollowTheDistribution) {
  auto l = logits_of({0.5, 0.3, 0.2});
  SamplingParams p = temp1();
  auto draw = [&](uint64_t seed, int n) {
    Rng rng(seed);
    std::vector<TokenId> out;
    for (int i = 0; i < n; ++i) out.push_back(sample_token(l, p, {}, {}, rng, false, 0).token);
    return out;
  };
  EXPECT_EQ(draw(42, 64), draw(42, 64));
  EXPECT_NE(draw(42, 64), draw(43, 64));  // 64 equal draws by chance: p < 0.38^64
  const int n = 20000;
  std::vector<int> counts(3, 0);
  for (TokenId t : draw(7, n)) counts[t]++;
  // Binomial std dev <= sqrt(0.25 / n) = 0.0035; 5 sigma.
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.018);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.018);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.018);
}

TEST(Sampler, BannedTokensAreNeverSampled) {
  std::vector<float> l = {0.0f, 0.0f, 0.0f, 0.0f};
  SamplingParams p = temp1();
  p.logit_bias = {{0, -INFINITY}, {2, -INFINITY}};
  Rng rng(3);
  for (int i = 0; i < 200; ++i) {
    TokenId t = sample_token(l, p, {}, {}, rng, false, 0).token;
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(Sampler, LogprobsComeFromTheRawLogits) {
  auto l = logits_of({0.5, 0.25, 0.25});
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{2, 10.0f}};  // changes the choice, not the reported distribution
  Rng rng(1);
  SampleResult r = sample_token(l, p, {}, {}, rng, true, 2);
  EXPECT_EQ(r.token, 2);
  EXPECT_NEAR(r.logprob, std::log(0.25), 1e-6);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 0);
  EXPECT_NEAR(r.top_logprobs[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(r.top_logprobs[1].token, 1);  // tie with 2: lower id first
  EXPECT_NEAR(r.top_logprobs[1].logprob, std::log(0.25), 1e-6);
}

}  // namespace
}  // namespace t9::engine
