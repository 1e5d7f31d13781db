// Typed metadata accessors of GgufFile: get<T>, get_array<T>. Integer requests accept any
// integer value type whose value fits the requested type, floating point requests accept FLOAT32
// and FLOAT64; everything else is an Error that names the file and the key.
#include <fmt/format.h>

#include <concepts>
#include <limits>
#include <type_traits>
#include <utility>

#include "gguf/gguf_file.h"

namespace t9::gguf {
namespace {

template <typename T>
constexpr std::string_view cpp_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_same_v<T, std::string>)
    return "string";
  else if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else if constexpr (std::is_signed_v<T>) {
    if constexpr (sizeof(T) == 1)
      return "int8";
    else if constexpr (sizeof(T) == 2)
      return "int16";
    else if constexpr (sizeof(T) == 4)
      return "int32";
    else
      return "int64";
  } else {
    if constexpr (sizeof(T) == 1)
      return "uint8";
    else if constexpr (sizeof(T) == 2)
      return "uint16";
    else if constexpr (sizeof(T) == 4)
      return "uint32";
    else
      return "uint64";
  }
}

// `where` is "<file>: metadata '<key>'" (plus "[i]" for array items); built only on failure.
template <typename T, typename Where>
Result<T> convert(const Value& v, const Where& where) {
  auto mistyped = [&]() {
    return Error{fmt::format("{} has type {}, cannot be read as {}", where(),
                             value_type_name(v.type), cpp_name<T>())};
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (v.type != ValueType::BOOL) return mistyped();
    return std::get<bool>(v.v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.type != ValueType::STRING) return mistyped();
    return std::get<std::string>(v.v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v.type != ValueType::FLOAT32 && v.type != ValueType::FLOAT64) return mistyped();
    return static_cast<T>(std::get<double>(v.v));
  } else {
    static_assert(std::is_integral_v<T>);
    if (!v.is_integer()) return mistyped();
    if (const auto* u = std::get_if<uint64_t>(&v.v)) {
      if (!std::in_range<T>(*u))
        return Error{fmt::format("{}: value {} does not fit in {}", where(), *u, cpp_name<T>())};
      return static_cast<T>(*u);
    }
    const int64_t s = std::get<int64_t>(v.v);
    if (!std::in_range<T>(s))
      return Error{fmt::format("{}: value {} does not fit in {}", where(), s, cpp_name<T>())};
    return static_cast<T>(s);
  }
}

}  // namespace

template <typename T>
Result<T> GgufFile::get(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return error("{}: metadata key '{}' is missing", name_, key);
  return convert<T>(*v, [&] { return fmt::format("{}: metadata key '{}'", name_, key); });
}

template <typename T>
Result<std::vector<T>> GgufFile::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return error("{}: metadata key '{}' is missing", name_, key);
  if (v->type != ValueType::ARRAY)
    return error("{}: metadata key '{}' has type {}, expected an ARRAY of {}", name_, key,
                 value_type_name(v->type), cpp_name<T>());
  const auto& items = std::get<Array>(v->v).items;
  std::vector<T> out;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto r = convert<T>(
        items[i], [&] { return fmt::format("{}: metadata key '{}' item [{}]", name_, key, i); });
    if (!r.ok()) return r.error();
    out.push_back(std::move(r).value());
  }
  return out;
}

#define T9_GGUF_INSTANTIATE(T)                                 \
  template Result<T> GgufFile::get<T>(std::string_view) const; \
  template Result<std::vector<T>> GgufFile::get_array<T>(std::string_view) const;

T9_GGUF_INSTANTIATE(bool)
T9_GGUF_INSTANTIATE(std::string)
T9_GGUF_INSTANTIATE(float)
T9_GGUF_INSTANTIATE(double)
T9_GGUF_INSTANTIATE(int8_t)
T9_GGUF_INSTANTIATE(uint8_t)
T9_GGUF_INSTANTIATE(int16_t)
T9_GGUF_INSTANTIATE(uint16_t)
T9_GGUF_INSTANTIATE(int32_t)
T9_GGUF_INSTANTIATE(uint32_t)
T9_GGUF_INSTANTIATE(long)
T9_GGUF_INSTANTIATE(unsigned long)
T9_GGUF_INSTANTIATE(long long)
T9_GGUF_INSTANTIATE(unsigned long long)
#undef T9_GGUF_INSTANTIATE

}  // namespace t9::gguf
