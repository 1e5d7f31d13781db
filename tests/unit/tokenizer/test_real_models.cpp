// Real vocabularies on the whole corpus: decode(encode(x)) == x, and streaming decoding, fed one
// token at a time, yields exactly the bytes of whole decoding. Models missing -> failure.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace t9::tok {
namespace {

namespace fs = std::filesystem;

fs::path models_dir() {
  if (const char* m = std::getenv("TEMPO9_MODELS")) return m;
  return fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache/tempo9/models";
}

std::vector<std::string> corpus_texts() {
  std::ifstream in(fs::path(TEMPO9_SOURCE_DIR) / "tests/data/tokenizer/corpus.json");
  EXPECT_TRUE(in.good());
  std::vector<std::string> out;
  for (const auto& e : nlohmann::json::parse(in)) out.push_back(e["text"].get<std::string>());
  return out;
}

std::optional<Tokenizer> load(const std::string& what) {
  auto r = what == "qwen3"
               ? Tokenizer::from_tokenizer_json_file(std::string(TEMPO9_SHARED_DIR) +
                                                     "/fixtures/tokenizers/qwen3/tokenizer.json")
               : Tokenizer::from_gguf_file((models_dir() / what).string());
  if (!r.ok()) {
    ADD_FAILURE() << what << ": " << r.message();  // a missing model fails the test
    return std::nullopt;
  }
  return std::move(r).value();
}

class RealModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModel, RoundTripAndStreaming) {
  const auto loaded = load(GetParam());
  ASSERT_TRUE(loaded.has_value());
  const Tokenizer& tk = *loaded;
  size_t n_texts = 0;
  for (const std::string& text : corpus_texts()) {
    // Specials parsed (so control strings become one id each); no BOS, so the bytes come back.
    auto ids = tk.encode(text, {.add_special = false, .parse_special = true});
    ASSERT_TRUE(ids.ok()) << ids.message();
    auto whole = tk.decode(ids.value());
    ASSERT_TRUE(whole.ok());
    // NFC vocabs (Qwen3's tokenizer.json) give back the normalized text.
    const std::string expect = tk.vocab().nfc ? nfc(text) : text;
    EXPECT_EQ(whole.value(), expect) << GetParam() << " round trip of: " << text;

    StreamDecoder dec(tk);
    std::string streamed;
    for (TokenId id : ids.value()) {
      const size_t before = streamed.size();
      ASSERT_TRUE(dec.push(id, streamed).ok());
      // Each chunk is complete UTF-8 on its own.
      const std::string_view chunk = std::string_view(streamed).substr(before);
      EXPECT_EQ(utf8_valid_prefix(chunk), chunk.size());
    }
    dec.finish(streamed);
    EXPECT_EQ(streamed, whole.value()) << GetParam() << " streaming of: " << text;
    ++n_texts;
  }
  EXPECT_GT(n_texts, 40u);
}

// One Tokenizer is shared by all HTTP threads: concurrent encodes (sharing the BPE word cache)
// must give the single-threaded ids.
TEST(RealModelThreads, ConcurrentEncodeMatchesSerial) {
  const auto loaded = load("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  ASSERT_TRUE(loaded.has_value());
  const auto texts = corpus_texts();
  std::vector<std::vector<TokenId>> serial;
  for (const auto& t : texts) serial.push_back(loaded->encode(t).value());
  std::atomic<int> n_bad{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 20; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i + k * 7 + rep) % texts.size();
          auto r = loaded->encode(texts[j]);
          if (!r.ok() || r.value() != serial[j]) ++n_bad;
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(n_bad.load(), 0);
}

// Long fragments (an agent's re-sent system prompt) come from the fragment cache from their
// second encode on: the ids must be those of a tokenizer that encodes everything (cache off), for
// prompts that share the long fragment and differ around it, and after a budget that evicts.
TEST(RealModelFragmentCache, HitsGiveTheIdsOfAFreshEncode) {
  auto cached = load("qwen3"), plain = load("qwen3");
  ASSERT_TRUE(cached.has_value() && plain.has_value());
  plain->set_fragment_cache_bytes(0);
  // ~24 KB or more of the corpus (code, numbers, CJK, emoji, decomposed accents: the NFC path).
  std::string sys;
  for (const std::string& t : corpus_texts()) sys += t + "\n";
  while (sys.size() < 24000) sys += sys;
  const std::string a = "<|im_start|>system\n" + sys +
                        "<|im_end|>\n<|im_start|>user\nList the files.<|im_end|>\n"
                        "<|im_start|>assistant\n";
  const std::string b = "<|im_start|>system\n" + sys +
                        "<|im_end|>\n<|im_start|>user\nList the files.<|im_end|>\n"
                        "<|im_start|>assistant\nmain.cpp and util.h<|im_end|>\n"
                        "<|im_start|>user\nRead main.cpp<|im_end|>\n<|im_start|>assistant\n";
  for (const std::string* p : {&a, &b, &a}) {
    const auto got = cached->encode_prompt(*p), want = plain->encode_prompt(*p);
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(got.value(), want.value());
  }
  const FragmentCache::Stats st = cached->fragment_cache_stats();
  EXPECT_GE(st.hits, 2);  // b and the second a found the system prompt's fragments
  EXPECT_GE(st.entries, 1u);
  EXPECT_EQ(plain->fragment_cache_stats().entries, 0u);
  cached->set_fragment_cache_bytes(1000);  // below one fragment: nothing stays
  EXPECT_EQ(cached->fragment_cache_stats().entries, 0u);
  EXPECT_EQ(cached->encode_prompt(b).value(), plain->encode_prompt(b).value());
}

INSTANTIATE_TEST_SUITE_P(Models, RealModel,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf",
                                           "gemma-3-270m-Q4_K_M.gguf",
                                           "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen3"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find_first_of(".-"));
                           return n + std::to_string(info.index);
                         });

}  // namespace
}  // namespace t9::tok
