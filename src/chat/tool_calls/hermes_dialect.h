// Hermes / Qwen2.5 JSON tool calls:
//   text <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> ...
// A call is certain only once its JSON object is complete and valid (a malformed body, an unknown
// tool, or text after the object turns the whole markup into content), so its start, arguments
// and end are emitted together. At the end of the stream a complete call whose </tool_call> is
// missing is accepted, since a stop sequence may have eaten it.
//
// Small Qwen2.5 models often write the same object as a fenced block instead:
//   ```json\n{"name": "f", "arguments": {...}}\n```
// It counts as a call only when the fence holds exactly one JSON object that names a tool of the
// request (llama.cpp's Hermes parser accepts it too); any other code block stays content.
#pragma once

#include "chat/tool_calls/markup_stream.h"

namespace t9::chat {

class HermesDialect final : public ToolCallDialect {
 public:
  std::string_view name() const override { return "hermes"; }
  std::span<const std::string_view> triggers() const override;
  void begin(std::string_view trigger) override;
  MarkupStep step(std::string_view text, bool final, CallSink& sink) override;

 private:
  bool fenced_ = false;  // the markup began with ``` rather than <tool_call>
};

}  // namespace t9::chat
