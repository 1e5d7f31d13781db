// Qwen XML tool calls (Qwen3-Coder, the Qwen3.5 family):
//   <tool_call>
//   <function=NAME>
//   <parameter=P>
//   VALUE
//   </parameter>
//   </function>
//   </tool_call>
// Values are raw text (may span lines and contain '<'); as in Qwen's reference parser, one
// newline is stripped at each side of a value, and a value also ends at "<parameter=",
// "</function>" or "</tool_call>" when its "</parameter>" is missing. Values are converted by the
// tool's schema (tool_schema.h).
//
// Commitment: a call is certain once "<tool_call>" (optional) and "<function=NAME>" with a known
// NAME have been read; its start is emitted then, and the arguments stream as parameters close —
// values of plain-string parameters stream while they are being written. After that point the
// call is never retracted: stray text inside it is surfaced as content, a repeated parameter keeps
// its first value, and a call cut off by the end of the stream is closed with what it has.
// Several <function=...> blocks inside one <tool_call> are separate calls.
#pragma once

#include <set>

#include "chat/tool_calls/markup_stream.h"

namespace t9::chat {

class QwenXmlDialect final : public ToolCallDialect {
 public:
  std::string_view name() const override { return "qwen_xml"; }
  std::span<const std::string_view> triggers() const override;
  void begin(std::string_view trigger) override;
  MarkupStep step(std::string_view text, bool final, CallSink& sink) override;

 private:
  enum class State { kOpen, kFunctionBody, kParamValue, kAfterFunction };

  MarkupStep step_open(std::string_view text, bool final, CallSink& sink);
  MarkupStep step_function_body(std::string_view text, bool final, CallSink& sink);
  MarkupStep step_param_value(std::string_view text, bool final, CallSink& sink);
  MarkupStep step_after_function(std::string_view text, bool final, CallSink& sink);

  void open_call(std::string_view name, CallSink& sink);
  void close_call(CallSink& sink);
  void open_param(std::string_view name, CallSink& sink);
  void stream_value(CallSink& sink);  // emits the certain part of a plain-string value
  void close_param(CallSink& sink);
  void strip_leading_newline();

  State state_ = State::kOpen;
  std::size_t trigger_size_ = 0;
  bool in_block_ = false;  // inside <tool_call>, not a bare <function=...>
  // The open call.
  const ToolSpec* tool_ = nullptr;
  std::set<std::string, std::less<>> seen_params_;
  bool first_param_ = true;
  // The open parameter.
  std::string param_name_;
  const nlohmann::json* param_schema_ = nullptr;
  bool stream_string_ = false;  // plain-string value: streamed as it arrives
  bool skip_param_ = false;     // a repeated parameter: consumed, not emitted
  bool lead_decided_ = false;   // the leading newline was stripped or known absent
  std::string value_;           // value bytes not yet emitted
};

}  // namespace t9::chat
