// Tool-call grammars: the text of one or more calls in a chat template's tool-call dialect, each
// naming one of the request's tools with arguments its parameter schema admits (leniently: a
// keyword the grammar cannot enforce admits any value there). What `tool_choice: required` (or a
// named function, Anthropic's "any" / "tool") compiles to, so the model cannot answer in prose or
// call a tool it was not given; lazily (ToolCallFormat::lazy), what `auto` compiles to where the
// server enables it (`serve --tool-grammar`): prose as the model likes, but a call it opens must
// be well formed. The formats are those the chat/tool_calls parsers read back:
//   hermes:    <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   qwen_xml:  <tool_call>\n<function=f>\n<parameter=p>\nVALUE\n</parameter>\n...</function>
//              \n</tool_call>  (a string parameter's VALUE is raw text up to "\n</parameter>";
//              others JSON)
//   llama3_json: {"name": "f", "parameters": {...}}
// Several calls (parallel) are separated by "\n" (hermes, qwen_xml) or "; " (llama3_json).
#pragma once

#include <string_view>

#include "core/result.h"
#include "grammar/json_schema.h"

namespace t9::grammar {

struct ToolCallFormat {
  std::string dialect;   // hermes, qwen_xml or llama3_json
  bool parallel = true;  // more than one call may follow the first
  // Lazy (tool_choice auto): free text that may end anywhere, and calls checked only from their
  // opening marker on (hermes, qwen_xml: "<tool_call>"). Otherwise the output is the calls.
  bool lazy = false;
};

// The dialects (and modes) tool_call_grammar() can write.
bool tool_call_grammar_supports(std::string_view dialect, bool lazy = false);

// tools: OpenAI function tools ([{"type": "function", "function": {"name", "parameters"}}]).
Result<Grammar> tool_call_grammar(const Json& tools, const ToolCallFormat& format,
                                  const Preamble& preamble = {});

}  // namespace t9::grammar
