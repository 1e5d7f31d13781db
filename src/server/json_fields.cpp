#include "server/json_fields.h"

#include <fmt/format.h>

#include <cmath>

namespace t9::server {
namespace {

const Json* member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "a number";
  }
}

}  // namespace

std::optional<std::string> FieldReader::str(const Json& obj, const std::string& path,
                                            const char* key) {
  const Json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    fail(join(path, key), fmt::format("expected a string, got {}", type_name(*v)));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> FieldReader::boolean(const Json& obj, const std::string& path,
                                         const char* key) {
  const Json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    fail(join(path, key), fmt::format("expected a boolean, got {}", type_name(*v)));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<double> FieldReader::number(const Json& obj, const std::string& path,
                                          const char* key, double lo, double hi) {
  const Json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    fail(join(path, key), fmt::format("expected a number, got {}", type_name(*v)));
    return std::nullopt;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    fail(join(path, key), fmt::format("{} is out of range [{}, {}]", d, lo, hi));
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> FieldReader::integer(const Json& obj, const std::string& path,
                                            const char* key, int64_t lo, int64_t hi) {
  const Json* v = member(obj, key);
  if (!v) return std::nullopt;
  // Integral floats (2.0) are accepted as Python clients sometimes send them.
  const bool integral_float = v->is_number_float() && std::isfinite(v->get<double>()) &&
                              std::floor(v->get<double>()) == v->get<double>() &&
                              std::fabs(v->get<double>()) < 9e15;
  if (!v->is_number_integer() && !integral_float) {
    fail(join(path, key), fmt::format("expected an integer, got {}", type_name(*v)));
    return std::nullopt;
  }
  const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX
                        ? INT64_MAX
                        : (integral_float ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>());
  if (i < lo || i > hi) {
    fail(join(path, key), fmt::format("{} is out of range [{}, {}]", i, lo, hi));
    return std::nullopt;
  }
  return i;
}

const Json* FieldReader::array(const Json& obj, const std::string& path, const char* key) {
  const Json* v = member(obj, key);
  if (!v) return nullptr;
  if (!v->is_array()) {
    fail(join(path, key), fmt::format("expected an array, got {}", type_name(*v)));
    return nullptr;
  }
  return v;
}

const Json* FieldReader::object(const Json& obj, const std::string& path, const char* key) {
  const Json* v = member(obj, key);
  if (!v) return nullptr;
  if (!v->is_object()) {
    fail(join(path, key), fmt::format("expected an object, got {}", type_name(*v)));
    return nullptr;
  }
  return v;
}

void FieldReader::require(const Json& obj, const std::string& path, const char* key) {
  if (!member(obj, key)) fail(join(path, key), "is required");
}

std::optional<Json> parse_json_object(const std::string& body, std::string& error) {
  // Nesting is bounded here, once, because everything after the parse walks the document
  // recursively (dumps, schema compiles, templates' tojson): a client's 200,000 nested brackets
  // must be a 400, not a stack overflow. The parse itself is iterative; a too-deep part is
  // dropped as it is read.
  bool too_deep = false;
  const Json::parser_callback_t depth_check = [&too_deep](int depth, Json::parse_event_t event,
                                                          Json&) {
    if (depth <= kMaxBodyDepth) return true;
    too_deep = too_deep || event == Json::parse_event_t::object_start ||
               event == Json::parse_event_t::array_start;
    return false;
  };
  Json j = Json::parse(body, depth_check, /*allow_exceptions=*/false);
  if (too_deep) {
    error = fmt::format("request body: JSON nested deeper than {} levels", kMaxBodyDepth);
    return std::nullopt;
  }
  if (j.is_discarded()) {
    error = "request body is not valid JSON";
    return std::nullopt;
  }
  if (!j.is_object()) {
    error = "request body must be a JSON object";
    return std::nullopt;
  }
  return j;
}

}  // namespace t9::server
