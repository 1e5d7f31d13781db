#include "gguf/gguf_writer.h"

#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

namespace t9::gguf {
namespace {

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

class Out {
 public:
  explicit Out(std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  void put(T x) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &x, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& b_;
};

// Serializes `v`, checking that its storage agrees with its declared type (a caller's mistake,
// reported as an Error naming the key rather than writing a file nobody can read).
class ValueWriter {
 public:
  ValueWriter(Out& out, std::string_view key) : out_(out), key_(key) {}

  Status put(const Value& v, uint32_t depth) {
    switch (v.type) {
      case ValueType::UINT8:
        return put_int<uint8_t>(v);
      case ValueType::INT8:
        return put_int<int8_t>(v);
      case ValueType::UINT16:
        return put_int<uint16_t>(v);
      case ValueType::INT16:
        return put_int<int16_t>(v);
      case ValueType::UINT32:
        return put_int<uint32_t>(v);
      case ValueType::INT32:
        return put_int<int32_t>(v);
      case ValueType::UINT64:
        return put_int<uint64_t>(v);
      case ValueType::INT64:
        return put_int<int64_t>(v);
      case ValueType::FLOAT32:
      case ValueType::FLOAT64: {
        const auto* d = std::get_if<double>(&v.v);
        if (!d) return mismatch(v);
        if (v.type == ValueType::FLOAT32)
          out_.put(static_cast<float>(*d));
        else
          out_.put(*d);
        return {};
      }
      case ValueType::BOOL: {
        const auto* b = std::get_if<bool>(&v.v);
        if (!b) return mismatch(v);
        out_.put<uint8_t>(*b ? 1 : 0);
        return {};
      }
      case ValueType::STRING: {
        const auto* s = std::get_if<std::string>(&v.v);
        if (!s) return mismatch(v);
        out_.put_string(*s);
        return {};
      }
      case ValueType::ARRAY:
        return put_array(v, depth);
    }
    return error("metadata key '{}': unknown value type {}", key_, static_cast<uint32_t>(v.type));
  }

 private:
  Error mismatch(const Value& v) const {
    return error("metadata key '{}': a {} value holds variant alternative #{}", key_,
                 value_type_name(v.type), v.v.index());
  }

  template <typename Raw>
  Status put_int(const Value& v) {
    if (const auto* u = std::get_if<uint64_t>(&v.v); u && std::in_range<Raw>(*u)) {
      out_.put(static_cast<Raw>(*u));
      return {};
    }
    if (const auto* s = std::get_if<int64_t>(&v.v); s && std::in_range<Raw>(*s)) {
      out_.put(static_cast<Raw>(*s));
      return {};
    }
    return error("metadata key '{}': value does not fit its type {}", key_,
                 value_type_name(v.type));
  }

  Status put_array(const Value& v, uint32_t depth) {
    const auto* a = std::get_if<Array>(&v.v);
    if (!a) return mismatch(v);
    if (depth >= kMaxArrayNesting)
      return error("metadata key '{}': arrays nested deeper than {} levels", key_,
                   kMaxArrayNesting);
    if (static_cast<uint32_t>(a->elem_type) >= kNumValueTypes)
      return error("metadata key '{}': unknown array element type {}", key_,
                   static_cast<uint32_t>(a->elem_type));
    out_.put(static_cast<uint32_t>(a->elem_type));
    out_.put<uint64_t>(a->items.size());
    for (size_t i = 0; i < a->items.size(); ++i) {
      if (a->items[i].type != a->elem_type)
        return error("metadata key '{}': array of {} has a {} at item {}", key_,
                     value_type_name(a->elem_type), value_type_name(a->items[i].type), i);
      T9_TRY(put(a->items[i], depth + 1));
    }
    return {};
  }

  Out& out_;
  std::string_view key_;
};

}  // namespace

void GgufWriter::set(std::string key, Value value) {
  if (auto it = kv_index_.find(key); it != kv_index_.end()) {
    kv_[it->second].second = std::move(value);
    return;
  }
  kv_index_.emplace(key, kv_.size());
  kv_.emplace_back(std::move(key), std::move(value));
}

Status GgufWriter::add_tensor(std::string name, std::vector<int64_t> ne, GgmlType type,
                              std::span<const uint8_t> data) {
  const auto tr = ggml_type_traits(static_cast<uint32_t>(type));
  if (!tr) return error("tensor '{}': unknown ggml type id {}", name, static_cast<uint32_t>(type));
  if (ne.size() > kMaxDims)
    return error("tensor '{}': {} dims, more than ggml's {}", name, ne.size(), kMaxDims);
  if (tensor_names_.contains(name)) return error("tensor '{}' added twice", name);
  int64_t n = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) return error("tensor '{}': ne[{}] = {} is negative", name, d, ne[d]);
    if (__builtin_mul_overflow(n, ne[d], &n))
      return error("tensor '{}': element count overflows int64", name);
  }
  const int64_t ne0 = ne.empty() ? 1 : ne[0];
  if (ne0 % tr->block_elems != 0)
    return error("tensor '{}': ne[0] = {} is not a multiple of {}'s block size {}", name, ne0,
                 tr->name, tr->block_elems);
  const uint64_t n_bytes = static_cast<uint64_t>(n / tr->block_elems) * tr->block_bytes;
  if (data.size() != n_bytes)
    return error("tensor '{}': {} bytes given, a {} tensor of {} elements needs {}", name,
                 data.size(), tr->name, n, n_bytes);
  Tensor t;
  t.info.name = std::move(name);
  t.info.ne = std::move(ne);
  t.info.type = type;
  t.info.n_elements = n;
  t.info.n_bytes = n_bytes;
  t.data.assign(data.begin(), data.end());
  tensor_names_.insert(t.info.name);
  tensors_.push_back(std::move(t));
  return {};
}

Result<uint64_t> GgufWriter::alignment() const {
  auto it = kv_index_.find("general.alignment");
  if (it == kv_index_.end()) return kDefaultAlignment;
  const Value& v = kv_[it->second].second;
  const auto* a = std::get_if<uint64_t>(&v.v);
  if (v.type != ValueType::UINT32 || !a || *a == 0 || *a > UINT32_MAX || !std::has_single_bit(*a))
    return error("metadata key 'general.alignment' must be a UINT32 power of two");
  return *a;
}

Result<std::vector<uint8_t>> GgufWriter::header(std::vector<uint64_t>& offsets) const {
  T9_ASSIGN_OR_RETURN(const uint64_t align, alignment());
  std::vector<uint8_t> bytes;
  Out out(bytes);
  out.put<uint32_t>(kMagic);
  out.put<uint32_t>(3);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(kv_.size());
  for (size_t i = 0; i < kv_.size(); ++i) {
    const auto& [key, value] = kv_[i];
    if (key.empty()) return error("metadata #{} has an empty key", i);
    out.put_string(key);
    out.put(static_cast<uint32_t>(value.type));
    ValueWriter w(out, key);
    T9_TRY(w.put(value, 0));
  }
  offsets.clear();
  uint64_t next = 0;
  for (const auto& t : tensors_) {
    out.put_string(t.info.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.info.ne.size()));
    for (int64_t d : t.info.ne) out.put<uint64_t>(static_cast<uint64_t>(d));
    out.put<uint32_t>(static_cast<uint32_t>(t.info.type));
    out.put<uint64_t>(next);
    offsets.push_back(next);
    next = align_up(next + t.info.n_bytes, align);
  }
  bytes.resize(align_up(bytes.size(), align), 0);
  return bytes;
}

Result<std::vector<uint8_t>> GgufWriter::to_bytes() const {
  std::vector<uint64_t> offsets;
  T9_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, header(offsets));
  const uint64_t data_offset = bytes.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    bytes.resize(data_offset + offsets[i], 0);  // padding after the previous tensor
    bytes.insert(bytes.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  T9_ASSIGN_OR_RETURN(const uint64_t align, alignment());
  bytes.resize(data_offset + align_up(bytes.size() - data_offset, align), 0);
  return bytes;
}

Status GgufWriter::write_file(const std::string& path) const {
  std::vector<uint64_t> offsets;
  T9_ASSIGN_OR_RETURN(const std::vector<uint8_t> head, header(offsets));
  T9_ASSIGN_OR_RETURN(const uint64_t align, alignment());
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return error("{}: cannot create: {}", path, std::strerror(errno));
  const std::vector<uint8_t> zeros(align, 0);
  bool ok = std::fwrite(head.data(), 1, head.size(), f.get()) == head.size();
  uint64_t pos = 0;  // within the data section
  for (size_t i = 0; ok && i < tensors_.size(); ++i) {
    const auto& d = tensors_[i].data;
    ok = std::fwrite(zeros.data(), 1, offsets[i] - pos, f.get()) == offsets[i] - pos &&
         std::fwrite(d.data(), 1, d.size(), f.get()) == d.size();
    pos = offsets[i] + d.size();
  }
  const uint64_t pad = align_up(pos, align) - pos;
  ok = ok && std::fwrite(zeros.data(), 1, pad, f.get()) == pad;
  if (!ok) return error("{}: write failed: {}", path, std::strerror(errno));
  if (std::fclose(f.release()) != 0)
    return error("{}: close failed: {}", path, std::strerror(errno));
  return {};
}

}  // namespace t9::gguf
