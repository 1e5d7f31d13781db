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
// Qwen3.5). Unknown names are an error that lists the known ones.
Result<std::unique_ptr<ToolCallDialect>> make_tool_call_dialect(std::string_view name);
std::vector<std::string_view> tool_call_dialect_names();

}  // namespace t9::chat
