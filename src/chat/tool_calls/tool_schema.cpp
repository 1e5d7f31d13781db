#include "chat/tool_calls/tool_schema.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <vector>

#include "chat/tool_calls/utf8_text.h"

namespace t9::chat {
namespace {

using nlohmann::json;

// One alternative of a (possibly union) schema: a JSON type name, "enum" for an enum without a
// type, or "any" for a schema that says nothing about the type.
struct Alternative {
  std::string type;
  const json* schema;
};

constexpr int kMaxSchemaDepth = 8;  // anyOf nesting we follow; deeper is treated as "any"

void collect_alternatives(const json& schema, int depth, std::vector<Alternative>& out) {
  if (!schema.is_object() || depth > kMaxSchemaDepth) {
    out.push_back({"any", &schema});
    return;
  }
  bool found = false;
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = schema.find(key);
    if (it == schema.end() || !it->is_array()) continue;
    for (const auto& sub : *it) collect_alternatives(sub, depth + 1, out);
    found = true;
  }
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_string()) {
      out.push_back({it->get<std::string>(), &schema});
      found = true;
    } else if (it->is_array()) {
      for (const auto& t : *it) {
        if (t.is_string()) out.push_back({t.get<std::string>(), &schema});
      }
      found = true;
    }
  } else if (schema.contains("properties")) {
    out.push_back({"object", &schema});
    found = true;
  } else if (schema.contains("items")) {
    out.push_back({"array", &schema});
    found = true;
  } else if (schema.contains("enum")) {
    out.push_back({"enum", &schema});
    found = true;
  }
  if (!found) out.push_back({"any", &schema});
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// [+-]digits, leading zeros allowed ("03106" as an integer is 3106); out of 64-bit range: none.
std::optional<ordered_json> try_integer(std::string_view text) {
  std::string_view s = trim_space(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (!all_digits(s)) return std::nullopt;
  std::uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  if (!negative) return ordered_json(magnitude);
  constexpr auto kMinMagnitude = static_cast<std::uint64_t>(INT64_MAX) + 1;
  if (magnitude > kMinMagnitude) return std::nullopt;
  if (magnitude == kMinMagnitude) return ordered_json(INT64_MIN);
  return ordered_json(-static_cast<std::int64_t>(magnitude));
}

// JSON number grammar, except that a leading '+', leading zeros and "5." / ".5" are accepted.
bool looks_like_decimal(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  std::size_t n_mantissa_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++n_mantissa_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++n_mantissa_digits;
  }
  if (n_mantissa_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!all_digits(s.substr(i))) return false;
    return true;
  }
  return i == s.size();
}

std::optional<ordered_json> try_number(std::string_view text) {
  if (auto i = try_integer(text)) return i;
  std::string_view s = trim_space(text);
  if (!looks_like_decimal(s)) return std::nullopt;
  if (s[0] == '+') s.remove_prefix(1);
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return ordered_json(value);
}

std::optional<ordered_json> try_json_of(std::string_view text, ordered_json::value_t kind) {
  auto v = ordered_json::parse(trim_space(text), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || v.type() != kind) return std::nullopt;
  return v;
}

std::optional<ordered_json> try_type(std::string_view text, const std::string& type) {
  if (type == "integer") return try_integer(text);
  if (type == "number") return try_number(text);
  if (type == "boolean") {
    const std::string v = lower(trim_space(text));
    if (v == "true" || v == "false") return ordered_json(v == "true");
    return std::nullopt;
  }
  if (type == "null") {
    if (lower(trim_space(text)) == "null") return ordered_json(nullptr);
    return std::nullopt;
  }
  if (type == "object") return try_json_of(text, ordered_json::value_t::object);
  if (type == "array") return try_json_of(text, ordered_json::value_t::array);
  return std::nullopt;
}

std::optional<ordered_json> try_enum(std::string_view text, const json& schema) {
  auto it = schema.find("enum");
  if (it == schema.end() || !it->is_array()) return std::nullopt;
  for (const auto& member : *it) {
    if (member.is_string() ? member.get<std::string>() == text
                           : member.dump() == trim_space(text)) {
      return ordered_json(member);
    }
  }
  return std::nullopt;
}

ordered_json json_or_text(std::string_view text) {
  auto v = ordered_json::parse(trim_space(text), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() || trim_space(text).empty()) return ordered_json(std::string(text));
  return v;
}

bool enum_all_strings(const json& schema) {
  auto it = schema.find("enum");
  if (it == schema.end() || !it->is_array()) return true;
  for (const auto& m : *it) {
    if (!m.is_string()) return false;
  }
  return true;
}

}  // namespace

const nlohmann::json* ToolSpec::property_schema(std::string_view arg) const {
  auto props = parameters.find("properties");
  if (props == parameters.end() || !props->is_object()) return nullptr;
  auto it = props->find(std::string(arg));
  return it == props->end() ? nullptr : &*it;
}

Result<ToolSet> ToolSet::from_json(const nlohmann::json& tools) {
  if (!tools.is_array()) return error("tools: expected an array, got {}", tools.type_name());
  ToolSet set;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const json& entry = tools[i];
    if (!entry.is_object()) return error("tools[{}]: expected an object", i);
    const bool wrapped = entry.contains("function");
    const json& fn = wrapped ? entry["function"] : entry;
    const std::string where = fmt::format("tools[{}]{}", i, wrapped ? ".function" : "");
    if (!fn.is_object()) return error("{}: expected an object", where);
    auto name = fn.find("name");
    if (name == fn.end() || !name->is_string() || name->get<std::string>().empty()) {
      return error("{}.name: missing or not a non-empty string", where);
    }
    ToolSpec spec{name->get<std::string>(), json::object()};
    if (auto params = fn.find("parameters"); params != fn.end() && !params->is_null()) {
      if (!params->is_object()) return error("{}.parameters: expected an object schema", where);
      spec.parameters = *params;
    }
    set.add(std::move(spec));
  }
  return set;
}

void ToolSet::add(ToolSpec spec) {
  std::string key = spec.name;
  tools_.insert_or_assign(std::move(key), std::move(spec));
}

const ToolSpec* ToolSet::find(std::string_view name) const {
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : &it->second;
}

ordered_json convert_text_value(std::string_view text, const nlohmann::json* schema) {
  if (schema == nullptr) return json_or_text(text);
  std::vector<Alternative> alts;
  collect_alternatives(*schema, 0, alts);
  for (const auto& alt : alts) {
    if (auto v = try_enum(text, *alt.schema)) return *v;
  }
  for (const auto& alt : alts) {
    if (auto v = try_type(text, alt.type)) return *v;
  }
  for (const auto& alt : alts) {
    if (alt.type == "string" || alt.type == "enum") return ordered_json(std::string(text));
  }
  for (const auto& alt : alts) {
    if (alt.type == "any") return json_or_text(text);
  }
  return ordered_json(std::string(text));  // fits no declared type: kept as the text
}

bool is_plain_string_schema(const nlohmann::json* schema) {
  if (schema == nullptr) return false;
  std::vector<Alternative> alts;
  collect_alternatives(*schema, 0, alts);
  for (const auto& alt : alts) {
    if (alt.type != "string" && alt.type != "enum") return false;
    if (!enum_all_strings(*alt.schema)) return false;
  }
  return !alts.empty();
}

ordered_json coerce_json_value(ordered_json value, std::string_view raw_json,
                               const nlohmann::json* schema) {
  if ((value.is_number() || value.is_boolean()) && is_plain_string_schema(schema)) {
    return ordered_json(std::string(trim_space(raw_json)));
  }
  return value;
}

}  // namespace t9::chat
