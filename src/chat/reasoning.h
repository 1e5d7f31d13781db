// The reasoning split: "<think>...</think>" at the start of a model's output is reasoning, the
// rest is the answer. Streaming: fed arbitrary deltas, it emits reasoning as soon as it is
// certain and passes the text after the reasoning on, unchanged, to the tool-call parser.
//
// Policy (matching how Qwen3's chat template re-reads its own output):
//  - "<think>" opens reasoning only at the start of the output (after optional whitespace);
//  - starts_in_reasoning: the prompt already ended with "<think>" (Qwen3 thinking templates), so
//    the output starts inside reasoning and contains only "</think>" (a repeated "<think>" at
//    the very start is skipped);
//  - reasoning is trimmed of surrounding whitespace; an unclosed reasoning (output cut off) is
//    all reasoning;
//  - tool-call markup inside reasoning is left as reasoning text.
#pragma once

#include <string>
#include <string_view>

#include "chat/tool_calls/utf8_text.h"

namespace t9::chat {

struct ReasoningConfig {
  bool enabled = true;
  bool starts_in_reasoning = false;
  std::string open_tag = "<think>";
  std::string close_tag = "</think>";
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(ReasoningConfig config);

  // Appends the reasoning that became certain to `reasoning` (UTF-8 complete, trimmed) and the
  // text after the reasoning to `rest` (raw bytes).
  void feed(std::string_view delta, std::string& reasoning, std::string& rest);
  // End of the output: whatever was held back is resolved.
  void finish(std::string& reasoning, std::string& rest);

  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State { kStart, kReasoning, kAfter };

  void pump(bool final, std::string& reasoning, std::string& rest);
  bool step_start(bool final);
  bool step_reasoning(bool final, std::string& reasoning);

  ReasoningConfig config_;
  State state_ = State::kStart;
  std::string buf_;
  TextSink sink_;
};

}  // namespace t9::chat
