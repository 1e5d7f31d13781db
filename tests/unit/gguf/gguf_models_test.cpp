// GgufFile on the real models. Expected values were read with gguf-py's GGUFReader (an
// independent implementation), not with our reader.
#include <gtest/gtest.h>

#include <time.h>

#include <cstdlib>
#include <string>

#include "gguf/gguf_file.h"

namespace t9::gguf {
namespace {

std::string model_path(const std::string& file) {
  const char* dir = std::getenv("TEMPO9_MODELS");
  std::string base =
      dir ? dir
          : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/tempo9/models";
  return base + "/" + file;
}

GgufFile open_or_fail(const std::string& file) {
  auto r = GgufFile::open(model_path(file));
  // A missing model is a failure, never a skip.
  EXPECT_TRUE(r.ok()) << r.message();
  if (!r.ok()) throw std::runtime_error(r.message());
  return std::move(r).value();
}

TEST(GgufModels, SmolLM2Metadata) {
  GgufFile f = open_or_fail("SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.file_size(), 98362432u);
  EXPECT_EQ(f.metadata().size(), 33u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get<std::string>("general.architecture").value(), "llama");
  EXPECT_EQ(f.get<std::string>("general.name").value(), "Smollm2 135M 8k Lc100K Mix1 Ep2");
  EXPECT_EQ(f.get<uint32_t>("llama.context_length").value(), 8192u);
  EXPECT_EQ(f.get<int64_t>("llama.block_count").value(), 30);
  EXPECT_EQ(f.get<uint8_t>("llama.attention.head_count").value(), 9);
  EXPECT_FLOAT_EQ(f.get<float>("llama.rope.freq_base").value(), 100000.0f);
  EXPECT_EQ(f.get<bool>("tokenizer.ggml.add_bos_token").value(), false);
  auto tokens = f.get_array<std::string>("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  EXPECT_EQ(tokens->size(), 49152u);
  EXPECT_EQ(tokens->front(), "<|endoftext|>");
  auto types = f.get_array<int32_t>("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.message();
  EXPECT_EQ(types->front(), 3);
  auto merges = f.get_array<std::string>("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok());
  EXPECT_EQ(merges->size(), 48900u);
  EXPECT_EQ(merges->front(), "\xC4\xA0 t");  // "Ġ t"

  const TensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(emb->type, GgmlType::Q8_0);
  EXPECT_EQ(f.data_offset() + emb->offset, 1785664u);
  EXPECT_EQ(emb->n_bytes, 30081024u);
  const TensorInfo* norm = f.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(f.data_offset() + norm->offset, 98360128u);
  EXPECT_EQ(norm->n_bytes, 2304u);
}

TEST(GgufModels, AccessorErrorsNameTheKey) {
  GgufFile f = open_or_fail("SmolLM2-135M-Instruct.Q4_1.gguf");
  auto missing = f.get<uint32_t>("llama.no_such_key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("'llama.no_such_key' is missing"), std::string::npos)
      << missing.message();
  auto mistyped = f.get<uint32_t>("general.architecture");
  ASSERT_FALSE(mistyped.ok());
  EXPECT_NE(mistyped.message().find("'general.architecture' has type STRING"), std::string::npos)
      << mistyped.message();
  auto narrow = f.get<uint8_t>("llama.context_length");  // 8192 does not fit
  ASSERT_FALSE(narrow.ok());
  EXPECT_NE(narrow.message().find("8192 does not fit in uint8"), std::string::npos)
      << narrow.message();
  auto not_float = f.get<float>("llama.context_length");
  ASSERT_FALSE(not_float.ok());
  EXPECT_NE(not_float.message().find("has type UINT32, cannot be read as float"),
            std::string::npos);
  auto not_array = f.get_array<std::string>("general.name");
  ASSERT_FALSE(not_array.ok());
  EXPECT_NE(not_array.message().find("expected an ARRAY"), std::string::npos);
  auto wrong_elem = f.get_array<float>("tokenizer.ggml.tokens");
  ASSERT_FALSE(wrong_elem.ok());
  EXPECT_NE(wrong_elem.message().find("'tokenizer.ggml.tokens' item [0]"), std::string::npos)
      << wrong_elem.message();
  EXPECT_EQ(f.get_or<uint32_t>("llama.no_such_key", 7u), 7u);
}

TEST(GgufModels, GemmaScoresAndMixedTypes) {
  GgufFile f = open_or_fail("gemma-3-270m-Q4_K_M.gguf");
  EXPECT_EQ(f.get<std::string>("general.architecture").value(), "gemma3");
  EXPECT_EQ(f.get<uint32_t>("gemma3.context_length").value(), 32768u);
  EXPECT_EQ(f.get<std::string>("tokenizer.ggml.model").value(), "llama");
  auto scores = f.get_array<float>("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok()) << scores.message();
  EXPECT_EQ(scores->size(), 262144u);
  EXPECT_EQ(scores->front(), -1000.0f);
  EXPECT_EQ(f.tensors().size(), 236u);
  const TensorInfo& first = f.tensors().front();
  EXPECT_EQ(first.name, "output_norm.weight");
  EXPECT_EQ(f.data_offset() + first.offset, 6525120u);
}

// CPU time of this process (user + sys): unlike wall time it does not grow when other jobs
// share the machine.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// The Qwen vocab has ~150k tokens and ~150k merges: parsing must stay in milliseconds.
TEST(GgufModels, QwenParsesFast) {
  const double t0 = cpu_ms();
  GgufFile f = open_or_fail("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  const double ms = cpu_ms() - t0;
  EXPECT_EQ(f.file_size(), 1117320768u);
  EXPECT_EQ(f.tensors().size(), 339u);
  EXPECT_EQ(f.get<std::string>("tokenizer.ggml.pre").value(), "qwen2");
  EXPECT_EQ(f.get<uint32_t>("tokenizer.ggml.eos_token_id").value(), 151645u);
  const Value* merges = f.find("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(std::get<Array>(merges->v).items.size(), 151387u);
  const TensorInfo* out = f.find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, GgmlType::Q6_K);
  EXPECT_EQ(out->n_bytes, 191439360u);
  EXPECT_EQ(f.data_offset() + out->offset, 5950528u);
  // A typical run takes ~20 ms of CPU; 300 ms still leaves room for slow CI machines while
  // catching a per-item cost gone quadratic or a copy of the tensor data.
  EXPECT_LT(ms, 300.0) << "parsing took " << ms << " ms of CPU";
  std::printf("qwen open+parse: %.1f ms CPU\n", ms);
}

}  // namespace
}  // namespace t9::gguf
