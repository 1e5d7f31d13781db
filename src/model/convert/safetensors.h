// Reading Hugging Face .safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end)}}, then the raw tensor bytes. Validated like
// GGUF: offsets inside the file, byte counts matching dtype x shape, no overflow.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/result.h"

namespace t9::convert {

enum class StDtype { F32, F16, BF16, F64, I64, I32, I8, U8, BOOL };

struct StTensor {
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;  // row-major, outermost first (PyTorch order)
  std::span<const uint8_t> bytes;
  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::map<std::string, StTensor>& tensors() const { return tensors_; }
  const StTensor* find(const std::string& name) const;
  // The tensor converted to float32 (F32, F16, BF16, F64 sources).
  Result<std::vector<float>> to_f32(const std::string& name) const;

 private:
  MappedFile map_;
  std::map<std::string, StTensor> tensors_;
};

}  // namespace t9::convert
