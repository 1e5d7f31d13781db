#include "chat/tool_calls/hermes_dialect.h"

#include "chat/tool_calls/json_call.h"

namespace t9::chat {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kFence = "```";
constexpr std::string_view kTriggers[] = {kOpen, kFence};

}  // namespace

std::span<const std::string_view> HermesDialect::triggers() const {
  return kTriggers;
}

void HermesDialect::begin(std::string_view trigger) { fenced_ = trigger == kFence; }

MarkupStep HermesDialect::step(std::string_view text, bool final, CallSink& sink) {
  const std::string_view open = fenced_ ? kFence : kOpen;
  const std::string_view close = fenced_ ? kFence : kClose;
  std::size_t i = open.size();
  if (fenced_) {  // optional language tag: ```json
    const std::string_view rest = text.substr(i);
    if (rest.size() < 4 && std::string_view("json").starts_with(rest) && !final)
      return MarkupStep::need_more();
    if (rest.starts_with("json")) i += 4;
  }
  while (i < text.size() && is_space(text[i])) ++i;
  if (i == text.size()) return final ? MarkupStep::reject(open.size()) : MarkupStep::need_more();
  if (text[i] != '{') return MarkupStep::reject(open.size());

  const std::size_t object_end = skip_json_value(text, i);
  if (object_end == std::string_view::npos) {
    return final ? MarkupStep::reject(open.size()) : MarkupStep::need_more();
  }
  std::size_t j = object_end;
  while (j < text.size() && is_space(text[j])) ++j;
  const std::string_view after = text.substr(j);
  std::size_t n_consumed = 0;
  if (after.starts_with(close)) {
    n_consumed = j + close.size();
  } else if (close.starts_with(after)) {  // the close tag is (still) missing
    if (!final) return MarkupStep::need_more();
    n_consumed = text.size();
  } else {
    return MarkupStep::reject(open.size());
  }

  auto call = parse_json_call(text.substr(i, object_end - i), sink.tools());
  if (!call.ok()) return MarkupStep::reject(open.size());
  sink.begin_call(call->name);
  sink.call_args(call->arguments);
  sink.end_call();
  return MarkupStep::advance(n_consumed, /*done=*/true);
}

}  // namespace t9::chat
