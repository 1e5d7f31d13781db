// A model's raw output -> content, reasoning and tool calls, streaming or whole.
//
//   raw deltas ─► ReasoningSplitter ─► reasoning events
//                        │ text after </think>
//                        ▼
//                 ToolCallStream(dialect) ─► content / tool-call events
//
// One parser per response (it holds the stream's state). Not thread-safe; the HTTP thread that
// streams the response owns it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls/markup_stream.h"
#include "chat/tool_calls/parsed_message.h"
#include "chat/tool_calls/tool_schema.h"
#include "core/result.h"

namespace t9::chat {

struct ChatParserConfig {
  std::string tool_dialect = "none";  // see dialects.h
  ReasoningConfig reasoning;
  CallIdFn make_call_id;  // empty: the dialect's default_call_id_fn
};

class ChatOutputParser {
 public:
  static Result<ChatOutputParser> create(ChatParserConfig config, ToolSet tools);

  // Appends the events that became certain with `delta` (any split: mid-tag, mid-UTF-8).
  void feed(std::string_view delta, std::vector<ChatEvent>& out);
  // End of the output: resolves everything held back. Call once; feed() is invalid afterwards.
  void finish(std::vector<ChatEvent>& out);

 private:
  ChatOutputParser(ReasoningConfig reasoning, std::unique_ptr<ToolCallStream> stream);
  void forward(const std::string& reasoning, const std::string& rest, std::vector<ChatEvent>& out);

  ReasoningSplitter reasoning_;
  std::unique_ptr<ToolCallStream> stream_;
  bool finished_ = false;
};

// The whole output at once; equal to folding the events of any chunking of the same text.
Result<ParsedMessage> parse_chat_output(std::string_view text, ChatParserConfig config,
                                        ToolSet tools);

}  // namespace t9::chat
