// Reading GGUF files (v2 and v3): validated header, typed metadata, tensor infos, and tensor data
// straight from a memory map. Everything is validated before anything is allocated from a size
// the file claims; a bad file yields ONE Error naming the file, the byte offset and the problem.
//
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv, n_kv x {string key,
// u32 type, value}, n_tensors x {string name, u32 n_dims, n_dims x u64 ne, u32 ggml type,
// u64 offset}, padding to `general.alignment` (default 32), then the data section. Strings are
// u64 length + bytes (no terminator); arrays are u32 elem type + u64 count + items.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "core/result.h"
#include "quant/types.h"

namespace t9::gguf {

// Metadata value types as stored in the file (part of the format; never renumber).
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
inline constexpr uint32_t kNumValueTypes = 13;
// "UINT32", "STRING", ... as gguf-py's GGUFValueType spells them; "?" for unknown ids.
std::string_view value_type_name(ValueType t);

inline constexpr uint32_t kMagic = 0x46554747;     // "GGUF" read as a little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;  // when `general.alignment` is absent
inline constexpr uint32_t kMaxDims = 4;            // ggml's GGML_MAX_DIMS
inline constexpr uint32_t kMaxArrayNesting = 16;   // arrays of arrays deeper than this: rejected

struct Value;
struct Array {
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> items;  // nested arrays allowed (elem_type == ARRAY)
};

// One metadata value. `type` keeps the exact on-disk type (UINT32 vs INT32 matters to writers).
// Storage: unsigned integer types in uint64_t, signed in int64_t, FLOAT32/FLOAT64 in double
// (a FLOAT32 converts exactly), BOOL in bool, STRING in std::string, ARRAY in Array.
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  static Value u8(uint8_t x) { return {ValueType::UINT8, uint64_t{x}}; }
  static Value i8(int8_t x) { return {ValueType::INT8, int64_t{x}}; }
  static Value u16(uint16_t x) { return {ValueType::UINT16, uint64_t{x}}; }
  static Value i16(int16_t x) { return {ValueType::INT16, int64_t{x}}; }
  static Value u32(uint32_t x) { return {ValueType::UINT32, uint64_t{x}}; }
  static Value i32(int32_t x) { return {ValueType::INT32, int64_t{x}}; }
  static Value u64(uint64_t x) { return {ValueType::UINT64, x}; }
  static Value i64(int64_t x) { return {ValueType::INT64, x}; }
  static Value f32(float x) { return {ValueType::FLOAT32, double{x}}; }
  static Value f64(double x) { return {ValueType::FLOAT64, x}; }
  static Value boolean(bool x) { return {ValueType::BOOL, x}; }
  static Value str(std::string x) { return {ValueType::STRING, std::move(x)}; }
  static Value array(ValueType elem_type, std::vector<Value> items) {
    return {ValueType::ARRAY, Array{elem_type, std::move(items)}};
  }

  bool is_integer() const;  // any of the eight integer types (not BOOL)
  bool operator==(const Value&) const = default;
};
inline bool operator==(const Array& a, const Array& b) {
  return a.elem_type == b.elem_type && a.items == b.items;
}

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // dims, ne[0] is the contiguous (fastest) one, as ggml orders them
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;     // from the start of the data section; a multiple of the alignment
  uint64_t n_bytes = 0;    // exact size of the data (no padding)
  int64_t n_elements = 0;  // product of ne (1 when there are no dims)
};

class GgufFile {
 public:
  // Maps the file and validates it; the map lives as long as any copy of the GgufFile.
  static Result<GgufFile> open(const std::string& path);
  // Parses bytes owned by the caller (tests, fuzzing); they must outlive the GgufFile.
  // `name` appears in error messages.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  const std::string& name() const { return name_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  uint64_t file_size() const { return bytes_.size(); }

  // In file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;  // null when absent

  // Typed accessors: an Error names the key when it is missing or has another type.
  // T: bool, std::string, float, double (from FLOAT32 or FLOAT64), or an integer type — the
  // <cstdint> ones, int, long, long long and their unsigned forms (from any integer value type
  // whose value fits T). Defined for exactly these T in gguf_metadata.cpp.
  template <typename T>
  Result<T> get(std::string_view key) const;
  template <typename T>
  T get_or(std::string_view key, T fallback) const {
    if (!find(key)) return fallback;
    auto r = get<T>(key);
    return r.ok() ? std::move(r).value() : fallback;
  }
  // Arrays of one scalar type or of strings, converted element-wise by the rules of get<T>.
  template <typename T>
  Result<std::vector<T>> get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order
  const TensorInfo* find_tensor(std::string_view name) const;          // null when absent
  // The tensor's bytes inside the map (t.n_bytes long, aligned to alignment() from the map's
  // start). `t` must be one of tensors().
  const uint8_t* tensor_data(const TensorInfo& t) const {
    return bytes_.data() + data_offset_ + t.offset;
  }
  std::span<const uint8_t> tensor_bytes(const TensorInfo& t) const {
    return {tensor_data(t), static_cast<size_t>(t.n_bytes)};
  }

 private:
  friend class Parser;
  std::shared_ptr<MappedFile> map_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  // Lookups by string_view without building a std::string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Index = std::unordered_map<std::string, size_t, NameHash, std::equal_to<>>;
  Index kv_index_;      // key -> index in kv_
  Index tensor_index_;  // name -> index in tensors_
};

}  // namespace t9::gguf
