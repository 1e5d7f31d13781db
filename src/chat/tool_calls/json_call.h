// Tool calls written as JSON ({"name": ..., "arguments": {...}}), shared by the JSON dialects
// (Hermes/Qwen2.5 now; Llama-3 and Mistral next).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls/tool_schema.h"
#include "core/result.h"

namespace t9::chat {

// One member of a JSON object with the exact source text of its value (so that a number
// declared as a string keeps the digits the model wrote).
struct JsonMember {
  std::string key;
  std::string_view raw_value;  // points into the text given to split_json_object
};

// Splits a JSON object into its members, in order. Errors name the offset and the reason.
Result<std::vector<JsonMember>> split_json_object(std::string_view text);

// Offset one past the JSON value starting at text[pos] (strings, objects and arrays matched
// structurally, scalars up to the next delimiter), or npos when the value is not complete yet.
// Does not validate: parse the span to know whether it is valid.
std::size_t skip_json_value(std::string_view text, std::size_t pos);

struct JsonCall {
  std::string name;
  std::string arguments;  // compact JSON object, members in order of appearance
};

// The compact arguments JSON of `tool` from the text of a JSON object, members in order, coerced
// by coerce_json_value; a repeated argument keeps its first value.
Result<std::string> build_json_arguments(std::string_view object_text, const ToolSpec& tool);

// Splits a JSON array into the source text of its elements, in order.
Result<std::vector<std::string_view>> split_json_array(std::string_view text);

// Parses {"name": "f", "arguments": {...}} ("parameters" is accepted for "arguments"; the
// arguments may also be a JSON string holding the object). The tool must be in `tools`.
// Arguments are coerced by coerce_json_value; a repeated argument keeps its first value.
Result<JsonCall> parse_json_call(std::string_view text, const ToolSet& tools);

}  // namespace t9::chat
