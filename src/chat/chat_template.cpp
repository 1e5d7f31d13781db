#include "chat/chat_template.h"

namespace t9::chat {
namespace {

using jinja::Value;

// transformers' _normalize_chat_messages + _alias_reasoning_fields.
Result<Value> normalize_messages(const Json& messages) {
  if (!messages.is_array()) return error("messages: expected an array");
  if (messages.empty()) return error("messages: the conversation is empty");
  std::vector<Value> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object()) return error("messages[{}]: expected an object", i);
    Value msg = Value::new_dict();
    const Json* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      auto it = m.find(key);
      if (it != m.end() && !it->is_null()) {
        reasoning = &*it;
        break;
      }
    }
    // {"thinking": r, **message, "reasoning_content": r}: thinking keeps the first slot.
    if (reasoning) msg.dict().set(Value("thinking"), jinja::from_json(*reasoning));
    for (const auto& [k, v] : m.items()) {
      if (v.is_null()) continue;
      msg.dict().set(Value(k), jinja::from_json(v));
    }
    if (reasoning) msg.dict().set(Value("reasoning_content"), jinja::from_json(*reasoning));
    out.push_back(std::move(msg));
  }
  return Value::new_list(std::move(out));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::create(const std::string& source, SpecialTokens tokens) {
  auto t = jinja::Template::parse(source);
  if (!t.ok()) return error("chat template: {}", t.message());
  ChatTemplate ct;
  ct.tmpl_ = std::move(t).value();
  ct.tokens_ = std::move(tokens);
  return ct;
}

Result<std::string> ChatTemplate::apply(const ChatRequest& req) const {
  T9_ASSIGN_OR_RETURN(Value messages, normalize_messages(req.messages));
  if (!req.tools.is_null() && !req.tools.is_array()) return error("tools: expected an array");
  if (!req.kwargs.is_object()) return error("kwargs: expected an object");
  Value ctx = Value::new_dict();
  auto& d = ctx.dict();
  d.set(Value("messages"), std::move(messages));
  d.set(Value("tools"), jinja::from_json(req.tools));
  d.set(Value("documents"), Value());
  d.set(Value("add_generation_prompt"), Value(req.add_generation_prompt));
  const std::pair<const char*, const std::string*> special[] = {{"bos_token", &tokens_.bos_token},
                                                                {"eos_token", &tokens_.eos_token},
                                                                {"unk_token", &tokens_.unk_token},
                                                                {"pad_token", &tokens_.pad_token}};
  for (const auto& [name, tok] : special)
    if (!tok->empty()) d.set(Value(name), Value(*tok));
  for (const auto& [k, v] : req.kwargs.items()) d.set(Value(k), jinja::from_json(v));
  auto out = tmpl_.render(ctx);
  if (!out.ok()) return error("chat template: {}", out.message());
  return out;
}

}  // namespace t9::chat
