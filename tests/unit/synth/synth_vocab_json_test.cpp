// tempo9 synth --tokenizer (model/synth/synth_vocab_json): a synthetic model carrying Qwen3's real
// tokenizer.json tokenizes exactly as that tokenizer.json does, keeps the preset's n_vocab with
// [PAD<i>] padding, ends turns on <|im_end|>, and rejects files it cannot represent with an error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "model/synth/synth.h"
#include "model/synth/synth_vocab_json.h"
#include "tokenizer/tokenizer.h"

namespace t9::synth {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Qwen3's tokenizer.json: 151,643 vocab entries (ids 0..151642) and added tokens up to 151668.
const std::string kQwen3Json =
    std::string(TEMPO9_SHARED_DIR) + "/fixtures/tokenizers/qwen3/tokenizer.json";
constexpr int kQwen3Ids = 151669;
constexpr tok::TokenId kImEnd = 151645, kEndOfText = 151643, kThink = 151667;

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("synth_vocab_json_test_" + name)).string();
}

// The tiny qwen3 shape with the vocabulary size of the real qwen3-8b preset.
SynthOptions tiny_with_real_vocab_size() {
  SynthOptions opt;
  opt.shape = *preset_shape("qwen3", "tiny");
  opt.shape.n_vocab = preset_shape("", "qwen3-8b")->n_vocab;  // 151936
  opt.quant = SynthQuant::Q8_0;
  opt.seed = 5;
  opt.tokenizer_json = kQwen3Json;
  return opt;
}

// One synthesized model (~90 MB, a couple of seconds to write), made by the first test that needs
// it and shared by the tests of the suite; removed after the suite. CTest runs each test in a
// process of its own, possibly in parallel, hence a file per process.
class SynthVocabJson : public ::testing::Test {
 protected:
  static std::string model_file() {
    return temp_path(fmt::format("tiny_qwen3_tokenizer_{}.gguf", ::getpid()));
  }

  static const std::string& model_path() {
    static const std::string path = [] {
      const std::string p = model_file();
      const Status st = write_synth_gguf(tiny_with_real_vocab_size(), p);
      EXPECT_TRUE(st.ok()) << st.message();
      return p;
    }();
    return path;
  }

  static const tok::Tokenizer& gguf_tokenizer() {
    static const tok::Tokenizer t = load(tok::Tokenizer::from_gguf_file(model_path()));
    return t;
  }

  static const tok::Tokenizer& json_tokenizer() {
    static const tok::Tokenizer t = load(tok::Tokenizer::from_tokenizer_json_file(kQwen3Json));
    return t;
  }

  static void TearDownTestSuite() { fs::remove(model_file()); }

 private:
  static tok::Tokenizer load(Result<tok::Tokenizer> r) {
    if (!r.ok()) ADD_FAILURE() << r.message();  // value() then throws: the test stops there
    return std::move(r).value();
  }
};

std::vector<tok::TokenId> encode(const tok::Tokenizer& t, const std::string& text) {
  auto r = t.encode(text);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : std::vector<tok::TokenId>{};
}

// The tokenizer keys alone, written by add_tokenizer_json_metadata and loaded back: for the
// error cases and variants of the file, where a whole model would add nothing.
Result<tok::Tokenizer> tokenizer_via_gguf(const std::string& tokenizer_json, int n_vocab) {
  gguf::GgufWriter w;
  T9_TRY(add_tokenizer_json_metadata(w, tokenizer_json, n_vocab));
  T9_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, w.to_bytes());
  T9_ASSIGN_OR_RETURN(const gguf::GgufFile f, gguf::GgufFile::parse(bytes, "metadata"));
  return tok::Tokenizer::from_gguf(f);
}

// Qwen3's tokenizer.json with `edit` applied, written to a temp file.
std::string edited_qwen3_json(const std::string& name, const std::function<void(json&)>& edit) {
  std::ifstream in(kQwen3Json);
  json j = json::parse(in);
  edit(j);
  const std::string path = temp_path(name);
  std::ofstream(path) << j.dump();
  return path;
}

TEST_F(SynthVocabJson, TokenizesLikeTheTokenizerJson) {
  const std::string texts[] = {
      "The quick brown fox jumped over 13 lazy dogs in 2024, didn't it? Yes: 3.14159!",
      "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)  # O(2^n)\n",
      "for (size_t i = 0; i < v.size(); ++i) {\n\tsum += v[i] * 0x1F;\n}",
      "<|im_start|>user\nhi<|im_end|>",
      "<|im_start|>assistant\n<think>\n\n</think>\n\nCafé, naïve, 東京 — ok.<|im_end|>\n",
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const auto ids = encode(gguf_tokenizer(), text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(ids, encode(json_tokenizer(), text));
    auto back = gguf_tokenizer().decode(ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(encode(gguf_tokenizer(), "<|im_start|>user\nhi<|im_end|>"),
            (std::vector<tok::TokenId>{151644, 872, 198, 6023, 151645}));
}

TEST_F(SynthVocabJson, KeepsThePresetVocabSizeWithPadding) {
  const tok::Vocab& v = gguf_tokenizer().vocab();
  const int n_vocab = tiny_with_real_vocab_size().shape.n_vocab;
  ASSERT_EQ(v.size(), static_cast<size_t>(n_vocab));
  // Every real token in place, with its type as written (the loaded types differ where the GGUF
  // loader, as llama.cpp, promotes texts such as "</s>" to control tokens).
  auto f = gguf::GgufFile::open(model_path());
  ASSERT_TRUE(f.ok()) << f.message();
  auto types = f->get_array<int32_t>("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.message();
  ASSERT_EQ(types->size(), static_cast<size_t>(n_vocab));
  const tok::Vocab& real = json_tokenizer().vocab();
  ASSERT_EQ(real.size(), static_cast<size_t>(kQwen3Ids));
  for (size_t i = 0; i < real.size(); ++i) {
    ASSERT_EQ(v.texts[i], real.texts[i]) << i;
    ASSERT_EQ((*types)[i], static_cast<int32_t>(real.types[i])) << i;
  }
  EXPECT_EQ(v.merges, real.merges);
  for (int i = kQwen3Ids; i < n_vocab; ++i) {
    ASSERT_EQ(v.texts[i], fmt::format("[PAD{}]", i));
    ASSERT_EQ((*types)[i], static_cast<int32_t>(tok::TokenType::kNormal));
  }
  // The model has as many embedding rows.
  EXPECT_EQ(f->get<uint32_t>("qwen3.vocab_size").value(), static_cast<uint32_t>(n_vocab));
  const gguf::TensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ne[1], n_vocab);
  EXPECT_EQ(f->get<std::string>("tokenizer.ggml.pre").value(), "qwen2");
  EXPECT_NE(f->get<std::string>("tokenizer.chat_template").value().find("<|im_start|>"),
            std::string::npos);
}

TEST_F(SynthVocabJson, SpecialTokens) {
  const tok::Tokenizer& t = gguf_tokenizer();
  const tok::Vocab& v = t.vocab();
  EXPECT_EQ(t.find("<|im_end|>"), kImEnd);
  EXPECT_EQ(v.eos, kImEnd);
  EXPECT_EQ(v.types[kImEnd], tok::TokenType::kControl);
  EXPECT_TRUE(t.is_eog(kImEnd));
  EXPECT_EQ(v.bos, kEndOfText);
  EXPECT_EQ(v.pad, kEndOfText);
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(v.types[kThink], tok::TokenType::kUserDefined);  // "special": false
  EXPECT_EQ(v.types[1000], tok::TokenType::kNormal);
}

TEST_F(SynthVocabJson, VocabSmallerThanTheTokenizerIsAnError) {
  SynthOptions opt = tiny_with_real_vocab_size();
  opt.shape.n_vocab = 151000;
  auto s = summarize(opt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("151000"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("151669"), std::string::npos) << s.message();
  EXPECT_FALSE(write_synth_gguf(opt, temp_path("small.gguf")).ok());
  EXPECT_FALSE(fs::exists(temp_path("small.gguf")));
  EXPECT_FALSE(fs::exists(temp_path("small.gguf.partial")));  // failed before creating it
}

TEST_F(SynthVocabJson, UnusableFilesAreErrors) {
  const int n_vocab = 200000;
  const std::string garbage = temp_path("garbage.json");
  std::ofstream(garbage) << "{\"model\": {\"type\": \"BPE\", \"vocab\": [1, 2,\x01\xff";
  auto r = tokenizer_via_gguf(garbage, n_vocab);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find(garbage), std::string::npos) << r.message();

  r = tokenizer_via_gguf(temp_path("does_not_exist.json"), n_vocab);
  EXPECT_FALSE(r.ok());

  const std::string empty_object = temp_path("empty_object.json");
  std::ofstream(empty_object) << "{}";
  EXPECT_FALSE(tokenizer_via_gguf(empty_object, n_vocab).ok());

  const std::string wordpiece = temp_path("wordpiece.json");
  std::ofstream(wordpiece) << R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})";
  r = tokenizer_via_gguf(wordpiece, n_vocab);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("BPE"), std::string::npos) << r.message();

  // GPT-2's pre-tokenizer: a valid byte-level BPE file, but the GGUF would say "qwen2" and
  // split digit runs and contractions differently, so it is refused rather than miswritten.
  const std::string gpt2_pre = edited_qwen3_json("gpt2_pre.json", [](json& j) {
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  });
  r = tokenizer_via_gguf(gpt2_pre, n_vocab);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("Qwen2"), std::string::npos) << r.message();

  // No <|im_end|> and no tokenizer_config.json beside the temp file: no eos to write.
  const std::string no_im_end = edited_qwen3_json("no_im_end.json", [](json& j) {
    for (auto& a : j["added_tokens"])
      if (a["content"] == "<|im_end|>") a["content"] = "<|im_end_renamed|>";
  });
  r = tokenizer_via_gguf(no_im_end, n_vocab);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("eos"), std::string::npos) << r.message();
  for (const std::string& p : {garbage, empty_object, wordpiece, gpt2_pre, no_im_end})
    fs::remove(p);
}

// tokenizer.json files store merges as ["a", "b"] pairs (Qwen3's) or as "a b" strings (older
// files): both give the same GGUF.
TEST_F(SynthVocabJson, MergesAsStringsOrPairs) {
  const std::string strings = edited_qwen3_json("string_merges.json", [](json& j) {
    json merges = json::array();
    for (const auto& m : j["model"]["merges"])
      merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    j["model"]["merges"] = std::move(merges);
  });
  auto from_strings = tokenizer_via_gguf(strings, kQwen3Ids);
  ASSERT_TRUE(from_strings.ok()) << from_strings.message();
  auto from_pairs = tokenizer_via_gguf(kQwen3Json, kQwen3Ids);
  ASSERT_TRUE(from_pairs.ok()) << from_pairs.message();
  EXPECT_EQ(from_strings->vocab().merges, from_pairs->vocab().merges);
  EXPECT_EQ(from_strings->vocab().texts, from_pairs->vocab().texts);
  // Without the tokenizer_config.json beside it, the names still give eos, bos and pad.
  EXPECT_EQ(from_strings->vocab().eos, kImEnd);
  EXPECT_EQ(from_strings->vocab().pad, kEndOfText);
  fs::remove(strings);
}

// The point of the option: the synthetic vocabulary (48 merges) cuts most English words into
// several pieces, Qwen3's keeps common words whole: this paragraph is 210 tokens with the former,
// 62 with the latter (3.4x). Requiring 2x leaves margin, and fails if the file fell back to the
// synthetic vocabulary.
TEST_F(SynthVocabJson, EnglishTakesSeveralTimesFewerTokensThanWithTheSyntheticVocab) {
  const std::string paragraph =
      "When the agent receives a new request, it first reads the conversation history, then "
      "decides which tool to call. Most requests need only one or two tool calls, but some "
      "require a longer plan: searching the repository, reading several files, and finally "
      "writing a patch that the user can review before it is applied.";
  SynthOptions opt = tiny_with_real_vocab_size();
  opt.tokenizer_json.clear();
  opt.shape.n_vocab = 512;
  const std::string synthetic_path = temp_path("tiny_synthetic_vocab.gguf");
  ASSERT_TRUE(write_synth_gguf(opt, synthetic_path).ok());
  auto synthetic = tok::Tokenizer::from_gguf_file(synthetic_path);
  ASSERT_TRUE(synthetic.ok()) << synthetic.message();
  const size_t n_synthetic = encode(*synthetic, paragraph).size();
  const size_t n_real = encode(gguf_tokenizer(), paragraph).size();
  EXPECT_LT(n_real * 2, n_synthetic) << n_real << " vs " << n_synthetic;
  fs::remove(synthetic_path);
}

}  // namespace
}  // namespace t9::synth
