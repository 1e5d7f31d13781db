// Formatting a conversation with a model's chat template, exactly as transformers'
// tokenizer.apply_chat_template(..., tokenize=False) does: messages are normalized first (keys
// whose value is null dropped; reasoning aliased to `reasoning_content` and `thinking`), the
// template sees messages, tools (None when absent), documents=None, add_generation_prompt, the
// tokenizer's special tokens (bos_token, eos_token, ...) and extra kwargs that override them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/template.h"
#include "core/result.h"

namespace t9::chat {

using Json = nlohmann::ordered_json;  // object key order is part of what templates print

struct SpecialTokens {
  std::string bos_token;  // empty = the tokenizer has none (not passed to the template)
  std::string eos_token;
  std::string unk_token;
  std::string pad_token;
};

struct ChatRequest {
  Json messages = Json::array();  // [{role, content, tool_calls?, reasoning_content?, ...}]
  Json tools;                     // OpenAI function tools array, or null for none
  bool add_generation_prompt = true;
  Json kwargs = Json::object();  // enable_thinking, ... (override special tokens when equal)
};

class ChatTemplate {
 public:
  static Result<ChatTemplate> create(const std::string& source, SpecialTokens tokens = {});

  // The prompt text. Errors name the message/field that was malformed or the template line.
  Result<std::string> apply(const ChatRequest& req) const;

 private:
  jinja::Template tmpl_;
  SpecialTokens tokens_;
};

}  // namespace t9::chat
