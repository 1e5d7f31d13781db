#include "chat/tool_calls/parsed_message.h"

#include "core/check.h"

namespace t9::chat {

void MessageAccumulator::apply(const ChatEvent& e) {
  switch (e.kind) {
    case ChatEvent::Kind::kContent:
      msg_.content += e.text;
      break;
    case ChatEvent::Kind::kReasoning:
      msg_.reasoning_content += e.text;
      break;
    case ChatEvent::Kind::kToolCallStart:
      T9_CHECK(e.index == msg_.tool_calls.size(), "tool call {} started out of order", e.index);
      msg_.tool_calls.push_back(ToolCall{e.id, e.name, ""});
      break;
    case ChatEvent::Kind::kToolCallArgs:
      T9_CHECK(e.index < msg_.tool_calls.size(), "arguments for unknown tool call {}", e.index);
      msg_.tool_calls[e.index].arguments += e.text;
      break;
    case ChatEvent::Kind::kToolCallEnd:
      break;
  }
}

}  // namespace t9::chat
