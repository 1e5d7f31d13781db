// From a conversation (already translated by a protocol adapter into the template's OpenAI-style
// messages and tools) to a GenerationSpec: render with the model's chat template, tokenize, and
// configure the output parser (tool-call dialect, reasoning).
#pragma once

#include <string>
#include <vector>

#include "server/generation.h"
#include "server/json_fields.h"

namespace t9::server {

struct ChatInput {
  chat::Json messages = chat::Json::array();
  chat::Json tools;                          // OpenAI function tools array, or null
  chat::Json kwargs = chat::Json::object();  // template kwargs (enable_thinking, ...)
  bool add_generation_prompt = true;
  // tool_choice required / a named function (Anthropic: any / tool): the output is a tool call,
  // enforced by a grammar where the template's dialect has one (grammar/tool_call_grammar.h).
  // Otherwise, with ServerConfig::tool_grammar, a call the model opens is checked (lazily).
  bool tool_call_required = false;
  bool parallel_tool_calls = true;
};

// Tokenizes a prompt the template (or the client) already formatted (Tokenizer::encode_prompt);
// errors name the prompt.
Result<std::vector<engine::TokenId>> tokenize_prompt(const ServerContext& ctx,
                                                     const std::string& text);

// Renders the chat with the model's template (error when it has none) and tokenizes it.
Result<std::string> render_chat(const ServerContext& ctx, const ChatInput& in);

// A spec for a chat completion: prompt tokens, output parsed for the model's tool-call dialect
// (when tools were given) and for <think> reasoning. Sampling fields are left for the adapter.
Result<GenerationSpec> chat_generation_spec(const ServerContext& ctx, const ChatInput& in);

}  // namespace t9::server
