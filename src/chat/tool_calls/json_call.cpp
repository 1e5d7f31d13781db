#include "chat/tool_calls/json_call.h"

#include "chat/tool_calls/utf8_text.h"

namespace t9::chat {
namespace {

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Offset one past the string starting with the quote at s[pos], npos when unterminated.
std::size_t skip_json_string(std::string_view s, std::size_t pos) {
  for (std::size_t i = pos + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

std::size_t skip_json_container(std::string_view s, std::size_t pos) {
  int depth = 0;
  for (std::size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      const std::size_t end = skip_json_string(s, i);
      if (end == std::string_view::npos) return end;
      i = end - 1;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

ordered_json parse_or_discarded(std::string_view raw) {
  return ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
}

}  // namespace

std::size_t skip_json_value(std::string_view s, std::size_t pos) {
  if (pos >= s.size()) return std::string_view::npos;
  if (s[pos] == '"') return skip_json_string(s, pos);
  if (s[pos] == '{' || s[pos] == '[') return skip_json_container(s, pos);
  std::size_t i = pos;
  while (i < s.size() && !is_space(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
  return i == s.size() ? std::string_view::npos : i;  // a scalar may still grow
}

Result<std::vector<JsonMember>> split_json_object(std::string_view s) {
  std::size_t i = skip_space(s, 0);
  if (i >= s.size() || s[i] != '{') return error("offset {}: expected '{{'", i);
  std::vector<JsonMember> members;
  i = skip_space(s, i + 1);
  if (i < s.size() && s[i] == '}') {
    if (skip_space(s, i + 1) != s.size()) return error("offset {}: text after the object", i + 1);
    return members;
  }
  while (true) {
    if (i >= s.size() || s[i] != '"') return error("offset {}: expected a member name", i);
    const std::size_t key_end = skip_json_string(s, i);
    if (key_end == std::string_view::npos) return error("offset {}: unterminated name", i);
    auto key = parse_or_discarded(s.substr(i, key_end - i));
    if (!key.is_string()) return error("offset {}: invalid member name", i);
    i = skip_space(s, key_end);
    if (i >= s.size() || s[i] != ':') return error("offset {}: expected ':'", i);
    i = skip_space(s, i + 1);
    // A scalar at the very end cannot be complete: the object's '}' must follow it.
    const std::size_t value_end = skip_json_value(s, i);
    if (value_end == std::string_view::npos) return error("offset {}: incomplete value", i);
    const std::string_view raw = s.substr(i, value_end - i);
    if (parse_or_discarded(raw).is_discarded()) return error("offset {}: invalid value", i);
    members.push_back(JsonMember{key.get<std::string>(), raw});
    i = skip_space(s, value_end);
    if (i < s.size() && s[i] == ',') {
      i = skip_space(s, i + 1);
      continue;
    }
    if (i < s.size() && s[i] == '}') break;
    return error("offset {}: expected ',' or '}}'", i);
  }
  if (skip_space(s, i + 1) != s.size()) return error("offset {}: text after the object", i + 1);
  return members;
}

Result<JsonCall> parse_json_call(std::string_view text, const ToolSet& tools) {
  T9_ASSIGN_OR_RETURN(auto members, split_json_object(text));
  const ToolSpec* tool = nullptr;
  std::string name;
  std::string arguments_text = "{}";
  for (const auto& m : members) {
    if (m.key == "name" && tool == nullptr) {
      auto v = parse_or_discarded(m.raw_value);
      if (!v.is_string()) return error("tool call name: not a string");
      name = v.get<std::string>();
      tool = tools.find(name);
      if (tool == nullptr)
        return error("tool call name '{}': not one of the request's tools", name);
    } else if (m.key == "arguments" || m.key == "parameters") {
      auto v = parse_or_discarded(m.raw_value);
      if (v.is_string()) {
        arguments_text = v.get<std::string>();  // arguments sent as a JSON-encoded string
      } else if (v.is_object()) {
        arguments_text = std::string(m.raw_value);
      } else {
        return error("tool call {}: not an object", m.key);
      }
    }
  }
  if (tool == nullptr) return error("tool call: missing \"name\"");
  auto args = build_json_arguments(arguments_text, *tool);
  if (!args.ok()) return error("tool call '{}' arguments: {}", name, args.message());
  return JsonCall{name, std::move(args).value()};
}

Result<std::string> build_json_arguments(std::string_view object_text, const ToolSpec& tool) {
  T9_ASSIGN_OR_RETURN(auto members, split_json_object(object_text));
  ordered_json object = ordered_json::object();
  for (const auto& m : members) {
    if (object.contains(m.key)) continue;
    object[m.key] = coerce_json_value(parse_or_discarded(m.raw_value), m.raw_value,
                                      tool.property_schema(m.key));
  }
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::vector<std::string_view>> split_json_array(std::string_view s) {
  std::size_t i = skip_space(s, 0);
  if (i >= s.size() || s[i] != '[') return error("offset {}: expected '['", i);
  std::vector<std::string_view> elements;
  i = skip_space(s, i + 1);
  if (i < s.size() && s[i] == ']') {
    if (skip_space(s, i + 1) != s.size()) return error("offset {}: text after the array", i + 1);
    return elements;
  }
  while (true) {
    const std::size_t end = skip_json_value(s, i);
    if (end == std::string_view::npos) return error("offset {}: incomplete element", i);
    if (parse_or_discarded(s.substr(i, end - i)).is_discarded()) {
      return error("offset {}: invalid element", i);
    }
    elements.push_back(s.substr(i, end - i));
    i = skip_space(s, end);
    if (i < s.size() && s[i] == ',') {
      i = skip_space(s, i + 1);
      continue;
    }
    if (i < s.size() && s[i] == ']') break;
    return error("offset {}: expected ',' or ']'", i);
  }
  if (skip_space(s, i + 1) != s.size()) return error("offset {}: text after the array", i + 1);
  return elements;
}

}  // namespace t9::chat
