#include "chat/reasoning.h"

#include <array>

#include "chat/tool_calls/markup_stream.h"

namespace t9::chat {

ReasoningSplitter::ReasoningSplitter(ReasoningConfig config) : config_(std::move(config)) {
  if (!config_.enabled || config_.open_tag.empty() || config_.close_tag.empty()) {
    state_ = State::kAfter;
  }
}

void ReasoningSplitter::feed(std::string_view delta, std::string& reasoning, std::string& rest) {
  if (state_ == State::kAfter && buf_.empty()) {
    rest.append(delta);
    return;
  }
  buf_.append(delta);
  pump(/*final=*/false, reasoning, rest);
}

void ReasoningSplitter::finish(std::string& reasoning, std::string& rest) {
  pump(/*final=*/true, reasoning, rest);
}

void ReasoningSplitter::pump(bool final, std::string& reasoning, std::string& rest) {
  while (true) {
    switch (state_) {
      case State::kStart:
        if (!step_start(final)) return;
        break;
      case State::kReasoning:
        if (!step_reasoning(final, reasoning)) return;
        break;
      case State::kAfter:
        rest.append(buf_);
        buf_.clear();
        return;
    }
  }
}

// Decides whether the output opens with the open tag. True when the state changed.
bool ReasoningSplitter::step_start(bool final) {
  std::size_t i = 0;
  while (i < buf_.size() && is_space(buf_[i])) ++i;
  const std::string_view head = std::string_view(buf_).substr(i);
  const std::string_view open = config_.open_tag;
  if (head.starts_with(open)) {
    buf_.erase(0, i + open.size());
    state_ = State::kReasoning;
    return true;
  }
  if (!final && open.starts_with(head)) return false;  // "<thi" may still become the tag
  state_ = config_.starts_in_reasoning ? State::kReasoning : State::kAfter;
  return true;
}

// Emits reasoning up to the close tag. True when the state changed.
bool ReasoningSplitter::step_reasoning(bool final, std::string& reasoning) {
  const std::string_view close = config_.close_tag;
  const std::size_t p = buf_.find(close);
  if (p != std::string::npos) {
    sink_.append(std::string_view(buf_).substr(0, p), reasoning);
    sink_.finish(reasoning);
    buf_.erase(0, p + close.size());
    state_ = State::kAfter;
    return true;
  }
  const std::array<std::string_view, 1> tags{close};
  const std::size_t keep = final ? buf_.size() : held_suffix_start(buf_, tags);
  sink_.append(std::string_view(buf_).substr(0, keep), reasoning);
  buf_.erase(0, keep);
  if (final) sink_.finish(reasoning);
  return false;
}

}  // namespace t9::chat
