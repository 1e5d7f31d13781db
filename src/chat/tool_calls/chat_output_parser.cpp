#include "chat/tool_calls/chat_output_parser.h"

#include "chat/tool_calls/dialects.h"
#include "core/check.h"

namespace t9::chat {

Result<ChatOutputParser> ChatOutputParser::create(ChatParserConfig config, ToolSet tools) {
  T9_ASSIGN_OR_RETURN(auto dialect, make_tool_call_dialect(config.tool_dialect));
  if (!config.make_call_id) config.make_call_id = default_call_id_fn(config.tool_dialect);
  auto shared_tools = std::make_shared<const ToolSet>(std::move(tools));
  auto stream = std::make_unique<ToolCallStream>(std::move(dialect), std::move(shared_tools),
                                                 std::move(config.make_call_id));
  return ChatOutputParser(std::move(config.reasoning), std::move(stream));
}

ChatOutputParser::ChatOutputParser(ReasoningConfig reasoning,
                                   std::unique_ptr<ToolCallStream> stream)
    : reasoning_(std::move(reasoning)), stream_(std::move(stream)) {}

void ChatOutputParser::forward(const std::string& reasoning, const std::string& rest,
                               std::vector<ChatEvent>& out) {
  if (!reasoning.empty())
    out.push_back(ChatEvent{ChatEvent::Kind::kReasoning, reasoning, 0, "", ""});
  if (!rest.empty()) stream_->feed(rest, out);
}

void ChatOutputParser::feed(std::string_view delta, std::vector<ChatEvent>& out) {
  T9_CHECK(!finished_, "feed() after finish()");
  std::string reasoning, rest;
  reasoning_.feed(delta, reasoning, rest);
  forward(reasoning, rest, out);
}

void ChatOutputParser::finish(std::vector<ChatEvent>& out) {
  T9_CHECK(!finished_, "finish() called twice");
  finished_ = true;
  std::string reasoning, rest;
  reasoning_.finish(reasoning, rest);
  forward(reasoning, rest, out);
  stream_->finish(out);
}

Result<ParsedMessage> parse_chat_output(std::string_view text, ChatParserConfig config,
                                        ToolSet tools) {
  T9_ASSIGN_OR_RETURN(auto parser, ChatOutputParser::create(std::move(config), std::move(tools)));
  std::vector<ChatEvent> events;
  parser.feed(text, events);
  parser.finish(events);
  MessageAccumulator acc;
  acc.apply(events);
  return acc.take();
}

}  // namespace t9::chat
