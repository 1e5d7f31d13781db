// quant_tool: file-in, file-out access to the reference quantizers for Python parity tests
// (tests/py/quant/test_quants.py compares its output with gguf.quants).
//
//   quant_tool dequant TYPE in.bin out.f32   raw blocks of TYPE -> little-endian float32
//   quant_tool quant   TYPE in.f32 out.bin   float32 -> raw blocks of TYPE
//
// TYPE is the ggml name (Q4_K, BF16, ...). Exit status 0 on success, 1 with a message on stderr.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/result.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant/types.h"

namespace {

t9::Result<std::vector<char>> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return t9::error("cannot open {}", path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

t9::Status write_file(const std::string& path, const void* data, size_t n_bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n_bytes));
  if (!out) return t9::error("cannot write {}", path);
  return {};
}

t9::Status dequant(t9::GgmlType t, const std::string& in, const std::string& out) {
  T9_ASSIGN_OR_RETURN(auto bytes, read_file(in));
  T9_ASSIGN_OR_RETURN(auto floats, t9::dequantize_bytes(t, bytes.data(), bytes.size()));
  return write_file(out, floats.data(), floats.size() * sizeof(float));
}

t9::Status quant(t9::GgmlType t, const std::string& in, const std::string& out) {
  T9_ASSIGN_OR_RETURN(auto bytes, read_file(in));
  if (bytes.size() % sizeof(float) != 0)
    return t9::error("{}: {} bytes is not a whole number of float32", in, bytes.size());
  std::vector<float> x(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(x.data()));
  T9_ASSIGN_OR_RETURN(auto blocks,
                      t9::quantize_floats(t, x.data(), static_cast<int64_t>(x.size())));
  return write_file(out, blocks.data(), blocks.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: quant_tool dequant|quant TYPE in out\n");
    return 2;
  }
  const std::string mode = argv[1];
  const auto type = t9::type_from_name(argv[2]);
  if (!type) {
    std::fprintf(stderr, "quant_tool: unknown type %s\n", argv[2]);
    return 1;
  }
  t9::Status st = t9::error("quant_tool: unknown mode {}", mode);
  if (mode == "dequant") st = dequant(*type, argv[3], argv[4]);
  if (mode == "quant") st = quant(*type, argv[3], argv[4]);
  if (!st.ok()) {
    std::fprintf(stderr, "quant_tool: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
