// Mistral tool calls, both generations:
//   pre-v11 (Mistral 7B v0.3, Nemo):  text[TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]
//   v11+ (Small 3.1+, Devstral):      text[TOOL_CALLS]f[ARGS]{...}[TOOL_CALLS]g[ARGS]{...}
// ("[CALL_ID]id" may sit between the name and [ARGS]; [ARGS] may be missing when special tokens
// were dropped in detokenization). As in the Hermes dialect, a call is certain only once its JSON
// is complete and valid, so a call's events come out together; an array with any invalid or
// unknown call is content as a whole. Mistral's templates require 9-character alphanumeric call
// ids: see default_call_id_fn in dialects.h.
#pragma once

#include "chat/tool_calls/markup_stream.h"

namespace t9::chat {

class MistralDialect final : public ToolCallDialect {
 public:
  std::string_view name() const override { return "mistral"; }
  std::span<const std::string_view> triggers() const override;
  void begin(std::string_view trigger) override;
  MarkupStep step(std::string_view text, bool final, CallSink& sink) override;

 private:
  MarkupStep step_array(std::string_view text, std::size_t pos, bool final, CallSink& sink);
  MarkupStep step_named(std::string_view text, std::size_t pos, bool final, CallSink& sink);
};

}  // namespace t9::chat
