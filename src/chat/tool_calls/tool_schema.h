// The request's tools (OpenAI `tools` array) and the schema-typed conversion of tool-call
// argument values.
//
// Conversion policy (XML dialects, where every value arrives as text):
//  - a declared plain string (type "string", or an enum of strings) stays the exact text, even
//    when it looks like a number or a boolean ("03106", "5", "true", "null");
//  - integer / number / boolean / null / object / array convert when the (whitespace-trimmed) text
//    is such a value: "42" -> 42, "-1.5e3" -> -1500.0, "True" -> true, "[1,2]" -> [1,2];
//  - enum: a member whose text equals the value is taken as is (enum [1, 2] + "2" -> 2);
//  - unions (anyOf / oneOf / type lists such as ["string", "null"]): every non-string alternative
//    is tried first, in schema order, then string — the model cannot quote a string in XML, so
//    "null" for ["string", "null"] is null and "7" for ["integer", "string"] is 7;
//  - a value that fits no declared type is KEPT as its text (the call is never dropped);
//  - no schema for the parameter (or a schema without type information): JSON if the whole text
//    parses as JSON, else the text.
//
// JSON dialects (Hermes) keep the JSON types they received, with one exception: a value declared
// as a plain string that arrived as a number or boolean becomes the string of its original JSON
// text (42 -> "42", 1.50 -> "1.50"), since that is what a string-typed tool expects and the digits
// the model wrote are preserved exactly.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>

#include "core/result.h"

namespace t9::chat {

using ordered_json = nlohmann::ordered_json;

struct ToolSpec {
  std::string name;
  nlohmann::json parameters;  // the JSON schema of the arguments ({} when the tool declared none)

  // The schema of one argument, nullptr when the tool does not declare it.
  const nlohmann::json* property_schema(std::string_view arg) const;
};

class ToolSet {
 public:
  // From an OpenAI `tools` array: [{"type": "function", "function": {"name", "parameters"}}];
  // entries without the "function" wrapper ({"name", "parameters"}) are accepted too. Errors name
  // the offending entry ("tools[2].function.name: ...").
  static Result<ToolSet> from_json(const nlohmann::json& tools);

  void add(ToolSpec spec);
  const ToolSpec* find(std::string_view name) const;
  bool empty() const { return tools_.empty(); }

 private:
  std::map<std::string, ToolSpec, std::less<>> tools_;
};

// Converts one XML parameter value by its schema (nullptr: none). Never fails.
ordered_json convert_text_value(std::string_view text, const nlohmann::json* schema);

// True when every value is kept as its exact text under `schema`, so the value can be streamed
// as a JSON string before it is complete.
bool is_plain_string_schema(const nlohmann::json* schema);

// Hermes rule: `value` arrived as JSON with original text `raw_json`; returns it unchanged unless
// the schema declares a plain string and the value is a number or boolean.
ordered_json coerce_json_value(ordered_json value, std::string_view raw_json,
                               const nlohmann::json* schema);

}  // namespace t9::chat
