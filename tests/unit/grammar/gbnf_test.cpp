// GBNF -> Grammar: exact accept / refuse on hand-written grammars (alternatives, groups, every
// repetition form, escapes, classes with ranges and negation over multi-byte UTF-8, `.`,
// multi-line rules, comments), UTF-8 range splitting against every code point's encoding, and
// errors that give the line and column.
#include <gtest/gtest.h>

#include "core/utf8.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "unit/grammar/grammar_test_util.h"

namespace t9::grammar {
namespace {

using testing::admits;

std::shared_ptr<const Grammar> compile(std::string_view text) {
  return testing::compiled(gbnf_grammar(text));
}

TEST(Gbnf, AdmitsExactlyItsLanguage) {
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>>
      cases = {
          {R"(root ::= "yes" | "no")", {"yes", "no"}, {"", "ye", "yesno", "No"}},
          {"root ::= answer \"!\"?\nanswer ::= (\"a\" | \"b\")+ # one or more\n",
           {"a", "ab!", "bba"},
           {"", "!", "a!!", "c"}},
          {R"(root ::= [0-9]{2,3} "-" [a-f]{2} "x"{0,1})",
           {"12-ab", "123-ffx"},
           {"1-ab", "1234-ab", "12-ag", "12-abxx"}},
          {R"(root ::= "[" ( num ( "," num )* )? "]"
num ::= "-"? [1-9] [0-9]*)",
           {"[]", "[1]", "[-12,30]"},
           {"[01]", "[1,]", "[,1]"}},
          {"root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"",
           {"\"\"", "\"ab c\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},
           {"\"a\"b\"", "\"\\\""}},
          {R"(root ::= [à-ÿ]+)", {"\xc3\xa9", "\xc3\xa0\xc3\xbf"}, {"a", "\xc3\x9f"}},
          {R"(root ::= "\x41\u00e9\t" . ".")",
           {"A\xc3\xa9\tz.", "A\xc3\xa9\t\xe2\x82\xac."},
           {"A\xc3\xa9\tzz"}},
          {"root ::= a\n  | b\na ::= \"a\"\nb ::= \"b\"", {"a", "b"}, {"ab"}},
          {"root ::= \"x\" (\n  \"y\" |\n  \"z\"\n)", {"xy", "xz"}, {"x"}},
      };
  for (const auto& [text, good, bad] : cases) {
    auto g = compile(text);
    ASSERT_NE(g, nullptr) << text;
    for (const std::string& s : good) EXPECT_TRUE(admits(g, s)) << text << "\n  " << s;
    for (const std::string& s : bad) EXPECT_FALSE(admits(g, s)) << text << "\n  " << s;
  }
}

// [\u0000-\U0010FFFF] minus nothing, split into byte ranges, admits exactly the UTF-8 encoding
// of each code point (sampled every 7th, plus each encoded-length boundary) and no lone
// continuation byte.
TEST(Gbnf, CodePointRangesMatchTheirUtf8Encodings) {
  auto g = compile(R"(root ::= [\u0080-\U0010FFFF])");
  ASSERT_NE(g, nullptr);
  auto enc = [](uint32_t cp) {
    std::string s;
    utf8_append(s, cp);
    return s;
  };
  for (uint32_t cp : {0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu})
    EXPECT_TRUE(admits(g, enc(cp))) << cp;
  for (uint32_t cp = 0x80; cp <= 0x10FFFF; cp += 7) ASSERT_TRUE(admits(g, enc(cp))) << cp;
  EXPECT_FALSE(admits(g, "a"));
  EXPECT_FALSE(admits(g, "\x80"));
  EXPECT_FALSE(admits(g, "\xf4\x90\x80\x80"));  // above U+10FFFF
  auto narrow = compile(R"(root ::= [\u00e9-\u20ac])");
  ASSERT_NE(narrow, nullptr);
  EXPECT_TRUE(admits(narrow, "\xc3\xa9"));
  EXPECT_TRUE(admits(narrow, "\xe2\x82\xac"));
  EXPECT_FALSE(admits(narrow, "\xc3\xa8"));      // U+00E8
  EXPECT_FALSE(admits(narrow, "\xe2\x82\xad"));  // U+20AD
}

TEST(Gbnf, ErrorsGiveLineColumnAndReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rot ::= \"a\"", "grammar: no rule named 'root'"},
      {"root ::= item", "grammar: rule 'item' is used but never defined"},
      {"root ::= \"abc", "grammar: line 1, column 14: unterminated string literal"},
      {"root ::= \"a\"\nroot = \"b\"", "grammar: line 2, column 6: expected '::=' after 'root'"},
      {"root ::= [z-a]", "grammar: line 1, column 14: a character range's end is below its start"},
      {"root ::= \"\\q\"", "grammar: line 1, column 12: unknown escape '\\q'"},
      {"root ::= \"a\"{3,1}",
       "grammar: line 1, column 18: a repetition's maximum is below its minimum"},
      {"root ::= \"a\"\nroot ::= \"b\"",
       "grammar: line 2, column 10: rule 'root' is defined twice"},
      {"root ::= (\"a\"", "grammar: line 1, column 14: expected ')'"},
  };
  for (const auto& [text, want] : cases) {
    auto g = gbnf_grammar(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_EQ(g.message(), want) << text;
  }
  // A client's deeply nested groups: an error, not a stack overflow (the body may be 32 MB).
  const std::string deep = "root ::= " + std::string(1 << 20, '(');
  auto g = gbnf_grammar(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.message(), "grammar: line 1, column 266: groups nested deeper than 256");
  EXPECT_TRUE(
      gbnf_grammar("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')).ok());
}

}  // namespace
}  // namespace t9::grammar
