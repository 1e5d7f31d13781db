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
