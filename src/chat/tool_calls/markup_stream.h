// The streaming engine shared by all tool-call dialects. ToolCallStream scans plain text for a
// dialect's trigger tags, holds back any suffix that could still become a trigger (so partial
// markup such as "<tool_" never reaches content), and hands the text from a trigger on to the
// dialect's state machine until the dialect says the markup is over.
//
// Adding a dialect = one class implementing ToolCallDialect (its triggers and a step function)
// plus one line in dialects.cpp. The engine guarantees the dialect sees text starting exactly at
// a trigger, and feeds it again with more text whenever it answers kNeedMore.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls/parsed_message.h"
#include "chat/tool_calls/tool_schema.h"
#include "chat/tool_calls/utf8_text.h"

namespace t9::chat {

// Makes the id of the index-th tool call of a message.
using CallIdFn = std::function<std::string(std::size_t index)>;
// `n` random alphanumerics (call ids need to be unique, not secret).
std::string random_alnum(std::size_t n);
// "call_" + 24 random alphanumerics, as OpenAI's ids look.
std::string random_call_id(std::size_t index);

// What a dialect reports to: tool calls as they become certain, and stray text inside markup
// (which is surfaced as content, never swallowed).
class CallSink {
 public:
  CallSink(std::shared_ptr<const ToolSet> tools, CallIdFn make_id);

  const ToolSet& tools() const { return *tools_; }
  bool in_call() const { return in_call_; }
  // No visible text so far, only whitespace and tool calls: for dialects whose markup only counts
  // at the start of a message (Llama-3 JSON).
  bool only_calls_so_far() const { return !text_.started(); }

  // Preconditions: begin_call only when !in_call(), call_args/end_call only when in_call().
  void begin_call(std::string_view name);
  void call_args(std::string_view json_chunk);
  void end_call();
  void content(std::string_view text);

  // Used by ToolCallStream: where events go during one feed()/finish().
  void set_output(std::vector<ChatEvent>* out) { out_ = out; }
  void finish_content();

 private:
  void push(ChatEvent e);

  std::shared_ptr<const ToolSet> tools_;
  CallIdFn make_id_;
  TextSink text_;
  std::vector<ChatEvent>* out_ = nullptr;
  std::size_t n_calls_ = 0;
  bool in_call_ = false;
};

// A dialect's answer to one step over the unconsumed text.
struct MarkupStep {
  enum class Kind {
    kNeedMore,  // undecided: call again with more text (never answered when final)
    kReject,    // not markup after all: the first n_bytes (the trigger) become content; only
                // allowed before the markup began a call
    kAdvance,   // n_bytes were consumed; done: the markup is over, back to plain text
  };
  Kind kind = Kind::kNeedMore;
  std::size_t n_bytes = 0;
  bool done = false;

  static MarkupStep need_more() { return {}; }
  static MarkupStep reject(std::size_t n_trigger) { return {Kind::kReject, n_trigger, false}; }
  static MarkupStep advance(std::size_t n, bool done) { return {Kind::kAdvance, n, done}; }
};

class ToolCallDialect {
 public:
  virtual ~ToolCallDialect() = default;
  virtual std::string_view name() const = 0;
  // Tags that open markup in plain text.
  virtual std::span<const std::string_view> triggers() const = 0;
  // A trigger was found: reset per-markup state. `trigger` is one of triggers().
  virtual void begin(std::string_view trigger) = 0;
  // `text` is the unconsumed text (at the first step of a markup it starts with the trigger).
  // When `final` no more text will come: the dialect must resolve (reject, or close any call).
  virtual MarkupStep step(std::string_view text, bool final, CallSink& sink) = 0;
};

// Length of the shortest suffix of `text` that is a proper prefix of one of `tags`, as an offset:
// text.substr(result) must be held back because it may still grow into a tag.
std::size_t held_suffix_start(std::string_view text, std::span<const std::string_view> tags);

// The incremental tool-call parser over the text after any reasoning.
class ToolCallStream {
 public:
  ToolCallStream(std::unique_ptr<ToolCallDialect> dialect, std::shared_ptr<const ToolSet> tools,
                 CallIdFn make_id);

  void feed(std::string_view text, std::vector<ChatEvent>& out);
  // End of the stream: held-back text that did not become markup is flushed as content.
  void finish(std::vector<ChatEvent>& out);

 private:
  void pump(bool final);
  bool scan_text(bool final);    // false when waiting for more text
  bool step_markup(bool final);  // false when waiting for more text
  std::string_view unconsumed() const { return std::string_view(buf_).substr(pos_); }
  void consume(std::size_t n);

  std::unique_ptr<ToolCallDialect> dialect_;
  CallSink sink_;
  std::string buf_;
  std::size_t pos_ = 0;
  bool in_markup_ = false;
};

}  // namespace t9::chat
