// GrammarBuilder + GrammarMatcher: exact accept / reject on hand-built grammars, and the KMP
// "text until a marker" rules against a direct definition on random strings.
#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "unit/grammar/grammar_test_util.h"

namespace t9::grammar {
namespace {

using testing::admits;

std::shared_ptr<const Grammar> build(GrammarBuilder&& b, uint32_t root) {
  return testing::compiled(std::move(b).build(root));
}

TEST(GrammarMatcher, LiteralsAlternativesAndCompletion) {
  GrammarBuilder b;
  const uint32_t root = b.rule("root", {b.literal("yes"), b.literal("no"), b.literal("nope")});
  auto g = build(std::move(b), root);
  EXPECT_TRUE(admits(g, "yes"));
  EXPECT_TRUE(admits(g, "no"));
  EXPECT_TRUE(admits(g, "nope"));
  EXPECT_FALSE(admits(g, "ye"));
  EXPECT_FALSE(admits(g, "yess"));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept("no"));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.complete());  // "nope" may still follow
  EXPECT_TRUE(m.next_bytes().has('p'));
  EXPECT_FALSE(m.next_bytes().has('o'));
  EXPECT_FALSE(m.accept("x"));  // refused: the state is unchanged
  ASSERT_TRUE(m.accept("pe"));
  EXPECT_TRUE(m.complete());
}

TEST(GrammarMatcher, RightRecursionStaysShallowAndRepeatIsBounded) {
  GrammarBuilder b;
  const uint32_t digits = b.repeat("digits", b.bytes(ByteSet::range('0', '9')), 2, 4);
  const uint32_t root =
      b.rule("root", {Alt{b.byte('['), GrammarBuilder::ref(digits), b.byte(']')}});
  auto g = build(std::move(b), root);
  EXPECT_FALSE(admits(g, "[1]"));
  EXPECT_TRUE(admits(g, "[12]"));
  EXPECT_TRUE(admits(g, "[1234]"));
  EXPECT_FALSE(admits(g, "[12345]"));

  GrammarBuilder b2;
  const uint32_t as = b2.star("as", b2.byte('a'));
  auto g2 = build(std::move(b2), as);
  GrammarMatcher m(g2);
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(m.accept("a"));  // compaction keeps it bounded
  EXPECT_TRUE(m.accepting());
  EXPECT_EQ(m.heads().size(), 2u);  // one more 'a', or the end
}

TEST(GrammarMatcher, AmbiguousGrammarKeepsOneStackPerFuture) {
  // root ::= x x ; x ::= "" | "a": "a" parses two ways with the same future.
  GrammarBuilder b;
  const uint32_t x = b.optional("x", b.literal("a"));
  const uint32_t root =
      b.rule("root", {Alt{GrammarBuilder::ref(x), GrammarBuilder::ref(x), b.byte('!')}});
  auto g = build(std::move(b), root);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept("a"));
  EXPECT_TRUE(m.accept("a!"));
  EXPECT_TRUE(m.complete());
  GrammarMatcher m2(g);
  ASSERT_TRUE(m2.accept("a"));
  // After one 'a': stacks at the second x's 'a' and at '!' (the two readings merged).
  EXPECT_EQ(m2.heads().size(), 2u);
}

TEST(GrammarMatcher, UndefinedRuleIsAnError) {
  GrammarBuilder b;
  const uint32_t r = b.declare("missing");
  const uint32_t root = b.rule("root", {Alt{GrammarBuilder::ref(r)}});
  auto g = std::move(b).build(root);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("'missing'"), std::string::npos) << g.message();
}

TEST(GrammarMatcher, LeftRecursionIsNoParseNotALoop) {
  GrammarBuilder b;
  const uint32_t r = b.declare("r");
  b.define(r, {Alt{GrammarBuilder::ref(r), b.byte('a')}, b.literal("b")});
  auto g = build(std::move(b), r);
  GrammarMatcher m(g);  // must return
  EXPECT_TRUE(m.accept("b"));
}

// text_until(stop) accepts s iff s ends with stop and stop occurs nowhere earlier.
TEST(GrammarMatcher, TextUntilEqualsItsDefinitionOnRandomStrings) {
  std::mt19937 rng(7);
  for (const std::string stop : {"</think>", "aab", "abab", "aaa"}) {
    GrammarBuilder b;
    const uint32_t root = b.text_until("t", stop);
    auto g = build(std::move(b), root);
    const std::string alphabet = stop + "xb";
    for (int trial = 0; trial < 3000; ++trial) {
      std::string s;
      const int n = static_cast<int>(rng() % 14);
      for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
      const size_t first = s.find(stop);
      const bool want = first != std::string::npos && first + stop.size() == s.size();
      GrammarMatcher m(g);
      const bool got = m.accept(s) && m.accepting();
      ASSERT_EQ(got, want) << "stop '" << stop << "' text '" << s << "'";
      if (got) {
        EXPECT_TRUE(m.complete());
      }
    }
  }
}

TEST(GrammarMatcher, KeyIsEqualForEqualFutures) {
  GrammarBuilder b;
  const uint32_t as = b.star("as", b.byte('a'));
  const uint32_t root = b.rule("root", {Alt{b.byte('['), GrammarBuilder::ref(as), b.byte(']')}});
  auto g = build(std::move(b), root);
  GrammarMatcher m1(g), m2(g);
  ASSERT_TRUE(m1.accept("[a"));
  ASSERT_TRUE(m2.accept("[aaaa"));
  EXPECT_EQ(m1.key(), m2.key());
  GrammarMatcher m3(g);
  ASSERT_TRUE(m3.accept("["));
  EXPECT_EQ(m1.key(), m3.key());  // "[" and "[a": both inside the run
  ASSERT_TRUE(m3.accept("a]"));
  EXPECT_NE(m1.key(), m3.key());
}

}  // namespace
}  // namespace t9::grammar
