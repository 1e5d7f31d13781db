// Writes the fuzzer's seed corpus (small valid files made by our writer) and the mutation corpus
// (the broken variants of tests/unit/gguf/gguf_mutations.h plus random byte flips), one file per
// input. Usage: gguf_corpus SEED_DIR MUTATION_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "unit/gguf/gguf_mutations.h"

namespace fs = std::filesystem;
using namespace t9::gguf;

namespace {

void put(const fs::path& dir, const std::string& label, const std::vector<uint8_t>& b) {
  std::string name = label;
  for (char& c : name)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<uint8_t> bytes_of(const GgufWriter& w) {
  auto r = w.to_bytes();
  T9_CHECK(r.ok(), "{}", r.message());
  return std::move(r).value();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gguf_corpus SEED_DIR MUTATION_DIR\n");
    return 2;
  }
  const fs::path seeds = argv[1], mutations = argv[2];
  fs::create_directories(seeds);
  fs::create_directories(mutations);

  put(seeds, "sample_a32.gguf", testing::sample_bytes(32));
  put(seeds, "sample_a64.gguf", testing::sample_bytes(64));
  auto v2 = testing::sample_bytes(32);
  v2[4] = 2;
  put(seeds, "sample_v2.gguf", v2);
  GgufWriter empty;
  put(seeds, "empty.gguf", bytes_of(empty));
  GgufWriter one;
  one.set("general.architecture", Value::str("llama"));
  one.set("tokenizer.ggml.tokens",
          Value::array(ValueType::STRING, {Value::str("<s>"), Value::str("a"), Value::str("b")}));
  T9_CHECK(one.add_tensor("w", {32}, t9::GgmlType::Q8_0, testing::pattern_bytes(34, 9)).ok());
  put(seeds, "one_tensor.gguf", bytes_of(one));

  size_t n = 0;
  for (const auto& m : testing::broken_variants())
    put(mutations, std::to_string(n++) + "_" + m.label, m.bytes);
  for (const auto& b : testing::random_flips(500, 99))
    put(mutations, std::to_string(n++) + "_flip", b);
  std::printf("gguf_corpus: 5 seeds in %s, %zu mutated files in %s\n", seeds.c_str(), n,
              mutations.c_str());
  return 0;
}
