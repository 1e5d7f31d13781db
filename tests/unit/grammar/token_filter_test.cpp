// TokenTrie + TokenFilter: the trie walk's allowed set equals trying every token one by one, on
// random vocabularies and random grammar states; mask() writes -inf exactly outside it and
// admits stop tokens only where the text may end; the cache returns the same sets.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grammar/json_schema.h"
#include "grammar/token_filter.h"

namespace t9::grammar {
namespace {

TokenBits brute_force(const GrammarMatcher& m, const TokenTrie& trie) {
  TokenBits bits((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  for (int32_t t = 0; t < trie.n_vocab(); ++t) {
    if (!trie.usable(t)) continue;
    GrammarMatcher copy = m;
    if (copy.accept(trie.piece(t))) bits[t >> 6] |= uint64_t{1} << (t & 63);
  }
  return bits;
}

std::vector<std::string> random_vocab(std::mt19937& rng, int n) {
  const std::string alphabet = "{}[]\":,  ab0129-.e\\\nnultrf";
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));  // byte tokens
  while (static_cast<int>(v.size()) < n) {
    std::string s;
    for (int k = 1 + static_cast<int>(rng() % 6); k > 0; --k)
      s += alphabet[rng() % alphabet.size()];
    v.push_back(s);  // duplicates on purpose: two ids, one piece
  }
  return v;
}

TEST(TokenFilter, TrieWalkEqualsTryingEveryToken) {
  std::mt19937 rng(3);
  const auto pieces = random_vocab(rng, 3000);
  std::vector<char> usable(pieces.size(), 1);
  usable[5] = 0;  // a control token
  const TokenTrie trie(pieces, usable);
  auto g = std::make_shared<const Grammar>(std::move(
      json_schema_grammar(Json::parse(R"({"type":"object","properties":{"a":{"type":"array",
          "items":{"type":"number"}},"b":{"type":"string"},"c":{"enum":[null,true,"x"]}},
          "required":["a"]})"))
          .value()));
  for (int trial = 0; trial < 40; ++trial) {
    GrammarMatcher m(g);
    for (int step = 0; step < 30 && !m.complete(); ++step) {
      const TokenBits want = brute_force(m, trie);
      const TokenBits got = allowed_tokens(m, trie);
      ASSERT_EQ(got, want) << "trial " << trial << " step " << step;
      // With room for only 1 or 3 interned states the walk steps the rest: the same set.
      ASSERT_EQ(allowed_tokens(m, trie, 1), want) << "trial " << trial << " step " << step;
      ASSERT_EQ(allowed_tokens(m, trie, 3), want) << "trial " << trial << " step " << step;
      EXPECT_FALSE((got[5 >> 6] >> (5 & 63)) & 1);
      // Take a random allowed token.
      std::vector<int32_t> ids;
      for (int32_t t = 0; t < trie.n_vocab(); ++t)
        if ((got[t >> 6] >> (t & 63)) & 1) ids.push_back(t);
      ASSERT_FALSE(ids.empty());
      ASSERT_TRUE(m.accept(pieces[ids[rng() % ids.size()]]));
    }
  }
}

// allows(t) (one token's bytes stepped, what a GPU runner's decided token is checked with) says
// exactly what mask() leaves, stop tokens included, at every state of random walks.
TEST(TokenFilter, AllowsEqualsTheMask) {
  std::mt19937 rng(5);
  auto pieces = random_vocab(rng, 2000);
  pieces.push_back("<eos>");
  std::vector<char> usable(pieces.size(), 1);
  usable.back() = 0;
  const int32_t stop = static_cast<int32_t>(pieces.size()) - 1;
  auto trie = std::make_shared<const TokenTrie>(pieces, usable);
  auto g = std::make_shared<const Grammar>(std::move(
      json_schema_grammar(Json::parse(R"({"type":"object","properties":{"a":{"type":"array",
          "items":{"type":"integer"}},"b":{"type":"string","maxLength":6}},"required":["a"]})"))
          .value()));
  for (int trial = 0; trial < 20; ++trial) {
    TokenFilter f(g, trie, {stop});
    for (int step = 0; step < 25 && !f.complete(); ++step) {
      std::vector<float> logits(pieces.size() + 2, 0.0f);  // 2 ids past the vocabulary
      ASSERT_TRUE(f.mask(logits));
      std::vector<int32_t> ids;
      for (int32_t t = 0; t < static_cast<int32_t>(logits.size()); ++t) {
        ASSERT_EQ(f.allows(t), !std::isinf(logits[t])) << "trial " << trial << " token " << t;
        if (f.allows(t) && t != stop) ids.push_back(t);
      }
      if (ids.empty()) break;
      ASSERT_TRUE(f.accept(ids[rng() % ids.size()]));
    }
  }
}

TEST(TokenFilter, MaskAllowsStopTokensOnlyWhereTheTextMayEnd) {
  // Vocabulary: ids 0..255 bytes, 256 = "12", 257 = stop (control), 258 = "3}".
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  pieces.push_back("12");
  pieces.push_back("<eos>");
  pieces.push_back("3}");
  std::vector<char> usable(pieces.size(), 1);
  usable[257] = 0;
  auto trie = std::make_shared<const TokenTrie>(pieces, usable);
  auto g = std::make_shared<const Grammar>(
      std::move(json_schema_grammar(Json::parse(R"({"type":"integer"})")).value()));
  auto cache = std::make_shared<MaskCache>(kMaskCacheStates);
  TokenFilter f(g, trie, {257}, cache);
  std::vector<float> logits(260, 1.0f);  // 259: past the tokenizer's vocabulary (padding)
  ASSERT_TRUE(f.mask(logits));
  for (int t = 0; t < 260; ++t) {
    const bool want = (t >= '0' && t <= '9') || t == '-' || t == 256;
    EXPECT_EQ(std::isinf(logits[t]), !want) << t;
  }
  EXPECT_FALSE(f.allows(257));  // nothing written yet: no stop
  EXPECT_TRUE(f.allows(256));
  ASSERT_TRUE(f.accept('1'));
  std::fill(logits.begin(), logits.end(), 2.0f);
  ASSERT_TRUE(f.mask(logits));
  EXPECT_EQ(logits[257], 2.0f);  // "1" is a whole integer: the stop token may come
  EXPECT_TRUE(f.allows(257));
  EXPECT_FALSE(f.allows(258));
  EXPECT_EQ(logits['5'], 2.0f);
  EXPECT_TRUE(std::isinf(logits[258]));  // "3}" does not fit
  EXPECT_TRUE(std::isinf(logits['-']));
  EXPECT_TRUE(f.accept(257));
  EXPECT_FALSE(f.accept('x'));
  EXPECT_EQ(cache->size(), 2u);

  // A second filter on the same grammar and cache reads the first state's set from the cache.
  TokenFilter f2(g, trie, {257}, cache);
  std::vector<float> l2(260, 1.0f);
  ASSERT_TRUE(f2.mask(l2));
  EXPECT_EQ(cache->size(), 2u);
  EXPECT_TRUE(std::isinf(l2[257]));
}

TEST(TokenFilter, CompleteAfterTheClosingBrace) {
  std::vector<std::string> pieces{"{", "}", "\"", "a", ":", "1", "{\"a\":1}", "x"};
  auto trie = std::make_shared<const TokenTrie>(pieces, std::vector<char>(pieces.size(), 1));
  auto g = std::make_shared<const Grammar>(std::move(
      json_schema_grammar(
          Json::parse(
              R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"))
          .value()));
  TokenFilter f(g, trie, {});
  std::vector<float> logits(pieces.size(), 0.0f);
  ASSERT_TRUE(f.mask(logits));
  EXPECT_FALSE(std::isinf(logits[6]));  // the whole object in one token
  EXPECT_TRUE(std::isinf(logits[7]));
  ASSERT_TRUE(f.accept(6));
  EXPECT_TRUE(f.complete());
  EXPECT_FALSE(f.mask(logits));  // nothing may follow, and there is no stop token
}

}  // namespace
}  // namespace t9::grammar
