#include "chat/tool_calls/markup_stream.h"

#include <random>

#include "core/check.h"

namespace t9::chat {

std::string random_alnum(std::size_t n) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<std::size_t> pick(0, kAlphabet.size() - 1);
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += kAlphabet[pick(rng)];
  return out;
}

std::string random_call_id(std::size_t /*index*/) {
  return "call_" + random_alnum(24);
}

CallSink::CallSink(std::shared_ptr<const ToolSet> tools, CallIdFn make_id)
    : tools_(std::move(tools)), make_id_(make_id ? std::move(make_id) : CallIdFn(random_call_id)) {
  T9_CHECK(tools_ != nullptr);
}

void CallSink::push(ChatEvent e) {
  T9_CHECK(out_ != nullptr, "CallSink used outside feed()/finish()");
  out_->push_back(std::move(e));
}

void CallSink::begin_call(std::string_view name) {
  T9_CHECK(!in_call_, "tool call started inside another");
  in_call_ = true;
  text_.mark_break();
  ChatEvent e{ChatEvent::Kind::kToolCallStart, "", n_calls_, make_id_(n_calls_), std::string(name)};
  push(std::move(e));
}

void CallSink::call_args(std::string_view json_chunk) {
  T9_CHECK(in_call_, "arguments outside a tool call");
  if (json_chunk.empty()) return;
  push(ChatEvent{ChatEvent::Kind::kToolCallArgs, std::string(json_chunk), n_calls_, "", ""});
}

void CallSink::end_call() {
  T9_CHECK(in_call_, "end of a tool call that did not start");
  push(ChatEvent{ChatEvent::Kind::kToolCallEnd, "", n_calls_, "", ""});
  in_call_ = false;
  ++n_calls_;
  text_.mark_break();
}

void CallSink::content(std::string_view text) {
  std::string out;
  text_.append(text, out);
  if (!out.empty()) push(ChatEvent{ChatEvent::Kind::kContent, std::move(out), 0, "", ""});
}

void CallSink::finish_content() {
  std::string out;
  text_.finish(out);
  if (!out.empty()) push(ChatEvent{ChatEvent::Kind::kContent, std::move(out), 0, "", ""});
}

std::size_t held_suffix_start(std::string_view text, std::span<const std::string_view> tags) {
  std::size_t max_len = 0;
  for (auto t : tags) max_len = std::max(max_len, t.size());
  const std::size_t first = text.size() >= max_len ? text.size() - max_len + 1 : 0;
  for (std::size_t i = first; i < text.size(); ++i) {
    const std::string_view suffix = text.substr(i);
    for (auto t : tags) {
      if (suffix.size() < t.size() && t.starts_with(suffix)) return i;
    }
  }
  return text.size();
}

ToolCallStream::ToolCallStream(std::unique_ptr<ToolCallDialect> dialect,
                               std::shared_ptr<const ToolSet> tools, CallIdFn make_id)
    : dialect_(std::move(dialect)), sink_(std::move(tools), std::move(make_id)) {
  T9_CHECK(dialect_ != nullptr);
}

void ToolCallStream::feed(std::string_view text, std::vector<ChatEvent>& out) {
  buf_.append(text);
  sink_.set_output(&out);
  pump(/*final=*/false);
  sink_.set_output(nullptr);
}

void ToolCallStream::finish(std::vector<ChatEvent>& out) {
  sink_.set_output(&out);
  pump(/*final=*/true);
  T9_CHECK(!in_markup_ && pos_ == buf_.size(), "dialect left markup open at the end");
  T9_CHECK(!sink_.in_call(), "dialect left a tool call open at the end");
  sink_.finish_content();
  sink_.set_output(nullptr);
}

void ToolCallStream::consume(std::size_t n) {
  T9_CHECK(pos_ + n <= buf_.size());
  pos_ += n;
  // Compact now and then so the buffer does not grow with the whole message.
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
}

void ToolCallStream::pump(bool final) {
  // A dialect may take a few zero-byte steps to change state; more than this is a loop.
  constexpr int kMaxIdleSteps = 64;
  int n_idle = 0;
  while (true) {
    const std::size_t before = pos_;
    const bool was_markup = in_markup_;
    const bool progressed = in_markup_ ? step_markup(final) : scan_text(final);
    if (!progressed) return;
    if (pos_ == buf_.size() && !in_markup_) return;
    n_idle = (pos_ == before && was_markup == in_markup_) ? n_idle + 1 : 0;
    T9_CHECK(n_idle < kMaxIdleSteps, "dialect {} makes no progress", dialect_->name());
  }
}

bool ToolCallStream::scan_text(bool final) {
  const std::string_view text = unconsumed();
  std::size_t best = std::string_view::npos;
  std::string_view which;
  for (auto t : dialect_->triggers()) {
    const std::size_t p = text.find(t);
    if (p < best) best = p, which = t;
  }
  if (best != std::string_view::npos) {
    sink_.content(text.substr(0, best));
    consume(best);
    in_markup_ = true;
    dialect_->begin(which);
    return true;
  }
  const std::size_t keep = final ? text.size() : held_suffix_start(text, dialect_->triggers());
  sink_.content(text.substr(0, keep));
  consume(keep);
  return false;
}

bool ToolCallStream::step_markup(bool final) {
  const MarkupStep s = dialect_->step(unconsumed(), final, sink_);
  switch (s.kind) {
    case MarkupStep::Kind::kNeedMore:
      T9_CHECK(!final, "dialect {} asked for more text at the end", dialect_->name());
      return false;
    case MarkupStep::Kind::kReject:
      T9_CHECK(s.n_bytes > 0 && !sink_.in_call(), "dialect {} rejected after a call began",
               dialect_->name());
      sink_.content(unconsumed().substr(0, s.n_bytes));
      consume(s.n_bytes);
      in_markup_ = false;
      return true;
    case MarkupStep::Kind::kAdvance:
      consume(s.n_bytes);
      if (s.done) in_markup_ = false;
      return true;
  }
  return false;
}

}  // namespace t9::chat
