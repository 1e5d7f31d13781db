#include "model/convert/safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>

#include "quant/half.h"

namespace t9::convert {
namespace {

struct DtypeInfo {
  const char* name;
  StDtype dtype;
  int bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"F32", StDtype::F32, 4},  {"F16", StDtype::F16, 2}, {"BF16", StDtype::BF16, 2},
    {"F64", StDtype::F64, 8},  {"I64", StDtype::I64, 8}, {"I32", StDtype::I32, 4},
    {"I8", StDtype::I8, 1},    {"U8", StDtype::U8, 1},   {"BOOL", StDtype::BOOL, 1},
};

const DtypeInfo* dtype_info(const std::string& s) {
  for (const auto& d : kDtypes)
    if (s == d.name) return &d;
  return nullptr;
}

}  // namespace

int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  T9_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  const uint64_t size = map.size();
  if (size < 8) return error("{}: offset 0: file too short for a safetensors header", path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, map.data(), 8);
  if (header_len > size - 8) {
    return error("{}: offset 0: header length {} exceeds the file ({} bytes)", path, header_len,
                 size);
  }
  nlohmann::json header = nlohmann::json::parse(map.data() + 8, map.data() + 8 + header_len,
                                                nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return error("{}: offset 8: header is not a JSON object", path);
  const uint64_t data_begin = 8 + header_len;
  const uint64_t data_size = size - data_begin;

  SafetensorsFile f;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
      return error("{}: tensor '{}': missing dtype/shape/data_offsets", path, name);
    const auto* dt = info["dtype"].is_string() ? dtype_info(info["dtype"].get<std::string>())
                                               : nullptr;
    if (!dt) return error("{}: tensor '{}': unsupported dtype {}", path, name, info["dtype"].dump());
    StTensor t;
    t.dtype = dt->dtype;
    uint64_t n = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned()) return error("{}: tensor '{}': bad shape", path, name);
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && n > std::numeric_limits<int64_t>::max() / v)
        return error("{}: tensor '{}': element count overflows", path, name);
      n *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return error("{}: tensor '{}': bad data_offsets", path, name);
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      return error("{}: tensor '{}': data [{}, {}) outside the data section ({} bytes)", path, name,
                   b, e, data_size);
    if (e - b != n * static_cast<uint64_t>(dt->bytes))
      return error("{}: tensor '{}': {} bytes for {} elements of {}", path, name, e - b, n,
                   dt->name);
    t.bytes = {map.data() + data_begin + b, static_cast<size_t>(e - b)};
    f.tensors_.emplace(name, std::move(t));
  }
  f.map_ = std::move(map);  // spans point into the mapping, which a move keeps in place
  return f;
}

const StTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::vector<float>> SafetensorsFile::to_f32(const std::string& name) const {
  const StTensor* t = find(name);
  if (!t) return error("safetensors: no tensor '{}'", name);
  const size_t n = static_cast<size_t>(t->n_elements());
  std::vector<float> out(n);
  const uint8_t* p = t->bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (t->dtype) {
      case StDtype::F32: std::memcpy(&out[i], p + 4 * i, 4); break;
      case StDtype::F16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
        break;
      }
      case StDtype::BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
        break;
      }
      case StDtype::F64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
        break;
      }
      default: return error("safetensors: tensor '{}' is not a float tensor", name);
    }
  }
  return out;
}

}  // namespace t9::convert
