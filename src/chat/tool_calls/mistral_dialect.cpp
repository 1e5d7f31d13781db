#include "chat/tool_calls/mistral_dialect.h"

#include <cctype>

#include "chat/tool_calls/json_call.h"

namespace t9::chat {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";
constexpr std::string_view kTriggers[] = {kToolCalls};
constexpr std::size_t kMaxNameBytes = 256;

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Outcome of matching an optional literal tag at text[pos].
enum class Match { kYes, kNo, kNeedMore };

Match match_tag(std::string_view text, std::size_t pos, std::string_view tag) {
  const std::string_view rest = text.substr(pos);
  if (rest.starts_with(tag)) return Match::kYes;
  return tag.starts_with(rest) ? Match::kNeedMore : Match::kNo;
}

}  // namespace

std::span<const std::string_view> MistralDialect::triggers() const {
  return kTriggers;
}

void MistralDialect::begin(std::string_view /*trigger*/) {}

MarkupStep MistralDialect::step(std::string_view text, bool final, CallSink& sink) {
  const std::size_t i = skip_space(text, kToolCalls.size());
  if (i == text.size())
    return final ? MarkupStep::reject(kToolCalls.size()) : MarkupStep::need_more();
  if (text[i] == '[') return step_array(text, i, final, sink);
  return step_named(text, i, final, sink);
}

MarkupStep MistralDialect::step_array(std::string_view text, std::size_t pos, bool final,
                                      CallSink& sink) {
  const std::size_t end = skip_json_value(text, pos);
  if (end == std::string_view::npos) {
    return final ? MarkupStep::reject(kToolCalls.size()) : MarkupStep::need_more();
  }
  auto elements = split_json_array(text.substr(pos, end - pos));
  if (!elements.ok() || elements->empty()) return MarkupStep::reject(kToolCalls.size());
  std::vector<JsonCall> calls;
  for (auto element : *elements) {
    auto call = parse_json_call(element, sink.tools());
    if (!call.ok()) return MarkupStep::reject(kToolCalls.size());
    calls.push_back(std::move(call).value());
  }
  for (const auto& call : calls) {
    sink.begin_call(call.name);
    sink.call_args(call.arguments);
    sink.end_call();
  }
  return MarkupStep::advance(end, /*done=*/true);
}

MarkupStep MistralDialect::step_named(std::string_view text, std::size_t pos, bool final,
                                      CallSink& sink) {
  const auto undecided = [&] {
    return final ? MarkupStep::reject(kToolCalls.size()) : MarkupStep::need_more();
  };
  std::size_t i = pos;
  while (i < text.size() && is_name_char(text[i]) && i - pos < kMaxNameBytes) ++i;
  if (i == text.size()) return undecided();
  const std::string_view name = text.substr(pos, i - pos);
  const ToolSpec* tool = sink.tools().find(name);
  if (name.empty() || tool == nullptr) return MarkupStep::reject(kToolCalls.size());
  switch (match_tag(text, i, kCallId)) {
    case Match::kNeedMore:
      return undecided();
    case Match::kYes:
      i += kCallId.size();
      while (i < text.size() && is_name_char(text[i])) ++i;
      if (i == text.size()) return undecided();
      break;
    case Match::kNo:
      break;
  }
  switch (match_tag(text, i, kArgs)) {
    case Match::kNeedMore:
      return undecided();
    case Match::kYes:
      i += kArgs.size();
      break;
    case Match::kNo:
      break;
  }
  i = skip_space(text, i);
  if (i == text.size()) return undecided();
  if (text[i] != '{') return MarkupStep::reject(kToolCalls.size());
  const std::size_t end = skip_json_value(text, i);
  if (end == std::string_view::npos) return undecided();
  auto args = build_json_arguments(text.substr(i, end - i), *tool);
  if (!args.ok()) return MarkupStep::reject(kToolCalls.size());
  sink.begin_call(name);
  sink.call_args(*args);
  sink.end_call();
  return MarkupStep::advance(end, /*done=*/true);
}

}  // namespace t9::chat
