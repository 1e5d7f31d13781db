// Anthropic adapter: POST /v1/messages (streaming events message_start, content_block_start/
// delta/stop with text_delta, thinking_delta and input_json_delta, message_delta, message_stop,
// ping) and POST /v1/messages/count_tokens. `?beta=true` and cache_control are accepted; the
// prefix cache is automatic, and its hits are reported as cache_read_input_tokens.
#include <httplib.h>

#include "server/api/common.h"
#include "server/prompt_builder.h"

namespace t9::server::api {
namespace {

constexpr Protocol kP = Protocol::kAnthropic;

// Text of a string or an array of {type:"text"} blocks joined by "\n" (tool_result content,
// system); null is empty.
std::optional<std::string> blocks_text(FieldReader& r, const Json& v, const std::string& path) {
  if (v.is_null()) return std::string();
  return content_parts_text(r, v, path, {"text"}, /*refusals=*/false, "\n");
}

// One Anthropic message -> template messages (tool results become role "tool" messages).
void convert_message(FieldReader& r, const Json& m, const std::string& path, Json& out) {
  auto role = r.str(m, path, "role");
  if (!r.ok()) return;
  if (role != "user" && role != "assistant")
    return r.fail(FieldReader::join(path, "role"), "must be user or assistant");
  auto it = m.find("content");
  if (it == m.end()) return r.fail(FieldReader::join(path, "content"), "is required");
  if (it->is_string()) {
    out.push_back({{"role", *role}, {"content", it->get<std::string>()}});
    return;
  }
  const std::string cp = FieldReader::join(path, "content");
  if (!it->is_array()) return r.fail(cp, "expected a string or an array of content blocks");
  std::string text, thinking;
  Json tool_calls = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& b = (*it)[i];
    const std::string bp = FieldReader::index(cp, i);
    if (!b.is_object()) return r.fail(bp, "expected a content block object");
    const std::string type = b.value("type", "");
    if (type == "text") {
      auto t = r.str(b, bp, "text");
      if (!r.ok()) return;
      text += t.value_or("");
    } else if (type == "thinking" && role == "assistant") {
      thinking += b.value("thinking", "");
    } else if (type == "redacted_thinking") {
      continue;
    } else if (type == "tool_use" && role == "assistant") {
      auto id = r.str(b, bp, "id");
      auto name = r.str(b, bp, "name");
      if (!name) r.require(b, bp, "name");
      if (!r.ok()) return;
      tool_calls.push_back({{"id", id.value_or("")}, {"type", "function"},
                            {"function", {{"name", *name}, {"arguments", b.value("input", Json::object())}}}});
    } else if (type == "tool_result" && role == "user") {
      auto id = r.str(b, bp, "tool_use_id");
      if (!id) r.require(b, bp, "tool_use_id");
      if (!r.ok()) return;
      auto content = blocks_text(r, b.value("content", Json("")), FieldReader::join(bp, "content"));
      if (!r.ok()) return;
      out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", *content}});
    } else {
      return r.fail(FieldReader::join(bp, "type"), "content block type '" + type + "' is not supported in a " +
                                                       *role + " message");
    }
  }
  if (role == "assistant") {
    Json msg = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    out.push_back(std::move(msg));
  } else if (!text.empty()) {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

struct MessagesRequest {
  ChatInput chat;
  std::string model;
  bool stream = false;
};

// Everything but sampling: messages, system, tools, tool_choice, thinking.
MessagesRequest read_request(FieldReader& r, const Json& body) {
  MessagesRequest q;
  q.model = r.str(body, "", "model").value_or("");
  q.stream = r.boolean(body, "", "stream").value_or(false);
  if (body.contains("system") && !body["system"].is_null()) {
    auto sys = blocks_text(r, body["system"], "system");
    if (sys && !sys->empty()) q.chat.messages.push_back({{"role", "system"}, {"content", *sys}});
  }
  const Json* msgs = r.array(body, "", "messages");
  if (r.ok() && (!msgs || msgs->empty())) r.fail("messages", "must be a non-empty array");
  for (size_t i = 0; r.ok() && msgs && i < msgs->size(); ++i)
    convert_message(r, (*msgs)[i], FieldReader::index("messages", i), q.chat.messages);
  Json tools = Json::array();
  if (const Json* ts = r.array(body, "", "tools")) {
    for (size_t i = 0; i < ts->size() && r.ok(); ++i) {
      const Json& t = (*ts)[i];
      const std::string tp = FieldReader::index("tools", i);
      auto name = t.is_object() ? r.str(t, tp, "name") : std::nullopt;
      if (!name) r.fail(FieldReader::join(tp, "name"), "is required");
      if (!r.ok()) break;
      tools.push_back({{"type", "function"},
                       {"function", {{"name", *name}, {"description", t.value("description", "")},
                                     {"parameters", t.value("input_schema", Json({{"type", "object"}}))}}}});
    }
  }
  if (const Json* tc = r.object(body, "", "tool_choice")) {
    const std::string type = tc->value("type", "auto");
    if (type == "none") tools = Json::array();
    else if (type == "tool") {
      Json only = Json::array();
      for (const auto& t : tools)
        if (t["function"]["name"] == tc->value("name", "")) only.push_back(t);
      if (only.empty()) r.fail("tool_choice.name", "names no tool in tools");
      tools = only;
    } else if (type != "auto" && type != "any") {
      r.fail("tool_choice.type", "must be auto, any, tool or none");
    }
    q.chat.tool_call_required = type == "any" || type == "tool";
    q.chat.parallel_tool_calls = !tc->value("disable_parallel_tool_use", false);
  }
  if (!tools.empty()) q.chat.tools = tools;
  if (const Json* th = r.object(body, "", "thinking")) {
    const std::string type = th->value("type", "");
    if (type == "enabled" || type == "adaptive") q.chat.kwargs["enable_thinking"] = true;
    else if (type == "disabled") q.chat.kwargs["enable_thinking"] = false;
    else r.fail("thinking.type", "must be enabled or disabled");
  }
  return q;
}

const char* stop_reason(const GenOutput& out, bool tool_use) {
  if (tool_use) return "tool_use";
  switch (out.finish) {
    case Finish::kLength: return "max_tokens";
    case Finish::kStopString: return "stop_sequence";
    default: return "end_turn";
  }
}

Json usage_json(const engine::Usage& u) {
  return {{"input_tokens", u.n_prompt_tokens - u.n_cached_prompt_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.n_cached_prompt_tokens},
          {"output_tokens", u.n_generated_tokens}};
}

std::string sse(const char* event, const Json& data) {
  return std::string("event: ") + event + "\ndata: " +
         data.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

class MessagesStream final : public StreamFormatter {
 public:
  MessagesStream(std::string id, std::string model, int n_prompt)
      : id_(std::move(id)), model_(std::move(model)), n_prompt_(n_prompt) {}

  std::string begin() override {
    Json msg = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"content", Json::array()},
                {"model", model_}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", n_prompt_}, {"cache_creation_input_tokens", 0},
                           {"cache_read_input_tokens", 0}, {"output_tokens", 0}}}};
    return sse("message_start", {{"type", "message_start"}, {"message", msg}}) +
           sse("ping", {{"type", "ping"}});
  }
  std::string keepalive() override { return sse("ping", {{"type", "ping"}}); }

  std::string on_output(const GenOutput& out) override {
    std::string s;
    using K = chat::ChatEvent::Kind;
    for (const auto& e : out.events) {
      switch (e.kind) {
        case K::kReasoning:
          s += open(kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
          s += delta({{"type", "thinking_delta"}, {"thinking", e.text}});
          break;
        case K::kContent:
          if (e.text.empty()) break;
          s += open(kText, {{"type", "text"}, {"text", ""}});
          s += delta({{"type", "text_delta"}, {"text", e.text}});
          break;
        case K::kToolCallStart:
          tool_use_ = true;
          s += close();
          s += open(kTool, {{"type", "tool_use"}, {"id", e.id}, {"name", e.name}, {"input", Json::object()}});
          break;
        case K::kToolCallArgs:
          s += delta({{"type", "input_json_delta"}, {"partial_json", e.text}});
          break;
        case K::kToolCallEnd: s += close(); break;
      }
    }
    if (out.finish == Finish::kNone) return s;
    s += close();
    if (out.finish == Finish::kError)
      return s + sse("error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", out.error}}}});
    Json d = {{"stop_reason", stop_reason(out, tool_use_)},
              {"stop_sequence", out.finish == Finish::kStopString ? Json(out.stop_string) : Json()}};
    s += sse("message_delta", {{"type", "message_delta"}, {"delta", d}, {"usage", usage_json(out.usage)}});
    return s + sse("message_stop", {{"type", "message_stop"}});
  }

 private:
  enum Block { kNoBlock, kText, kThinking, kTool };
  std::string open(Block b, const Json& content_block) {
    if (block_ == b && b != kTool) return {};
    std::string s = close();
    block_ = b;
    return s + sse("content_block_start", {{"type", "content_block_start"}, {"index", index_},
                                           {"content_block", content_block}});
  }
  std::string delta(const Json& d) {
    return sse("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }
  std::string close() {
    if (block_ == kNoBlock) return {};
    std::string s = sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    block_ = kNoBlock;
    ++index_;
    return s;
  }
  std::string id_, model_;
  int n_prompt_;
  Block block_ = kNoBlock;
  int index_ = 0;
  bool tool_use_ = false;
};

Json message_json(const std::string& id, const std::string& model, const GenOutput& out) {
  chat::MessageAccumulator acc;
  acc.apply(out.events);
  const chat::ParsedMessage& m = acc.message();
  Json content = Json::array();
  if (!m.reasoning_content.empty())
    content.push_back({{"type", "thinking"}, {"thinking", m.reasoning_content}, {"signature", ""}});
  if (!m.content.empty()) content.push_back({{"type", "text"}, {"text", m.content}});
  for (const auto& c : m.tool_calls) {
    Json input = Json::parse(c.arguments, nullptr, false);
    content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name},
                       {"input", input.is_discarded() ? Json::object() : input}});
  }
  return {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
          {"content", content}, {"stop_reason", stop_reason(out, !m.tool_calls.empty())},
          {"stop_sequence", out.finish == Finish::kStopString ? Json(out.stop_string) : Json()},
          {"usage", usage_json(out.usage)}};
}

void handle_messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  r.require(*body, "", "model");
  r.require(*body, "", "max_tokens");
  if (!r.ok()) return send_bad_request(res, kP, r);
  MessagesRequest q = read_request(r, *body);
  const auto max_tokens = r.integer(*body, "", "max_tokens", 1, 1 << 24);
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, q.model, kP, res)) return;
  auto spec = chat_generation_spec(ctx, q.chat);
  if (!spec.ok()) return send_error(res, kP, 400, spec.message());
  read_sampling(r, *body, "", *spec);
  read_stop(r, *body, "", "stop_sequences", spec->stop);
  if (!r.ok()) return send_bad_request(res, kP, r);
  spec->max_tokens = static_cast<int>(*max_tokens);
  spec->protocol = "anthropic";
  const int n_prompt = static_cast<int>(spec->prompt.size());
  std::shared_ptr<Generation> g = start_generation(ctx, std::move(spec).value(), kP, res);
  if (!g) return;
  const std::string id = random_id("msg_");
  if (q.stream)
    return stream_generation(res, "text/event-stream", g, std::make_shared<MessagesStream>(id, q.model, n_prompt));
  GenOutput out = collect_generation(*g, nullptr);
  if (out.finish == Finish::kError) return send_error(res, kP, 500, out.error);
  send_json(res, message_json(id, q.model, out));
}

void handle_count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  r.require(*body, "", "model");
  MessagesRequest q = read_request(r, *body);
  if (!r.ok()) return send_bad_request(res, kP, r);
  auto text = render_chat(ctx, q.chat);
  if (!text.ok()) return send_error(res, kP, 400, text.message());
  auto ids = tokenize_prompt(ctx, *text);
  if (!ids.ok()) return send_error(res, kP, 400, ids.message());
  send_json(res, {{"input_tokens", ids->size()}});
}

}  // namespace

void register_anthropic(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/messages", [&ctx](const httplib::Request& q, httplib::Response& s) { handle_messages(ctx, q, s); });
  http.Post("/v1/messages/count_tokens",
            [&ctx](const httplib::Request& q, httplib::Response& s) { handle_count_tokens(ctx, q, s); });
}

}  // namespace t9::server::api
