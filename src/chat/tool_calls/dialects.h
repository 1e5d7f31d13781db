// The tool-call dialects by name. To add one: implement ToolCallDialect in <name>_dialect.{h,cpp}
// and add a line to the table in dialects.cpp.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "chat/tool_calls/markup_stream.h"
#include "core/result.h"

namespace t9::chat {

// "none" (all text is content), "hermes" (Qwen2.5 / Hermes JSON), "qwen_xml" (Qwen3-Coder,
// Qwen3.5), "mistral", "llama3_json". Unknown names are an error that lists the known ones.
Result<std::unique_ptr<ToolCallDialect>> make_tool_call_dialect(std::string_view name);
std::vector<std::string_view> tool_call_dialect_names();

// The call ids a dialect's chat template accepts back: Mistral's templates reject anything but 9
// alphanumerics; the others take OpenAI-style "call_" ids (random_call_id).
CallIdFn default_call_id_fn(std::string_view dialect);

// The dialect a chat template teaches its model, from the markup the template renders for tool
// calls: "<function=" with "<parameter=" -> qwen_xml, "<tool_call>" -> hermes, "[TOOL_CALLS]" ->
// mistral, "<|python_tag|>" (or Llama-3 headers with "parameters") -> llama3_json, otherwise
// "none". A heuristic over the template source, good for our model families.
std::string_view detect_tool_call_dialect(std::string_view chat_template);

}  // namespace t9::chat
