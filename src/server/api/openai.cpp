// OpenAI adapter: POST /v1/chat/completions, POST /v1/completions, GET /v1/models.
// Request JSON -> GenerationSpec; Generation output -> chat.completion(.chunk) / text_completion.
#include <httplib.h>

#include "core/sampling.h"
#include "server/api/common.h"
#include "server/prompt_builder.h"
#include "tokenizer/unicode.h"

namespace t9::server::api {
namespace {

constexpr Protocol kP = Protocol::kOpenAI;

// OpenAI content: a string, null, or an array of parts of which only text is supported here.
std::optional<std::string> content_text(FieldReader& r, const Json& msg, const std::string& path) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return std::string();
  return content_parts_text(r, *it, FieldReader::join(path, "content"), {"text"}, false);
}

// Validates OpenAI messages and turns them into the template's messages.
Json read_messages(FieldReader& r, const Json& body) {
  Json out = Json::array();
  const Json* msgs = r.array(body, "", "messages");
  if (!r.ok()) return out;
  if (!msgs || msgs->empty()) {
    r.fail("messages", "must be a non-empty array");
    return out;
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string path = FieldReader::index("messages", i);
    if (!m.is_object()) {
      r.fail(path, "expected an object");
      return out;
    }
    auto role = r.str(m, path, "role");
    if (!r.ok()) return out;
    if (!role) {
      r.fail(FieldReader::join(path, "role"), "is required");
      return out;
    }
    if (*role == "developer") role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      r.fail(FieldReader::join(path, "role"), "must be system, developer, user, assistant or tool");
      return out;
    }
    auto text = content_text(r, m, path);
    if (!r.ok()) return out;
    Json msg = {{"role", *role}, {"content", *text}};
    if (*role == "assistant") {
      if (auto rc = r.str(m, path, "reasoning_content")) msg["reasoning_content"] = *rc;
      if (const Json* calls = r.array(m, path, "tool_calls")) {
        Json tc = Json::array();
        for (size_t j = 0; j < calls->size(); ++j) {
          const Json& c = (*calls)[j];
          const std::string cp = FieldReader::index(FieldReader::join(path, "tool_calls"), j);
          const Json* fn = r.object(c, cp, "function");
          if (!fn) r.require(c, cp, "function");
          if (!r.ok()) return out;
          auto name = r.str(*fn, FieldReader::join(cp, "function"), "name");
          if (!name) r.require(*fn, FieldReader::join(cp, "function"), "name");
          if (!r.ok()) return out;
          Json args =
              fn->contains("arguments") ? arguments_object((*fn)["arguments"]) : Json::object();
          tc.push_back({{"id", c.value("id", "")},
                        {"type", "function"},
                        {"function", {{"name", *name}, {"arguments", args}}}});
        }
        msg["tool_calls"] = tc;
      }
    } else if (*role == "tool") {
      if (auto id = r.str(m, path, "tool_call_id")) msg["tool_call_id"] = *id;
      if (auto name = r.str(m, path, "name")) msg["name"] = *name;
    }
    if (!r.ok()) return out;
    out.push_back(std::move(msg));
  }
  return out;
}

// tools + tool_choice -> the tools the template sees (none, all, or the named one), and whether
// the output must be a call (required, or a named function).
Json read_tools(FieldReader& r, const Json& body, bool* required) {
  const Json* tools = r.array(body, "", "tools");
  if (!r.ok() || !tools || tools->empty()) return Json();
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return *tools;
  if (it->is_string()) {
    const std::string c = it->get<std::string>();
    if (c == "none") return Json();
    *required = c == "required";
    if (c == "auto" || c == "required") return *tools;
    r.fail("tool_choice", "must be none, auto, required or {\"type\":\"function\",...}");
    return Json();
  }
  const Json* fn = it->is_object() ? r.object(*it, "tool_choice", "function") : nullptr;
  if (!fn || !fn->contains("name") || !(*fn)["name"].is_string()) {
    r.fail("tool_choice",
           "must be none, auto, required or {\"type\":\"function\",\"function\":{\"name\":...}}");
    return Json();
  }
  Json only = Json::array();
  for (const auto& t : *tools)
    if (t.is_object() && t.contains("function") && t["function"].value("name", "") == (*fn)["name"])
      only.push_back(t);
  if (only.empty()) r.fail("tool_choice.function.name", "names no tool in tools");
  *required = true;
  return only;
}

// response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict"}}; llama-server's {"type": "json_object", "schema": {...}} too.
void read_response_format(FieldReader& r, const Json& body, GenerationSpec& spec) {
  const Json* rf = r.object(body, "", "response_format");
  if (!rf) return;
  const auto type = r.str(*rf, "response_format", "type");
  if (!r.ok()) return;
  if (!type) return r.fail("response_format.type", "is required: text, json_object or json_schema");
  const Json* schema = nullptr;
  std::string field;
  if (*type == "text") return;
  if (*type == "json_object") {
    spec.format.kind = OutputFormat::Kind::kJsonObject;
    if (auto it = rf->find("schema"); it != rf->end() && !it->is_null()) {
      schema = &*it;
      field = "response_format.schema";
    }
  } else if (*type == "json_schema") {
    const Json* js = r.object(*rf, "response_format", "json_schema");
    if (!r.ok()) return;
    if (!js) return r.fail("response_format.json_schema", "is required when type is json_schema");
    auto it = js->find("schema");
    if (it == js->end() || it->is_null())
      return r.fail("response_format.json_schema.schema", "is required");
    schema = &*it;
    field = "response_format.json_schema.schema";
  } else {
    return r.fail("response_format.type", "must be text, json_object or json_schema");
  }
  if (!schema) return;
  if (!schema->is_object() && !schema->is_boolean())
    return r.fail(field, "must be a JSON schema object");
  spec.format = {OutputFormat::Kind::kJsonSchema, *schema, field, {}};
}

void read_common(FieldReader& r, const Json& body, GenerationSpec& spec, int default_max) {
  read_sampling(r, body, "", spec);
  read_response_format(r, body, spec);
  // llama-server's `grammar`: a GBNF grammar for the whole output.
  if (auto g = r.str(body, "", "grammar"); g && !g->empty()) {
    if (body.contains("response_format") && !body["response_format"].is_null())
      return r.fail("grammar", "give either grammar or response_format, not both");
    spec.format = {OutputFormat::Kind::kGbnf, Json(*g), "grammar", {}};
  }
  read_stop(r, body, "", "stop", spec.stop);
  spec.max_tokens = default_max;
  if (auto v = r.integer(body, "", "max_tokens", 1, 1 << 24))
    spec.max_tokens = static_cast<int>(*v);
  if (auto v = r.integer(body, "", "max_completion_tokens", 1, 1 << 24))
    spec.max_tokens = static_cast<int>(*v);
  if (auto n = r.integer(body, "", "n", 1, 128); n && *n != 1) r.fail("n", "only n=1 is supported");
}

Json usage_json(const engine::Usage& u) {
  return {{"prompt_tokens", u.n_prompt_tokens},
          {"completion_tokens", u.n_generated_tokens},
          {"total_tokens", u.n_prompt_tokens + u.n_generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.n_cached_prompt_tokens}}}};
}

Json logprobs_json(const std::vector<TokenLogprob>& lps) {
  return {{"content", token_logprobs_json(lps)}};
}

std::string finish_reason(const GenOutput& out, bool has_tool_calls) {
  if (has_tool_calls) return "tool_calls";
  return out.finish == Finish::kLength ? "length" : "stop";
}

class ChatStream final : public StreamFormatter {
 public:
  ChatStream(std::string id, std::string model, bool include_usage, bool logprobs)
      : id_(std::move(id)),
        model_(std::move(model)),
        include_usage_(include_usage),
        logprobs_(logprobs) {}

  std::string begin() override { return chunk({{"role", "assistant"}, {"content", ""}}, Json()); }
  std::string keepalive() override { return ": keepalive\n\n"; }

  std::string on_output(const GenOutput& out) override {
    std::string s;
    // A token's logprobs ride on the next chunk sent: a token that adds no text yet (a character
    // cut between tokens, tool-call markup) leaves its entry for a later delta or the final chunk.
    if (logprobs_) pending_.insert(pending_.end(), out.logprobs.begin(), out.logprobs.end());
    const auto take_logprobs = [&] {
      if (pending_.empty()) return Json();
      Json lp = logprobs_json(pending_);
      pending_.clear();
      return lp;
    };
    for (const auto& e : out.events) {
      Json delta;
      using K = chat::ChatEvent::Kind;
      switch (e.kind) {
        case K::kContent:
          delta = {{"content", e.text}};
          break;
        case K::kReasoning:
          delta = {{"reasoning_content", e.text}};
          break;
        case K::kToolCallStart:
          saw_tool_call_ = true;
          delta = {
              {"tool_calls", Json::array({{{"index", e.index},
                                           {"id", e.id},
                                           {"type", "function"},
                                           {"function", {{"name", e.name}, {"arguments", ""}}}}})}};
          break;
        case K::kToolCallArgs:
          delta = {{"tool_calls",
                    Json::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}})}};
          break;
        case K::kToolCallEnd:
          continue;
      }
      s += chunk(delta, Json(), take_logprobs());
    }
    if (out.finish == Finish::kNone) return s;
    if (out.finish == Finish::kError) {
      s += "data: " + Json({{"error", {{"message", out.error}, {"type", "server_error"}}}}).dump() +
           "\n\n";
    } else {
      s += chunk(Json::object(), finish_reason(out, saw_tool_call_), take_logprobs());
    }
    if (include_usage_) {
      Json u = base();
      u["choices"] = Json::array();
      u["usage"] = usage_json(out.usage);
      s += "data: " + u.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
    }
    s += "data: [DONE]\n\n";
    return s;
  }

 private:
  Json base() const {
    return {{"id", id_},
            {"object", "chat.completion.chunk"},
            {"created", created_},
            {"model", model_},
            {"system_fingerprint", "tempo9"}};
  }
  std::string chunk(const Json& delta, const Json& finish, const Json& logprobs = Json()) const {
    Json c = base();
    c["choices"] = Json::array(
        {{{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}}});
    if (include_usage_) c["usage"] = nullptr;
    return "data: " + c.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  }
  std::string id_, model_;
  int64_t created_ = unix_seconds();
  bool include_usage_, logprobs_;
  bool saw_tool_call_ = false;
  std::vector<TokenLogprob> pending_;  // tokens whose logprobs no chunk has carried yet
};

void handle_chat(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  const std::string model = r.str(*body, "", "model").value_or(ctx.model.id);
  ChatInput in;
  in.messages = read_messages(r, *body);
  in.tools = read_tools(r, *body, &in.tool_call_required);
  in.parallel_tool_calls = r.boolean(*body, "", "parallel_tool_calls").value_or(true);
  read_reasoning_effort(r, *body, "", "reasoning_effort", in.kwargs);
  if (const Json* kw = r.object(*body, "", "chat_template_kwargs"))  // explicit kwargs win
    for (const auto& [k, v] : kw->items()) in.kwargs[k] = v;
  const bool stream = r.boolean(*body, "", "stream").value_or(false);
  bool include_usage = false;
  if (const Json* so = r.object(*body, "", "stream_options"))
    include_usage = r.boolean(*so, "stream_options", "include_usage").value_or(false);
  const bool logprobs = r.boolean(*body, "", "logprobs").value_or(false);
  const int top_logprobs =
      static_cast<int>(r.integer(*body, "", "top_logprobs", 0, 20).value_or(0));
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, model, kP, res)) return;

  auto spec = chat_generation_spec(ctx, in);
  if (!spec.ok())
    return send_error(res, kP, 400, spec.message(),
                      spec.message().starts_with("tool_choice") ? "tool_choice" : "messages");
  read_common(r, *body, *spec, ctx.config.default_max_tokens);
  if (!r.ok()) return send_bad_request(res, kP, r);
  spec->n_top_logprobs = logprobs ? top_logprobs : -1;
  spec->protocol = "openai";
  std::shared_ptr<Generation> g = start_generation(ctx, std::move(spec).value(), kP, res);
  if (!g) return;
  const std::string id = random_id("chatcmpl-");
  if (stream) {
    return stream_generation(res, "text/event-stream", g,
                             std::make_shared<ChatStream>(id, model, include_usage, logprobs));
  }
  GenOutput out = collect_generation(*g, nullptr);
  if (out.finish == Finish::kError) return send_error(res, kP, 500, out.error);
  chat::MessageAccumulator acc;
  acc.apply(out.events);
  const chat::ParsedMessage& m = acc.message();
  Json msg = {{"role", "assistant"}, {"content", m.content}};
  if (!m.reasoning_content.empty()) msg["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const auto& c : m.tool_calls)
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    msg["tool_calls"] = calls;
    if (m.content.empty()) msg["content"] = nullptr;
  }
  Json resp = {
      {"id", id},
      {"object", "chat.completion"},
      {"created", unix_seconds()},
      {"model", model},
      {"system_fingerprint", "tempo9"},
      {"choices", Json::array({{{"index", 0},
                                {"message", msg},
                                {"logprobs", logprobs ? logprobs_json(out.logprobs) : Json()},
                                {"finish_reason", finish_reason(out, !m.tool_calls.empty())}}})},
      {"usage", usage_json(out.usage)}};
  send_json(res, resp);
}

// The legacy completions API's logprobs: {tokens, token_logprobs, top_logprobs (one {token:
// logprob} object per token), text_offset (each token's byte offset in the generated text, from
// *offset on; tokens may split a character, so bytes rather than characters)}.
Json completion_logprobs_json(const std::vector<TokenLogprob>& lps, size_t* offset) {
  Json tokens = Json::array(), lp = Json::array(), top = Json::array(), at = Json::array();
  for (const auto& t : lps) {
    tokens.push_back(t.text);
    lp.push_back(t.logprob);
    Json alts = Json::object();
    for (const auto& [text, l] : t.top) alts[text] = l;
    top.push_back(std::move(alts));
    at.push_back(*offset);
    *offset += t.text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}, {"text_offset", at}};
}

class CompletionStream final : public StreamFormatter {
 public:
  CompletionStream(std::string id, std::string model, bool include_usage, bool logprobs)
      : id_(std::move(id)),
        model_(std::move(model)),
        include_usage_(include_usage),
        logprobs_(logprobs) {}
  std::string keepalive() override { return ": keepalive\n\n"; }
  std::string on_output(const GenOutput& out) override {
    std::string text;
    for (const auto& e : out.events) text += e.text;
    // As in chat streams: a token that adds no text yet has its entry on the next chunk.
    if (logprobs_) pending_.insert(pending_.end(), out.logprobs.begin(), out.logprobs.end());
    std::string s;
    if (!text.empty()) s += chunk(text, Json());
    if (out.finish == Finish::kNone) return s;
    s += chunk("", out.finish == Finish::kLength ? "length" : "stop");
    if (include_usage_) {
      Json u = {{"id", id_},       {"object", "text_completion"}, {"created", created_},
                {"model", model_}, {"choices", Json::array()},    {"usage", usage_json(out.usage)}};
      s += "data: " + u.dump() + "\n\n";
    }
    return s + "data: [DONE]\n\n";
  }

 private:
  std::string chunk(const std::string& text, const Json& finish) {
    Json lp;
    if (!pending_.empty()) {
      lp = completion_logprobs_json(pending_, &offset_);
      pending_.clear();
    }
    Json c = {{"id", id_},
              {"object", "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices",
               Json::array(
                   {{{"index", 0}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}}})}};
    return "data: " + c.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  }
  std::string id_, model_;
  int64_t created_ = unix_seconds();
  bool include_usage_, logprobs_;
  std::vector<TokenLogprob> pending_;  // tokens whose logprobs no chunk has carried yet
  size_t offset_ = 0;                  // the next token's text_offset
};

void handle_completion(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  const std::string model = r.str(*body, "", "model").value_or(ctx.model.id);
  GenerationSpec spec;
  auto it = body->find("prompt");
  if (it == body->end() || it->is_null()) {
    r.fail("prompt", "is required");
  } else if (it->is_string()) {
    auto ids = tokenize_prompt(ctx, it->get<std::string>());
    if (!ids.ok())
      r.fail("prompt", ids.message());
    else
      spec.prompt = std::move(ids).value();
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= static_cast<int64_t>(ctx.tokenizer->n_tokens())) {
        r.fail(FieldReader::index("prompt", i), "not a token id of this model");
        break;
      }
      spec.prompt.push_back(t.get<engine::TokenId>());
    }
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    auto ids = tokenize_prompt(ctx, (*it)[0].get<std::string>());
    if (!ids.ok())
      r.fail("prompt", ids.message());
    else
      spec.prompt = std::move(ids).value();
  } else {
    r.fail("prompt", "expected a string, an array of one string, or an array of token ids");
  }
  const bool stream = r.boolean(*body, "", "stream").value_or(false);
  bool include_usage = false;
  if (const Json* so = r.object(*body, "", "stream_options"))
    include_usage = r.boolean(*so, "stream_options", "include_usage").value_or(false);
  read_common(r, *body, spec, 16);  // OpenAI's default for completions
  // logprobs: the legacy API's integer, the most likely alternatives per token (OpenAI allows 5;
  // up to 20 here, as vLLM); null or absent: none.
  const auto n_logprobs = r.integer(*body, "", "logprobs", 0, kMaxTopLogprobs);
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, model, kP, res)) return;
  spec.protocol = "openai";
  spec.n_top_logprobs = n_logprobs ? static_cast<int>(*n_logprobs) : -1;
  std::shared_ptr<Generation> g = start_generation(ctx, std::move(spec), kP, res);
  if (!g) return;
  const std::string id = random_id("cmpl-");
  if (stream)
    return stream_generation(
        res, "text/event-stream", g,
        std::make_shared<CompletionStream>(id, model, include_usage, n_logprobs.has_value()));
  GenOutput out = collect_generation(*g, nullptr);
  if (out.finish == Finish::kError) return send_error(res, kP, 500, out.error);
  std::string text;
  for (const auto& e : out.events) text += e.text;
  size_t offset = 0;
  send_json(
      res, {{"id", id},
            {"object", "text_completion"},
            {"created", unix_seconds()},
            {"model", model},
            {"choices",
             Json::array({{{"index", 0},
                           {"text", text},
                           {"logprobs",
                            n_logprobs ? completion_logprobs_json(out.logprobs, &offset) : Json()},
                           {"finish_reason", out.finish == Finish::kLength ? "length" : "stop"}}})},
            {"usage", usage_json(out.usage)}});
}

// POST /tokenize, as llama-server and vLLM answer it: "content" (llama-server: no BOS unless
// add_special; parse_special) or "prompt" (vLLM: BOS unless add_special_tokens is false), or
// "messages" rendered by the chat template (add_generation_prompt, default true) and tokenized as
// a prompt. Answers {tokens, count, max_model_len}; with_pieces: tokens as {id, piece} (the
// piece's text, or its bytes where it is not whole UTF-8).
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  const bool with_pieces = r.boolean(*body, "", "with_pieces").value_or(false);
  Result<std::vector<engine::TokenId>> ids = error("content: is required (or prompt, or messages)");
  if (body->contains("messages")) {
    ChatInput in;
    in.messages = read_messages(r, *body);
    in.add_generation_prompt = r.boolean(*body, "", "add_generation_prompt").value_or(true);
    if (!r.ok()) return send_bad_request(res, kP, r);
    auto text = render_chat(ctx, in);
    if (!text.ok()) return send_error(res, kP, 400, text.message(), "messages");
    ids = tokenize_prompt(ctx, *text);
  } else {
    const bool llama = body->contains("content");
    const auto text = r.str(*body, "", llama ? "content" : "prompt");
    const auto special = r.boolean(*body, "", llama ? "add_special" : "add_special_tokens");
    // llama-server's parse_special: false tokenizes control-token text as plain text.
    const bool parse_special = r.boolean(*body, "", "parse_special").value_or(true);
    if (!r.ok()) return send_bad_request(res, kP, r);
    if (text) {
      tok::EncodeOptions opt;
      opt.add_special = special.value_or(!llama);
      opt.parse_special = parse_special;
      ids = ctx.tokenizer->encode(*text, opt);
    }
  }
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!ids.ok()) return send_error(res, kP, 400, ids.message(), "content");
  Json tokens = Json::array();
  for (engine::TokenId id : *ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece(ctx.tokenizer->piece(id));
    const Json p = Json(piece);
    tokens.push_back({{"id", id},
                      {"piece", tok::utf8_valid_prefix(piece) == piece.size()
                                    ? p
                                    : Json(std::vector<uint8_t>(piece.begin(), piece.end()))}});
  }
  send_json(res, {{"tokens", tokens}, {"count", ids->size()}, {"max_model_len", ctx.model.n_ctx}});
}

// POST /detokenize {"tokens": [ids]}: {"content": text} (llama-server) and {"prompt": text} (vLLM).
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  const Json* arr = r.array(*body, "", "tokens");
  if (!arr) r.require(*body, "", "tokens");
  std::vector<engine::TokenId> ids;
  for (size_t i = 0; arr && i < arr->size() && r.ok(); ++i) {
    const Json& t = (*arr)[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= static_cast<int64_t>(ctx.tokenizer->n_tokens()))
      r.fail(FieldReader::index("tokens", i), "not a token id of this model");
    else
      ids.push_back(t.get<engine::TokenId>());
  }
  if (!r.ok()) return send_bad_request(res, kP, r);
  auto text = ctx.tokenizer->decode(ids);
  if (!text.ok()) return send_error(res, kP, 400, text.message(), "tokens");
  send_json(res, {{"content", *text}, {"prompt", *text}});
}

}  // namespace

void register_openai(httplib::Server& http, ServerContext& ctx) {
  http.Post("/tokenize", [&ctx](const httplib::Request& q, httplib::Response& s) {
    handle_tokenize(ctx, q, s);
  });
  http.Post("/detokenize", [&ctx](const httplib::Request& q, httplib::Response& s) {
    handle_detokenize(ctx, q, s);
  });
  http.Post("/v1/chat/completions",
            [&ctx](const httplib::Request& q, httplib::Response& s) { handle_chat(ctx, q, s); });
  http.Post("/chat/completions",
            [&ctx](const httplib::Request& q, httplib::Response& s) { handle_chat(ctx, q, s); });
  http.Post("/v1/completions", [&ctx](const httplib::Request& q, httplib::Response& s) {
    handle_completion(ctx, q, s);
  });
  http.Post("/completions", [&ctx](const httplib::Request& q, httplib::Response& s) {
    handle_completion(ctx, q, s);
  });
  // The served model as OpenAI's and Anthropic's model objects both read it (one object carries
  // both sets of fields: each SDK ignores the other's).
  auto model_json = [&ctx] {
    return Json{{"id", ctx.model.id},
                {"object", "model"},
                {"created", unix_seconds()},
                {"owned_by", "tempo9"},
                {"type", "model"},
                {"display_name", ctx.model.id},
                {"created_at", rfc3339_now()},
                {"meta", {{"n_ctx", ctx.model.n_ctx}, {"n_params", ctx.model.n_params}}}};
  };
  auto models = [&ctx, model_json](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"object", "list"},
                    {"data", Json::array({model_json()})},
                    {"has_more", false},
                    {"first_id", ctx.model.id},
                    {"last_id", ctx.model.id}});
  };
  http.Get("/v1/models", models);
  http.Get("/models", models);
  // One model by id (both SDKs' models.retrieve); any id is the served model unless strict names.
  http.Get(R"(/v1/models/(.+))",
           [&ctx, model_json](const httplib::Request& q, httplib::Response& res) {
             const Protocol p = q.has_header("anthropic-version") ? Protocol::kAnthropic : kP;
             if (!check_model_name(ctx, q.matches[1], p, res)) return;
             send_json(res, model_json());
           });
}

}  // namespace t9::server::api
