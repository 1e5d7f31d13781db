#include "chat/tool_calls/qwen_xml_dialect.h"

namespace t9::chat {
namespace {

constexpr std::string_view kBlockOpen = "<tool_call>";
constexpr std::string_view kBlockClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
constexpr std::string_view kTriggers[] = {kBlockOpen, kFunctionOpen};
constexpr std::string_view kBodyTags[] = {kParamOpen, kFunctionClose, kBlockClose};
constexpr std::string_view kValueEnds[] = {kParamClose, kParamOpen, kFunctionClose, kBlockClose};
constexpr std::string_view kAfterFunctionTags[] = {kBlockClose, kFunctionOpen};
constexpr std::size_t kMaxNameBytes = 256;

// "<function=NAME>" / "<parameter=NAME>" at text[pos].
struct TagHeader {
  enum class Kind { kNeedMore, kBad, kOk } kind = Kind::kNeedMore;
  std::string_view name;
  std::size_t end = 0;  // offset one past '>'

  static TagHeader need_more() { return {Kind::kNeedMore, {}, 0}; }
  static TagHeader bad() { return {Kind::kBad, {}, 0}; }
};

TagHeader parse_header(std::string_view text, std::size_t pos, std::string_view prefix) {
  const std::string_view rest = text.substr(pos);
  if (!rest.starts_with(prefix)) {
    return prefix.starts_with(rest) ? TagHeader::need_more() : TagHeader::bad();
  }
  const std::size_t start = pos + prefix.size();
  for (std::size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '>') {
      const std::string_view name = trim_space(text.substr(start, i - start));
      if (name.empty()) return TagHeader::bad();
      return {TagHeader::Kind::kOk, name, i + 1};
    }
    if (c == '<' || c == '\n' || i - start >= kMaxNameBytes) return TagHeader::bad();
  }
  return TagHeader::need_more();
}

std::size_t skip_space(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

bool is_proper_prefix_of_any(std::string_view s, std::span<const std::string_view> tags) {
  for (auto t : tags) {
    if (s.size() < t.size() && t.starts_with(s)) return true;
  }
  return false;
}

std::string json_key(std::string_view name) {
  std::string out = "\"";
  append_json_escaped(sanitize_utf8(name), out);
  out += "\":";
  return out;
}

}  // namespace

std::span<const std::string_view> QwenXmlDialect::triggers() const {
  return kTriggers;
}

void QwenXmlDialect::begin(std::string_view trigger) {
  state_ = State::kOpen;
  trigger_size_ = trigger.size();
  in_block_ = trigger == kBlockOpen;
}

MarkupStep QwenXmlDialect::step(std::string_view text, bool final, CallSink& sink) {
  switch (state_) {
    case State::kOpen:
      return step_open(text, final, sink);
    case State::kFunctionBody:
      return step_function_body(text, final, sink);
    case State::kParamValue:
      return step_param_value(text, final, sink);
    case State::kAfterFunction:
      return step_after_function(text, final, sink);
  }
  return MarkupStep::reject(trigger_size_);
}

MarkupStep QwenXmlDialect::step_open(std::string_view text, bool final, CallSink& sink) {
  std::size_t i = 0;
  if (in_block_) {
    i = kBlockOpen.size();
    while (i < text.size() && is_space(text[i])) ++i;
  }
  const TagHeader h = parse_header(text, i, kFunctionOpen);
  if (h.kind == TagHeader::Kind::kNeedMore && !final) return MarkupStep::need_more();
  if (h.kind != TagHeader::Kind::kOk || sink.tools().find(h.name) == nullptr) {
    return MarkupStep::reject(trigger_size_);
  }
  open_call(h.name, sink);
  return MarkupStep::advance(h.end, /*done=*/false);
}

MarkupStep QwenXmlDialect::step_function_body(std::string_view text, bool final, CallSink& sink) {
  const std::size_t i = skip_space(text);
  const std::string_view rest = text.substr(i);
  if (rest.starts_with(kParamOpen)) {
    const TagHeader h = parse_header(text, i, kParamOpen);
    if (h.kind == TagHeader::Kind::kOk) {
      open_param(h.name, sink);
      state_ = State::kParamValue;
      return MarkupStep::advance(h.end, false);
    }
    if (h.kind == TagHeader::Kind::kNeedMore && !final) return MarkupStep::need_more();
  } else if (rest.starts_with(kFunctionClose)) {
    close_call(sink);
    state_ = State::kAfterFunction;
    return MarkupStep::advance(i + kFunctionClose.size(), false);
  } else if (rest.starts_with(kBlockClose)) {
    close_call(sink);
    return MarkupStep::advance(i + kBlockClose.size(), true);
  } else if (rest.empty() || is_proper_prefix_of_any(rest, kBodyTags)) {
    if (!final) return MarkupStep::need_more();
  }
  if (final) {  // cut off: surface the unfinished markup, close the call with what it has
    sink.content(rest);
    close_call(sink);
    return MarkupStep::advance(text.size(), true);
  }
  // Stray text (or a malformed parameter tag) inside the call: surfaced as content, up to the
  // next tag (waiting for it, so that the whitespace skip above never cuts into the text).
  const std::size_t next = text.find('<', i + 1);
  if (next == std::string_view::npos) return MarkupStep::need_more();
  sink.content(text.substr(i, next - i));
  return MarkupStep::advance(next, false);
}

MarkupStep QwenXmlDialect::step_param_value(std::string_view text, bool final, CallSink& sink) {
  std::size_t best = std::string_view::npos;
  std::string_view which;
  for (auto t : kValueEnds) {
    const std::size_t p = text.find(t);
    if (p < best) best = p, which = t;
  }
  if (best != std::string_view::npos) {
    value_.append(text.substr(0, best));
    close_param(sink);
    state_ = State::kFunctionBody;
    return MarkupStep::advance(best + (which == kParamClose ? kParamClose.size() : 0), false);
  }
  if (final) {
    value_.append(text);
    close_param(sink);
    close_call(sink);
    return MarkupStep::advance(text.size(), true);
  }
  const std::size_t keep = held_suffix_start(text, kValueEnds);
  if (keep == 0) return MarkupStep::need_more();
  value_.append(text.substr(0, keep));
  stream_value(sink);
  return MarkupStep::advance(keep, false);
}

MarkupStep QwenXmlDialect::step_after_function(std::string_view text, bool final, CallSink& sink) {
  const std::size_t i = skip_space(text);
  const std::string_view rest = text.substr(i);
  if (!in_block_) return MarkupStep::advance(i, true);
  if (rest.starts_with(kBlockClose)) return MarkupStep::advance(i + kBlockClose.size(), true);
  if (rest.empty() || is_proper_prefix_of_any(rest, kAfterFunctionTags)) {
    return final ? MarkupStep::advance(i, true) : MarkupStep::need_more();
  }
  // Another function in the same block: a new call when well formed and known; otherwise the
  // block is over and plain-text scanning surfaces the rest.
  const TagHeader h = parse_header(text, i, kFunctionOpen);
  if (h.kind == TagHeader::Kind::kNeedMore && !final) return MarkupStep::need_more();
  if (h.kind != TagHeader::Kind::kOk || sink.tools().find(h.name) == nullptr) {
    return MarkupStep::advance(i, true);
  }
  open_call(h.name, sink);
  state_ = State::kFunctionBody;
  return MarkupStep::advance(h.end, false);
}

void QwenXmlDialect::open_call(std::string_view name, CallSink& sink) {
  tool_ = sink.tools().find(name);
  seen_params_.clear();
  first_param_ = true;
  sink.begin_call(name);
  sink.call_args("{");
  state_ = State::kFunctionBody;
}

void QwenXmlDialect::close_call(CallSink& sink) {
  sink.call_args("}");
  sink.end_call();
  tool_ = nullptr;
}

void QwenXmlDialect::open_param(std::string_view name, CallSink& sink) {
  param_name_ = std::string(name);
  skip_param_ = !seen_params_.insert(param_name_).second;
  param_schema_ = tool_->property_schema(name);
  stream_string_ = is_plain_string_schema(param_schema_);
  lead_decided_ = false;
  value_.clear();
  if (skip_param_ || !stream_string_) return;
  std::string head = first_param_ ? "" : ",";
  head += json_key(name);
  head += '"';
  sink.call_args(head);
  first_param_ = false;
}

void QwenXmlDialect::strip_leading_newline() {
  if (lead_decided_ || value_.empty()) return;
  if (value_[0] == '\n') value_.erase(0, 1);
  lead_decided_ = true;
}

void QwenXmlDialect::stream_value(CallSink& sink) {
  strip_leading_newline();
  if (skip_param_ || !stream_string_ || !lead_decided_) return;
  std::size_t n = value_.size();
  if (n > 0 && value_[n - 1] == '\n') --n;  // may be the newline stripped at the end
  n = utf8_decided_prefix(std::string_view(value_).substr(0, n));
  if (n == 0) return;
  std::string chunk;
  append_json_escaped(sanitize_utf8(std::string_view(value_).substr(0, n)), chunk);
  value_.erase(0, n);
  sink.call_args(chunk);
}

void QwenXmlDialect::close_param(CallSink& sink) {
  strip_leading_newline();
  if (!value_.empty() && value_.back() == '\n') value_.pop_back();
  const std::string value = sanitize_utf8(value_);
  value_.clear();
  if (skip_param_) return;
  std::string tail;
  if (stream_string_) {
    append_json_escaped(value, tail);
    tail += '"';
  } else {
    tail = first_param_ ? "" : ",";
    tail += json_key(param_name_);
    tail += convert_text_value(value, param_schema_)
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    first_param_ = false;
  }
  sink.call_args(tail);
}

}  // namespace t9::chat
