// Engines on tiny hand-made vocabularies, where the right answer follows from the algorithm's
// definition: BPE merge order, SentencePiece scores and byte fallback, special-token splitting.
#include <gtest/gtest.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace t9::tok {
namespace {

using Ids = std::vector<TokenId>;

// A byte-level BPE vocab: all 256 byte tokens (ids 0..255 in byte order), then `extra`.
Vocab byte_vocab(std::vector<std::string> extra,
                 std::vector<std::pair<std::string, std::string>> merges) {
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.pre = PreKind::kGpt2;
  for (int b = 0; b < 256; ++b) v.texts.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
  for (auto& e : extra) v.texts.push_back(std::move(e));
  v.types.assign(v.texts.size(), TokenType::kNormal);
  v.merges = std::move(merges);
  return v;
}

Ids encode(const Tokenizer& t, std::string_view s, EncodeOptions o = {}) {
  auto r = t.encode(s, o);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? r.value() : Ids{};
}

TEST(Bpe, LowestRankMergesFirst) {
  // "abc": rank 0 is (b,c), so a + bc; then (a,bc) is not a merge -> [a, bc].
  auto t = Tokenizer::create(byte_vocab({"ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}}));
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(encode(*t, "abc"), (Ids{'a', 257}));
  // With (a,b) ranked first and (ab,c) present, the whole word merges.
  auto t2 = Tokenizer::create(byte_vocab({"ab", "bc", "abc"}, {{"a", "b"}, {"ab", "c"}}));
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(encode(*t2, "abc"), (Ids{258}));
}

TEST(Bpe, LeftmostPairWinsTies) {
  // "aaa" with the single merge (a,a): the leftmost pair merges -> [aa, a].
  auto t = Tokenizer::create(byte_vocab({"aa"}, {{"a", "a"}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(encode(*t, "aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(encode(*t, "aaaa"), (Ids{256, 256}));
}

TEST(Bpe, PreTokenizerSplitsBeforeMerging) {
  // "a b": GPT-2's split gives "a" and " b"; "Ġb" exists but no merge crosses the split.
  auto t = Tokenizer::create(byte_vocab({"Ġb", "aĠ"}, {{"a", "Ġ"}, {"Ġ", "b"}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(encode(*t, "a b"), (Ids{'a', 256}));
}

TEST(Bpe, IgnoreMergesTakesWholeWord) {
  Vocab v = byte_vocab({"ab", "abc"}, {{"a", "b"}});
  EXPECT_EQ(encode(*Tokenizer::create(v), "abc"), (Ids{256, 'c'}));
  v.ignore_merges = true;
  EXPECT_EQ(encode(*Tokenizer::create(v), "abc"), (Ids{257}));
}

TEST(Bpe, SpecialTokensAndParseSpecial) {
  Vocab v = byte_vocab({"<|s|>", "<t>"}, {{"a", "b"}});
  v.types[256] = TokenType::kControl;
  v.types[257] = TokenType::kUserDefined;
  v.bos = 256;
  v.add_bos = true;
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(encode(*t, "x<|s|>y<t>"), (Ids{256, 'x', 256, 'y', 257}));
  // parse_special off: the control string is text, the user-defined token is still matched.
  const Ids plain = encode(*t, "<|s|><t>", {.add_special = false, .parse_special = false});
  EXPECT_EQ(plain, (Ids{'<', '|', 's', '|', '>', 257}));
  auto d = t->decode(Ids{256, 'x', 257}, {.skip_special = true});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value(), "x<t>");
}

TEST(Bpe, LongerSpecialTokenWins) {
  Vocab v = byte_vocab({"<a>", "<a><b>"}, {{"a", "b"}});
  v.types[256] = v.types[257] = TokenType::kControl;
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(encode(*t, "<a><b><a>"), (Ids{257, 256}));
}

TEST(Bpe, InvalidUtf8IsAnErrorWithOffset) {
  auto t = Tokenizer::create(byte_vocab({"ab"}, {{"a", "b"}}));
  ASSERT_TRUE(t.ok());
  for (std::string bad : {std::string("abc\xC3", 4), std::string("abc\xC0\xAF"),
                          std::string("abc\xED\xA0\x80"), std::string("abc\xF5\x80\x80\x80")}) {
    auto r = t->encode(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("byte offset 3"), std::string::npos) << r.message();
  }
}

// SentencePiece: "▁" = space. ids: 0 <unk>, 1 <s>, 2 </s>, 3.. pieces, then <0x00>..<0xFF>.
Vocab spm_vocab() {
  Vocab v;
  v.kind = VocabKind::kSpm;
  auto add = [&](std::string s, float score, TokenType t = TokenType::kNormal) {
    v.texts.push_back(std::move(s));
    v.scores.push_back(score);
    v.types.push_back(t);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  add("\xE2\x96\x81", -1);       // 3 ▁
  add("h", -2);                  // 4
  add("i", -2);                  // 5
  add("\xE2\x96\x81h", -3);      // 6 ▁h
  add("hi", -1.5f);              // 7
  add("\xE2\x96\x81hi", -0.5f);  // 8 ▁hi
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, TokenType::kByte);
  }
  v.bos = 1, v.eos = 2, v.unk = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

TEST(Spm, HighestScoreMergesAndByteFallback) {
  auto t = Tokenizer::create(spm_vocab());
  ASSERT_TRUE(t.ok()) << t.message();
  // " hi" -> ▁ h i: (h,i)=-1.5 beats (▁,h)=-3 -> ▁ + hi -> ▁hi (-0.5).
  EXPECT_EQ(encode(*t, "hi"), (Ids{1, 8}));
  // 'é' (C3 A9) has no piece: byte fallback; ids of <0xNN> are 9 + byte.
  EXPECT_EQ(encode(*t, "hé", {.add_special = false}), (Ids{6, 9 + 0xC3, 9 + 0xA9}));
  // Text after a special token gets the space prefix again.
  EXPECT_EQ(encode(*t, "hi<s>hi"), (Ids{1, 8, 1, 8}));
}

TEST(Spm, DecodeRestoresSpacesAndBytes) {
  auto t = Tokenizer::create(spm_vocab());
  ASSERT_TRUE(t.ok());
  auto ids = encode(*t, "hi hé", {.add_special = false});
  auto d = t->decode(ids);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value(), "hi hé");  // the added prefix space is stripped again
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  auto t = Tokenizer::create(spm_vocab());
  ASSERT_TRUE(t.ok());
  StreamDecoder dec(*t);
  std::string out;
  ASSERT_TRUE(dec.push(8, out).ok());  // ▁hi, first token: leading space stripped
  EXPECT_EQ(out, "hi");
  ASSERT_TRUE(dec.push(9 + 0xE4, out).ok());  // 中 = E4 B8 AD
  ASSERT_TRUE(dec.push(9 + 0xB8, out).ok());
  EXPECT_EQ(out, "hi");
  EXPECT_EQ(dec.n_pending_bytes(), 2u);
  ASSERT_TRUE(dec.push(9 + 0xAD, out).ok());
  EXPECT_EQ(out, "hi\xE4\xB8\xAD");
  // A byte that can never start a character is replaced at once; a started one at finish().
  ASSERT_TRUE(dec.push(9 + 0xFF, out).ok());
  ASSERT_TRUE(dec.push(9 + 0xC3, out).ok());
  EXPECT_EQ(out, "hi\xE4\xB8\xAD\xEF\xBF\xBD");
  dec.finish(out);
  EXPECT_EQ(out, "hi\xE4\xB8\xAD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_FALSE(dec.push(100000, out).ok());
}

TEST(Unicode, ByteMapAndNfc) {
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // Ġ U+0120
  EXPECT_EQ(byte_to_unicode(0), "\xC4\x80");    // Ā U+0100
  EXPECT_EQ(byte_to_unicode('a'), "a");
  EXPECT_EQ(unicode_to_byte(0x120), ' ');
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");              // e + U+0301 -> é
  EXPECT_EQ(nfc("o\xCC\x82\xCC\xA3"), "\xE1\xBB\x99");  // o + ̂ + ̣ -> ộ (reordered)
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // ᄀ+ᅡ+ᆨ -> 각
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");  // U+212B ANGSTROM SIGN -> Å (singleton)
}

TEST(TokenizerJson, RejectsUnsupportedParts) {
  auto r = vocab_from_tokenizer_json(R"({"model": {"type": "WordPiece", "vocab": {}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("WordPiece"), std::string::npos) << r.message();
  auto r2 = vocab_from_tokenizer_json("{not json");
  ASSERT_FALSE(r2.ok());
  auto r3 = vocab_from_tokenizer_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
          "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "ByteLevel"}})");
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.message().find("Lowercase"), std::string::npos) << r3.message();
}

}  // namespace
}  // namespace t9::tok
