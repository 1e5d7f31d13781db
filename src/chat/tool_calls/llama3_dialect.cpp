#include "chat/tool_calls/llama3_dialect.h"

#include "chat/tool_calls/json_call.h"

namespace t9::chat {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kObject = "{";
constexpr std::string_view kTriggers[] = {kPythonTag, kObject};

}  // namespace

std::span<const std::string_view> Llama3Dialect::triggers() const {
  return kTriggers;
}

void Llama3Dialect::begin(std::string_view trigger) {
  trigger_size_ = trigger == kPythonTag ? kPythonTag.size() : 0;
  after_call_ = false;
}

MarkupStep Llama3Dialect::step(std::string_view text, bool final, CallSink& sink) {
  return after_call_ ? step_after_call(text, final) : step_call(text, final, sink);
}

MarkupStep Llama3Dialect::step_call(std::string_view text, bool final, CallSink& sink) {
  const std::size_t n_reject = trigger_size_ > 0 ? trigger_size_ : 1;
  if (!sink.only_calls_so_far()) return MarkupStep::reject(n_reject);
  std::size_t i = trigger_size_;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i == text.size()) return final ? MarkupStep::reject(n_reject) : MarkupStep::need_more();
  if (text[i] != '{') return MarkupStep::reject(n_reject);
  const std::size_t end = skip_json_value(text, i);
  if (end == std::string_view::npos) {
    return final ? MarkupStep::reject(n_reject) : MarkupStep::need_more();
  }
  auto call = parse_json_call(text.substr(i, end - i), sink.tools());
  if (!call.ok()) return MarkupStep::reject(n_reject);
  sink.begin_call(call->name);
  sink.call_args(call->arguments);
  sink.end_call();
  after_call_ = true;
  return MarkupStep::advance(end, /*done=*/false);
}

// Consumes the separator after a call ("; " or whitespace) so the next call is at a call boundary.
MarkupStep Llama3Dialect::step_after_call(std::string_view text, bool final) {
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i == text.size()) return final ? MarkupStep::advance(i, true) : MarkupStep::need_more();
  if (text[i] == ';') return MarkupStep::advance(i + 1, true);
  return MarkupStep::advance(i, true);
}

}  // namespace t9::chat
