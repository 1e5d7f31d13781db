// Reading GGUF files (v2 and v3): validated header, typed metadata, tensor infos, and tensor data
// straight from a memory map. Everything is validated before anything is allocated from a size
// the file claims; a bad file yields an Error naming the file, the byte offset and the problem.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "core/result.h"
#include "quant/types.h"

namespace t9::gguf {

// Metadata value types as stored in the file (part of the format; never renumber).
enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;  // nested arrays allowed (elem_type == ARRAY)
};

// One metadata value. `type` keeps the exact on-disk type (UINT32 vs INT32 matters to writers).
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;   // dims, ne[0] is the contiguous (fastest) one, as ggml orders them
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // from the start of the data section
  uint64_t n_bytes = 0;
  int64_t n_elements = 0;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  // Parses bytes owned by the caller (tests, fuzzing); `name` appears in error messages.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  const std::string& name() const { return name_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;

  // Typed accessors: an Error names the key when it is missing or has another type.
  // T: bool, std::string, any integer type (checked for range), float, double.
  template <typename T>
  Result<T> get(std::string_view key) const;
  template <typename T>
  T get_or(std::string_view key, T fallback) const {
    auto r = get<T>(key);
    return r.ok() ? std::move(r).value() : fallback;
  }
  // Arrays of one scalar type or of strings.
  template <typename T>
  Result<std::vector<T>> get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes inside the map (n_bytes long).
  const uint8_t* tensor_data(const TensorInfo& t) const {
    return bytes_.data() + data_offset_ + t.offset;
  }

 private:
  friend class Parser;
  std::shared_ptr<MappedFile> map_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace t9::gguf
