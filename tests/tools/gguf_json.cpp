// Test helper for tests/py/gguf: bridges GgufWriter / GgufFile and JSON so Python can compare
// them with gguf-py.
//   gguf_json write SPEC.json OUT.gguf   build a file with GgufWriter from a JSON spec
//   gguf_json dump FILE.gguf [--data]    print what GgufFile reads as JSON (--data: full tensor
//                                        bytes as hex; default: first/last 16 bytes only)
// Value encoding (both ways): {"type": "UINT32", "value": 5}; arrays
// {"type": "ARRAY", "elem_type": "INT32", "value": [1, 2]}, where the items of an array of arrays
// are {"elem_type": ..., "value": [...]}. Tensors: {"name", "ne": [ne0, ...], "type": "Q4_K",
// "data_hex"} (dump: "offset", "n_bytes", "head_hex", "tail_hex" instead of data_hex).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

using nlohmann::json;
using namespace t9;
using namespace t9::gguf;

namespace {

ValueType type_from_json(const json& j) {
  for (uint32_t i = 0; i < kNumValueTypes; ++i)
    if (value_type_name(static_cast<ValueType>(i)) == j.get<std::string>())
      return static_cast<ValueType>(i);
  throw std::runtime_error("unknown value type " + j.dump());
}

Value value_from_json(ValueType t, const json& v, const json* elem_type) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::UINT16:
    case ValueType::UINT32:
    case ValueType::UINT64:
      return Value{t, v.get<uint64_t>()};
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64:
      return Value{t, v.get<int64_t>()};
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      return Value{t, v.get<double>()};
    case ValueType::BOOL:
      return Value::boolean(v.get<bool>());
    case ValueType::STRING:
      return Value::str(v.get<std::string>());
    case ValueType::ARRAY: {
      const ValueType et = type_from_json(*elem_type);
      std::vector<Value> items;
      for (const auto& item : v) {
        if (et == ValueType::ARRAY)
          items.push_back(value_from_json(et, item.at("value"), &item.at("elem_type")));
        else
          items.push_back(value_from_json(et, item, nullptr));
      }
      return Value::array(et, std::move(items));
    }
  }
  throw std::runtime_error("bad value");
}

json value_to_json(const Value& v) {
  if (const auto* a = std::get_if<Array>(&v.v)) {
    json items = json::array();
    for (const auto& item : a->items) {
      if (a->elem_type == ValueType::ARRAY)
        items.push_back({{"elem_type", value_type_name(std::get<Array>(item.v).elem_type)},
                         {"value", value_to_json(item)}});
      else
        items.push_back(value_to_json(item));
    }
    return items;
  }
  return std::visit(
      [](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Array>)
          return nullptr;
        else
          return json(x);
      },
      v.v);
}

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> b(s.size() / 2);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::stoi(s.substr(2 * i, 2), nullptr, 16);
  return b;
}

std::string to_hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) s += d[x >> 4], s += d[x & 15];
  return s;
}

int write(const char* spec_path, const char* out_path) {
  std::ifstream in(spec_path);
  const json spec = json::parse(in);
  GgufWriter w;
  for (const auto& kv : spec.at("kv")) {
    const ValueType t = type_from_json(kv.at("type"));
    w.set(kv.at("key"), value_from_json(t, kv.at("value"),
                                        kv.contains("elem_type") ? &kv.at("elem_type") : nullptr));
  }
  for (const auto& t : spec.at("tensors")) {
    const auto type = type_from_name(t.at("type").get<std::string>());
    if (!type) throw std::runtime_error("unknown tensor type " + t.at("type").dump());
    Status s = w.add_tensor(t.at("name"), t.at("ne").get<std::vector<int64_t>>(), *type,
                            from_hex(t.at("data_hex")));
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
  }
  Status s = w.write_file(out_path);
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
  return 0;
}

int dump(const char* path, bool with_data) {
  auto f = GgufFile::open(path);
  if (!f.ok()) return std::fprintf(stderr, "%s\n", f.message().c_str()), 1;
  json j;
  j["version"] = f->version();
  j["alignment"] = f->alignment();
  j["data_offset"] = f->data_offset();
  json kvs = json::array();
  for (const auto& [key, v] : f->metadata()) {
    json kv = {{"key", key}, {"type", value_type_name(v.type)}, {"value", value_to_json(v)}};
    if (v.type == ValueType::ARRAY)
      kv["elem_type"] = value_type_name(std::get<Array>(v.v).elem_type);
    kvs.push_back(std::move(kv));
  }
  j["kv"] = std::move(kvs);
  json ts = json::array();
  for (const auto& t : f->tensors()) {
    const auto bytes = f->tensor_bytes(t);
    json tj = {{"name", t.name},
               {"ne", t.ne},
               {"type", type_name(t.type)},
               {"offset", t.offset},
               {"n_bytes", t.n_bytes}};
    if (with_data) {
      tj["data_hex"] = to_hex(bytes);
    } else {
      tj["head_hex"] = to_hex(bytes.first(std::min<size_t>(16, bytes.size())));
      tj["tail_hex"] = to_hex(bytes.last(std::min<size_t>(16, bytes.size())));
    }
    ts.push_back(std::move(tj));
  }
  j["tensors"] = std::move(ts);
  std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "write" && argc == 4) return write(argv[2], argv[3]);
    if (cmd == "dump" && (argc == 3 || argc == 4))
      return dump(argv[2], argc == 4 && std::string(argv[3]) == "--data");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_json: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "usage: gguf_json write SPEC.json OUT.gguf | dump FILE.gguf [--data]\n");
  return 2;
}
