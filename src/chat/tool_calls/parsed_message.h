// What a chat model's raw output turns into: visible content, reasoning, and tool calls — both as a
// whole (ParsedMessage) and as the stream of events an incremental parser emits (ChatEvent).
// Contract tying them together: folding the events of a stream with MessageAccumulator gives the
// ParsedMessage of the whole text, whatever the chunking of the stream was.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace t9::chat {

struct ToolCall {
  std::string id;         // "call_..." (unique per response; tests inject deterministic ones)
  std::string name;       // a name from the request's tools
  std::string arguments;  // a JSON object, compact, members in order of appearance
  bool operator==(const ToolCall&) const = default;
};

struct ParsedMessage {
  std::string content;            // visible text with the tool-call markup removed
  std::string reasoning_content;  // text of <think>...</think>, "" when none
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedMessage&) const = default;
};

// One step of a streamed message. Every text field holds complete UTF-8 sequences only.
struct ChatEvent {
  enum class Kind {
    kContent,        // text: a content delta
    kReasoning,      // text: a reasoning delta
    kToolCallStart,  // index, id, name: a call is certain (its markup is well formed and the tool
                     // known)
    kToolCallArgs,   // index, text: a chunk of the call's arguments JSON
    kToolCallEnd,    // index: the call's arguments are complete
  };
  Kind kind = Kind::kContent;
  std::string text;
  std::size_t index = 0;  // tool-call index within the message (0, 1, ...)
  std::string id;
  std::string name;
  bool operator==(const ChatEvent&) const = default;
};

// Folds events into a ParsedMessage (what a non-streaming response returns).
class MessageAccumulator {
 public:
  void apply(const ChatEvent& e);
  void apply(const std::vector<ChatEvent>& events) {
    for (const auto& e : events) apply(e);
  }
  const ParsedMessage& message() const { return msg_; }
  ParsedMessage take() { return std::move(msg_); }

 private:
  ParsedMessage msg_;
};

}  // namespace t9::chat
