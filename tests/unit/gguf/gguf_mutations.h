// A small valid GGUF file built with our writer, a walker that finds where each of its fields
// lies, and a set of broken variants of it (truncations, bad counts, lengths, types, offsets...).
// Shared by the mutation unit test and by scripts/fuzz.sh, which writes the variants out as a
// corpus and runs them through the ASan/UBSan fuzz binary. Header-only so both can include it.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace t9::gguf::testing {

// Deterministic bytes for tensor data.
inline std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// Every value type, an empty array, a nested array, and four tensors of four ggml types. Some
// names have same-length twins ("test.u32"/"test.i32", "blk.0.q"/"blk.0.k") so a one-byte change
// makes a duplicate.
inline GgufWriter sample_writer(uint32_t alignment = 32) {
  GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("general.alignment", Value::u32(alignment));
  w.set("test.u8", Value::u8(200));
  w.set("test.i8", Value::i8(-100));
  w.set("test.u16", Value::u16(60000));
  w.set("test.i16", Value::i16(-30000));
  w.set("test.u32", Value::u32(4000000000u));
  w.set("test.i32", Value::i32(-2000000000));
  w.set("test.u64", Value::u64(18000000000000000000ull));
  w.set("test.i64", Value::i64(-9000000000000000000ll));
  w.set("test.f32", Value::f32(1.5f));
  w.set("test.f64", Value::f64(-2.25));
  w.set("test.bool", Value::boolean(true));
  w.set("test.str", Value::str("h\xC3\xA9llo"));
  w.set("test.arr_str",
        Value::array(ValueType::STRING, {Value::str("a"), Value::str("bc"), Value::str("")}));
  w.set("test.arr_u8", Value::array(ValueType::UINT8, {Value::u8(1), Value::u8(2)}));
  w.set("test.empty", Value::array(ValueType::FLOAT32, {}));
  w.set("test.nested",
        Value::array(ValueType::ARRAY,
                     {Value::array(ValueType::INT32, {Value::i32(1), Value::i32(-2)}),
                      Value::array(ValueType::INT32, {Value::i32(3)})}));
  auto add = [&](const char* name, std::vector<int64_t> ne, GgmlType type, size_t n_bytes,
                 uint32_t seed) {
    Status s = w.add_tensor(name, std::move(ne), type, pattern_bytes(n_bytes, seed));
    T9_CHECK(s.ok(), "{}", s.message());
  };
  add("tok.weight", {256, 2}, GgmlType::Q4_K, 2 * 144, 1);
  add("norm.weight", {8}, GgmlType::F32, 32, 2);
  add("blk.0.q", {32, 3}, GgmlType::Q8_0, 3 * 34, 3);
  add("blk.0.k", {4, 2, 1}, GgmlType::F16, 16, 4);
  return w;
}

inline std::vector<uint8_t> sample_bytes(uint32_t alignment = 32) {
  auto r = sample_writer(alignment).to_bytes();
  T9_CHECK(r.ok(), "{}", r.message());
  return std::move(r).value();
}

// Where the fields of a (valid) file lie. Independent of GgufFile: a plain walk of the format.
struct Layout {
  struct Kv {
    std::string key;
    uint64_t key_len_at = 0, type_at = 0, value_at = 0;
    uint32_t type = 0;
    uint64_t elem_type_at = 0, count_at = 0;  // arrays only
  };
  struct Tensor {
    std::string name;
    uint64_t name_len_at = 0, n_dims_at = 0, ne_at = 0, type_at = 0, offset_at = 0;
    uint32_t n_dims = 0;
  };
  std::vector<Kv> kv;
  std::vector<Tensor> tensors;
  uint64_t infos_end = 0;

  const Kv& key(std::string_view k) const {
    for (const auto& x : kv)
      if (x.key == k) return x;
    T9_CHECK(false, "no key {}", k);
    __builtin_unreachable();
  }
  const Tensor& tensor(std::string_view n) const {
    for (const auto& x : tensors)
      if (x.name == n) return x;
    T9_CHECK(false, "no tensor {}", n);
    __builtin_unreachable();
  }
};

namespace detail {
template <typename T>
T load(const std::vector<uint8_t>& b, uint64_t at) {
  T9_CHECK(at + sizeof(T) <= b.size(), "walk past end");
  T x;
  std::memcpy(&x, b.data() + at, sizeof(T));
  return x;
}
inline uint64_t skip_value(const std::vector<uint8_t>& b, uint64_t at, uint32_t type) {
  static constexpr uint64_t kSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  if (type == 8) return at + 8 + load<uint64_t>(b, at);
  if (type == 9) {
    const uint32_t et = load<uint32_t>(b, at);
    const uint64_t n = load<uint64_t>(b, at + 4);
    at += 12;
    for (uint64_t i = 0; i < n; ++i) at = skip_value(b, at, et);
    return at;
  }
  return at + kSize[type];
}
}  // namespace detail

inline Layout walk(const std::vector<uint8_t>& b) {
  using detail::load;
  Layout l;
  const uint64_t n_tensors = load<uint64_t>(b, 8), n_kv = load<uint64_t>(b, 16);
  uint64_t at = 24;
  for (uint64_t i = 0; i < n_kv; ++i) {
    Layout::Kv kv;
    kv.key_len_at = at;
    const uint64_t len = load<uint64_t>(b, at);
    kv.key.assign(reinterpret_cast<const char*>(b.data() + at + 8), len);
    kv.type_at = at + 8 + len;
    kv.type = load<uint32_t>(b, kv.type_at);
    kv.value_at = kv.type_at + 4;
    if (kv.type == 9) kv.elem_type_at = kv.value_at, kv.count_at = kv.value_at + 4;
    at = detail::skip_value(b, kv.value_at, kv.type);
    l.kv.push_back(kv);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Layout::Tensor t;
    t.name_len_at = at;
    const uint64_t len = load<uint64_t>(b, at);
    t.name.assign(reinterpret_cast<const char*>(b.data() + at + 8), len);
    t.n_dims_at = at + 8 + len;
    t.n_dims = load<uint32_t>(b, t.n_dims_at);
    t.ne_at = t.n_dims_at + 4;
    t.type_at = t.ne_at + 8ull * t.n_dims;
    t.offset_at = t.type_at + 4;
    at = t.offset_at + 8;
    l.tensors.push_back(t);
  }
  l.infos_end = at;
  return l;
}

struct Mutation {
  std::string label;  // what was changed, for test output and corpus file names
  std::vector<uint8_t> bytes;
  std::string expect;  // a substring the error message must contain ("" = any error)
};

namespace detail {
template <typename T>
std::vector<uint8_t> with(std::vector<uint8_t> b, uint64_t at, T x) {
  T9_CHECK(at + sizeof(T) <= b.size(), "mutation past end");
  std::memcpy(b.data() + at, &x, sizeof(T));
  return b;
}
}  // namespace detail

// Broken variants of sample_bytes(): each must be rejected with an Error.
inline std::vector<Mutation> broken_variants() {
  using detail::with;
  constexpr uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  const std::vector<uint8_t> good = sample_bytes();
  const Layout l = walk(good);
  const uint64_t data_offset = (l.infos_end + 31) / 32 * 32;
  std::vector<Mutation> m;
  auto add = [&](std::string label, std::vector<uint8_t> b, std::string expect) {
    m.push_back({std::move(label), std::move(b), std::move(expect)});
  };

  // Every truncation point of the header region, and a few inside the data section.
  for (uint64_t n = 0; n < data_offset; ++n)
    add("truncate_" + std::to_string(n), {good.begin(), good.begin() + n}, "");
  for (uint64_t n : {data_offset, data_offset + 1, data_offset + 287, data_offset + 300})
    add("truncate_data_" + std::to_string(n), {good.begin(), good.begin() + n},
        "runs past the end");

  for (int i = 0; i < 4; ++i) {
    auto b = good;
    b[i] ^= 0x20;
    add("magic_" + std::to_string(i), b, "bad magic");
  }
  for (uint32_t v : {0u, 1u, 4u, 0xFFFFFFFFu})
    add("version_" + std::to_string(v), with(good, 4, v), "version");
  add("version_big_endian", with(good, 4, uint32_t{0x03000000}), "big-endian");

  for (uint64_t n : {kHuge, uint64_t{1} << 62, uint64_t{1} << 40, uint64_t{100000}})
    add("n_tensors_" + std::to_string(n), with(good, 8, n), "tensor count");
  for (uint64_t n : {kHuge, uint64_t{1} << 62, uint64_t{100000}})
    add("n_kv_" + std::to_string(n), with(good, 16, n), "metadata count");

  for (const auto& kv : l.kv) {
    add("key_len_huge_" + kv.key, with(good, kv.key_len_at, kHuge), "key length");
    add("key_len_file_" + kv.key, with(good, kv.key_len_at, uint64_t{good.size()}), "key length");
    add("value_type_13_" + kv.key, with(good, kv.type_at, uint32_t{13}), "unknown value type 13");
    add("value_type_max_" + kv.key, with(good, kv.type_at, uint32_t{0xFFFFFFFF}),
        "unknown value type");
    if (kv.type == 8)
      add("string_len_huge_" + kv.key, with(good, kv.value_at, kHuge), "string length");
    if (kv.type == 9) {
      add("elem_type_" + kv.key, with(good, kv.elem_type_at, uint32_t{13}),
          "unknown array element type");
      add("array_len_huge_" + kv.key, with(good, kv.count_at, kHuge), "array length");
      add("array_len_2^61_" + kv.key, with(good, kv.count_at, uint64_t{1} << 61), "array length");
    }
  }
  add("bool_2", with(good, l.key("test.bool").value_at, uint8_t{2}), "bool value is 2");
  add("bool_255", with(good, l.key("test.bool").value_at, uint8_t{255}), "bool value is 255");
  {
    auto b = good;
    b[l.key("test.u32").key_len_at + 8 + 5] = 'i';  // "test.u32" -> "test.i32"
    add("duplicate_key", b, "duplicate key");
  }
  const uint64_t align_at = l.key("general.alignment").value_at;
  for (uint32_t a : {0u, 3u, 48u, 0xFFFFFFFFu})
    add("alignment_" + std::to_string(a), with(good, align_at, a), "not a power of two");
  add("alignment_int32", with(good, l.key("general.alignment").type_at, uint32_t{5}),
      "must be UINT32");
  add("alignment_64", with(good, align_at, uint32_t{64}), "not a multiple of the alignment");
  add("alignment_2^31", with(good, align_at, uint32_t{1u << 31}), "runs past the end");

  for (const auto& t : l.tensors) {
    add("name_len_huge_" + t.name, with(good, t.name_len_at, kHuge), "name length");
    add("n_dims_5_" + t.name, with(good, t.n_dims_at, uint32_t{5}), "n_dims is 5");
    add("n_dims_max_" + t.name, with(good, t.n_dims_at, uint32_t{0xFFFFFFFF}), "n_dims");
    add("ne_negative_" + t.name, with(good, t.ne_at, uint64_t{1} << 63), "negative as int64");
    add("ne_huge_" + t.name, with(good, t.ne_at, uint64_t{1} << 50), "");
    for (uint32_t id : {4u, 5u, 99u, 0xFFFFFFFFu})
      add("type_" + std::to_string(id) + "_" + t.name, with(good, t.type_at, id),
          "unknown ggml type id " + std::to_string(id));
    const uint64_t off = detail::load<uint64_t>(good, t.offset_at);
    add("offset_plus1_" + t.name, with(good, t.offset_at, off + 1),
        "not a multiple of the alignment");
    add("offset_huge_" + t.name, with(good, t.offset_at, uint64_t{1} << 62), "runs past the end");
    add("offset_wrap_" + t.name, with(good, t.offset_at, kHuge - 31), "runs past the end");
  }
  if (l.tensors.size() >= 2) {
    const auto& t0 = l.tensors[0];
    const auto& t1 = l.tensors[1];
    // Two dims of 2^32 multiply to 2^64: the element count overflows.
    auto b = with(with(good, t0.ne_at, uint64_t{1} << 32), t0.ne_at + 8, uint64_t{1} << 32);
    add("ne_product_overflow", b, "overflows int64");
    add("ne_bytes_overflow", with(good, l.tensor("norm.weight").ne_at, uint64_t{1} << 62),
        "overflows 64 bits");
    add("ne0_not_block_multiple", with(good, t0.ne_at, uint64_t{255}), "not a multiple of Q4_K");
    add("q8_as_q4k", with(good, l.tensor("blk.0.q").type_at, uint32_t{12}), "block size 256");
    add("overlap", with(good, t1.offset_at, detail::load<uint64_t>(good, t0.offset_at)),
        "overlaps");
    add("overlap_partial", with(good, t1.offset_at, uint64_t{256}), "overlaps");
    auto d = good;
    d[l.tensor("blk.0.q").name_len_at + 8 + 6] = 'k';  // "blk.0.q" -> "blk.0.k"
    add("duplicate_tensor", d, "duplicate tensor name");
  }
  // Arrays nested past the limit (the writer refuses them, so patch a valid file).
  {
    std::vector<uint8_t> b;
    auto put = [&](auto x) {
      const size_t at = b.size();
      b.resize(at + sizeof(x));
      std::memcpy(b.data() + at, &x, sizeof(x));
    };
    put(kMagic), put(uint32_t{3}), put(uint64_t{0}), put(uint64_t{1});
    put(uint64_t{1}), b.push_back('k'), put(uint32_t{9});
    for (uint32_t i = 0; i < kMaxArrayNesting + 1; ++i) put(uint32_t{9}), put(uint64_t{1});
    put(uint32_t{0}), put(uint64_t{0});
    add("nesting_too_deep", b, "nested deeper");
  }
  add("empty_file", {}, "too short");
  return m;
}

// Byte flips at random positions of the header region: may or may not be valid; they must
// never crash the reader.
inline std::vector<std::vector<uint8_t>> random_flips(size_t n, uint32_t seed) {
  const std::vector<uint8_t> good = sample_bytes();
  const uint64_t header = walk(good).infos_end;
  std::mt19937 rng(seed);
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < n; ++i) {
    auto b = good;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_flips; ++k) b[rng() % header] ^= static_cast<uint8_t>(1u << (rng() % 8));
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace t9::gguf::testing
