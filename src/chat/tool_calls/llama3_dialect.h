// Llama 3.1 / 3.2 JSON tool calls: the message IS the call,
//   {"name": "f", "parameters": {...}}      (optionally after <|python_tag|>)
// with further calls after ';' or whitespace. A '{' only opens a call at the start of the message
// or right after another call — a JSON object in the middle of prose is content. Like the other
// JSON dialects a call is certain once its object is complete, valid and names a known tool.
#pragma once

#include "chat/tool_calls/markup_stream.h"

namespace t9::chat {

class Llama3Dialect final : public ToolCallDialect {
 public:
  std::string_view name() const override { return "llama3_json"; }
  std::span<const std::string_view> triggers() const override;
  void begin(std::string_view trigger) override;
  MarkupStep step(std::string_view text, bool final, CallSink& sink) override;

 private:
  MarkupStep step_call(std::string_view text, bool final, CallSink& sink);
  MarkupStep step_after_call(std::string_view text, bool final);

  std::size_t trigger_size_ = 0;
  bool after_call_ = false;
};

}  // namespace t9::chat
