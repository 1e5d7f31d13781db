// Typed access to a request's JSON with errors that name the field: a reader records the FIRST
// problem ("messages[2].content: expected a string or an array of content parts") and returns
// empty values afterwards, so adapters read a whole request straight through and check ok() once.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace t9::server {

using Json = nlohmann::ordered_json;

class FieldReader {
 public:
  // Paths are joined: at("messages").index(2).at("content") -> "messages[2].content".
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  void fail(std::string param, std::string message) {
    if (!error_.empty()) return;
    param_ = std::move(param);
    error_ = param_.empty() ? std::move(message) : param_ + ": " + message;
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& param() const { return param_; }

  // Each getter: absent or null -> nullopt (no error); wrong type or range -> error + nullopt.
  std::optional<std::string> str(const Json& obj, const std::string& path, const char* key);
  std::optional<bool> boolean(const Json& obj, const std::string& path, const char* key);
  std::optional<double> number(const Json& obj, const std::string& path, const char* key,
                               double lo, double hi);
  std::optional<int64_t> integer(const Json& obj, const std::string& path, const char* key,
                                 int64_t lo, int64_t hi);
  // The member if it is an array / object (else error when present and not null).
  const Json* array(const Json& obj, const std::string& path, const char* key);
  const Json* object(const Json& obj, const std::string& path, const char* key);
  // Marks a required member missing.
  void require(const Json& obj, const std::string& path, const char* key);

 private:
  std::string error_, param_;
};

// Parses a body as a JSON object; error message for malformed JSON, a non-object, or nesting
// deeper than kMaxBodyDepth.
inline constexpr int kMaxBodyDepth = 128;
std::optional<Json> parse_json_object(const std::string& body, std::string& error);

}  // namespace t9::server
