// Ollama adapter: POST /api/chat and /api/generate (NDJSON streams by default, stream:false for one
// object), GET /api/tags, POST /api/show, GET /api/version, GET /api/ps. `format` (structured
// output), `logprobs` / `top_logprobs` (a top-level `logprobs` array per line, as Ollama 0.12.11+
// sends it), `keep_alive` and options.num_ctx are accepted (the context is the server's).
#include <httplib.h>

#include <chrono>
#include <vector>

#include "core/sampling.h"
#include "server/api/common.h"
#include "server/prompt_builder.h"

namespace t9::server::api {
namespace {

constexpr Protocol kP = Protocol::kOllama;
using Clock = std::chrono::steady_clock;

// format: "json" (any JSON object), a JSON schema, or "" / absent (free text).
void read_format(FieldReader& r, const Json& body, GenerationSpec& spec) {
  auto it = body.find("format");
  if (it == body.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()))
    return;
  if (it->is_string() && it->get<std::string>() == "json")
    spec.format.kind = OutputFormat::Kind::kJsonObject;
  else if (it->is_object())
    spec.format = {OutputFormat::Kind::kJsonSchema, *it, "format", {}};
  else
    r.fail("format", "must be \"json\" or a JSON schema object");
}

void read_options(FieldReader& r, const Json& body, GenerationSpec& spec, int default_max) {
  spec.max_tokens = default_max;
  read_format(r, body, spec);
  const Json* o = r.object(body, "", "options");
  if (!o) return;
  read_sampling(r, *o, "options", spec);
  read_stop(r, *o, "options", "stop", spec.stop);
  if (auto n = r.integer(*o, "options", "num_predict", -2, 1 << 24)) {
    if (*n == 0)
      r.fail("options.num_predict", "must be positive, or -1 (no limit)");
    else if (*n > 0)
      spec.max_tokens = static_cast<int>(*n);
    else
      spec.max_tokens = 1 << 24;  // -1 / -2: until the context is full (clamped by Generation)
  }
  r.integer(*o, "options", "num_ctx", 1, 1 << 24);
}

// logprobs (bool) and top_logprobs (0..20): with logprobs, each generated token's log-probability
// and its top_logprobs most likely alternatives; top_logprobs alone asks for nothing, as in Ollama.
void read_logprobs(FieldReader& r, const Json& body, GenerationSpec& spec) {
  const bool on = r.boolean(body, "", "logprobs").value_or(false);
  const auto top = r.integer(body, "", "top_logprobs", 0, kMaxTopLogprobs).value_or(0);
  spec.n_top_logprobs = on ? static_cast<int>(top) : -1;
}

// Ollama messages -> template messages.
Json read_messages(FieldReader& r, const Json& body) {
  Json out = Json::array();
  const Json* msgs = r.array(body, "", "messages");
  if (!msgs) return out;
  for (size_t i = 0; i < msgs->size() && r.ok(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string p = FieldReader::index("messages", i);
    if (!m.is_object()) {
      r.fail(p, "expected an object");
      break;
    }
    auto role = r.str(m, p, "role");
    auto content = r.str(m, p, "content");
    if (!role) r.require(m, p, "role");
    if (!r.ok()) break;
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      r.fail(FieldReader::join(p, "role"), "must be system, user, assistant or tool");
      break;
    }
    if (const Json* imgs = r.array(m, p, "images"); imgs && !imgs->empty()) {
      r.fail(FieldReader::join(p, "images"), "images are not supported by this model");
      break;
    }
    Json msg = {{"role", *role}, {"content", content.value_or("")}};
    if (auto th = r.str(m, p, "thinking")) msg["reasoning_content"] = *th;
    if (auto tn = r.str(m, p, "tool_name")) msg["name"] = *tn;
    if (const Json* calls = r.array(m, p, "tool_calls")) {
      Json tc = Json::array();
      for (const auto& c : *calls) {
        const Json fn = c.value("function", Json::object());
        tc.push_back({{"type", "function"},
                      {"function",
                       {{"name", fn.value("name", "")},
                        {"arguments", fn.value("arguments", Json::object())}}}});
      }
      msg["tool_calls"] = tc;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void read_think(FieldReader& r, const Json& body, ChatInput& in) {
  auto it = body.find("think");
  if (it == body.end() || it->is_null()) return;
  if (it->is_boolean())
    in.kwargs["enable_thinking"] = it->get<bool>();
  else if (it->is_string())
    in.kwargs["enable_thinking"] = it->get<std::string>() != "false";
  else
    r.fail("think", "expected a boolean");
}

struct Timing {
  Clock::time_point t0 = Clock::now();
};

Json done_fields(const GenOutput& out, const Generation& g, const Timing& t) {
  const auto total_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t.t0).count();
  const int64_t prompt_ns = static_cast<int64_t>(g.ttft_ms() * 1e6);
  return {{"done", true},
          {"done_reason", out.finish == Finish::kLength ? "length" : "stop"},
          {"total_duration", total_ns},
          {"load_duration", 0},
          {"prompt_eval_count", out.usage.n_prompt_tokens},
          {"prompt_eval_duration", prompt_ns},
          {"eval_count", out.usage.n_generated_tokens},
          {"eval_duration", std::max<int64_t>(0, total_ns - prompt_ns)}};
}

// Text, thinking and complete tool calls of one poll, in Ollama's message shape.
struct Delta {
  std::string content, thinking;
  Json tool_calls = Json::array();
};

// One NDJSON line (or the whole non-streaming reply) without the done fields: /api/chat puts the
// text in message{content, thinking, tool_calls}, /api/generate in response/thinking.
Json chunk_json(const std::string& model, bool chat, const Delta& d) {
  Json j = {{"model", model}, {"created_at", rfc3339_now()}};
  if (chat) {
    Json msg = {{"role", "assistant"}, {"content", d.content}};
    if (!d.thinking.empty()) msg["thinking"] = d.thinking;
    if (!d.tool_calls.empty()) msg["tool_calls"] = d.tool_calls;
    j["message"] = msg;
  } else {
    j["response"] = d.content;
    if (!d.thinking.empty()) j["thinking"] = d.thinking;
  }
  return j;
}

class CallBuffer {
 public:
  void apply(const chat::ChatEvent& e, Delta& d) {
    using K = chat::ChatEvent::Kind;
    switch (e.kind) {
      case K::kContent:
        d.content += e.text;
        break;
      case K::kReasoning:
        d.thinking += e.text;
        break;
      case K::kToolCallStart:
        name_ = e.name;
        args_.clear();
        break;
      case K::kToolCallArgs:
        args_ += e.text;
        break;
      case K::kToolCallEnd: {
        Json a = Json::parse(args_, nullptr, false);
        d.tool_calls.push_back({{"function",
                                 {{"index", e.index},
                                  {"name", name_},
                                  {"arguments", a.is_discarded() ? Json::object() : a}}}});
        break;
      }
    }
  }

 private:
  std::string name_, args_;
};

class NdjsonStream final : public StreamFormatter {
 public:
  NdjsonStream(std::string model, bool chat, bool logprobs, std::shared_ptr<Generation> g)
      : model_(std::move(model)), chat_(chat), logprobs_(logprobs), gen_(std::move(g)) {}
  std::string on_output(const GenOutput& out) override {
    Delta d;
    for (const auto& e : out.events) calls_.apply(e, d);
    // A token's logprobs ride on the next line sent (one that adds no text yet waits).
    if (logprobs_) pending_.insert(pending_.end(), out.logprobs.begin(), out.logprobs.end());
    std::string s;
    if (!d.content.empty() || !d.thinking.empty() || !d.tool_calls.empty()) s += line(d, nullptr);
    if (out.finish == Finish::kNone) return s;
    if (out.finish == Finish::kError) return s + Json({{"error", out.error}}).dump() + "\n";
    return s + line(Delta{}, &out);
  }

 private:
  std::string line(const Delta& d, const GenOutput* fin) {
    Json j = chunk_json(model_, chat_, d);
    if (!pending_.empty()) {
      j["logprobs"] = token_logprobs_json(pending_);
      pending_.clear();
    }
    if (fin)
      j.update(done_fields(*fin, *gen_, timing_));
    else
      j["done"] = false;
    return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  std::string model_;
  bool chat_, logprobs_;
  std::shared_ptr<Generation> gen_;
  CallBuffer calls_;
  Timing timing_;
  std::vector<TokenLogprob> pending_;  // tokens whose logprobs no line has carried yet
};

void run(ServerContext& ctx, httplib::Response& res, GenerationSpec spec, const std::string& model,
         bool stream, bool chat) {
  spec.protocol = "ollama";
  const bool logprobs = spec.n_top_logprobs >= 0;
  Timing timing;
  std::shared_ptr<Generation> g = start_generation(ctx, std::move(spec), kP, res);
  if (!g) return;
  if (stream)
    return stream_generation(res, "application/x-ndjson", g,
                             std::make_shared<NdjsonStream>(model, chat, logprobs, g));
  GenOutput out = collect_generation(*g, nullptr);
  if (out.finish == Finish::kError) return send_error(res, kP, 500, out.error);
  Delta d;
  CallBuffer calls;
  for (const auto& e : out.events) calls.apply(e, d);
  Json j = chunk_json(model, chat, d);
  if (logprobs) j["logprobs"] = token_logprobs_json(out.logprobs);
  j.update(done_fields(out, *g, timing));
  send_json(res, j);
}

void handle_chat(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  r.require(*body, "", "model");
  const std::string model = r.str(*body, "", "model").value_or("");
  ChatInput in;
  in.messages = read_messages(r, *body);
  if (const Json* tools = r.array(*body, "", "tools"); tools && !tools->empty()) in.tools = *tools;
  read_think(r, *body, in);
  const bool stream = r.boolean(*body, "", "stream").value_or(true);
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, model, kP, res)) return;
  if (in.messages.empty()) {  // Ollama answers an empty chat by loading the model
    return send_json(res, {{"model", model},
                           {"created_at", rfc3339_now()},
                           {"message", {{"role", "assistant"}, {"content", ""}}},
                           {"done", true},
                           {"done_reason", "load"}});
  }
  auto spec = chat_generation_spec(ctx, in);
  if (!spec.ok()) return send_error(res, kP, 400, spec.message());
  read_options(r, *body, *spec, ctx.config.default_max_tokens);
  read_logprobs(r, *body, *spec);
  if (!r.ok()) return send_bad_request(res, kP, r);
  run(ctx, res, std::move(spec).value(), model, stream, /*chat=*/true);
}

void handle_generate(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  r.require(*body, "", "model");
  const std::string model = r.str(*body, "", "model").value_or("");
  const std::string prompt = r.str(*body, "", "prompt").value_or("");
  const std::string system = r.str(*body, "", "system").value_or("");
  const bool raw = r.boolean(*body, "", "raw").value_or(false);
  const bool stream = r.boolean(*body, "", "stream").value_or(true);
  if (const Json* imgs = r.array(*body, "", "images"); imgs && !imgs->empty())
    r.fail("images", "images are not supported by this model");
  ChatInput in;
  read_think(r, *body, in);
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, model, kP, res)) return;
  if (prompt.empty()) {
    return send_json(res, {{"model", model},
                           {"created_at", rfc3339_now()},
                           {"response", ""},
                           {"done", true},
                           {"done_reason", "load"}});
  }
  GenerationSpec spec;
  if (raw || !ctx.chat_template) {
    auto ids = tokenize_prompt(ctx, system.empty() ? prompt : system + "\n" + prompt);
    if (!ids.ok()) return send_error(res, kP, 400, ids.message());
    spec.prompt = std::move(ids).value();
  } else {
    if (!system.empty()) in.messages.push_back({{"role", "system"}, {"content", system}});
    in.messages.push_back({{"role", "user"}, {"content", prompt}});
    auto s = chat_generation_spec(ctx, in);
    if (!s.ok()) return send_error(res, kP, 400, s.message());
    spec = std::move(s).value();
  }
  read_options(r, *body, spec, ctx.config.default_max_tokens);
  read_logprobs(r, *body, spec);
  if (!r.ok()) return send_bad_request(res, kP, r);
  run(ctx, res, std::move(spec), model, stream, /*chat=*/false);
}

Json details(const ServerContext& ctx) {
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", ctx.model.architecture},
          {"families", Json::array({ctx.model.architecture})},
          {"parameter_size", ctx.model.parameter_size},
          {"quantization_level", ctx.model.quantization}};
}

std::string digest(const ServerContext& ctx) {
  return fmt::format("{:016x}{:016x}", std::hash<std::string>{}(ctx.model.file_path),
                     ctx.model.file_bytes);
}

}  // namespace

void register_ollama(httplib::Server& http, ServerContext& ctx) {
  http.Post("/api/chat",
            [&ctx](const httplib::Request& q, httplib::Response& s) { handle_chat(ctx, q, s); });
  http.Post("/api/generate", [&ctx](const httplib::Request& q, httplib::Response& s) {
    handle_generate(ctx, q, s);
  });
  http.Get("/api/tags", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"models", Json::array({{{"name", ctx.model.id},
                                             {"model", ctx.model.id},
                                             {"modified_at", rfc3339_now()},
                                             {"size", ctx.model.file_bytes},
                                             {"digest", digest(ctx)},
                                             {"details", details(ctx)}}})}});
  });
  http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"version", "0.12.0"}});
  });
  http.Get("/api/ps", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"models", Json::array({{{"name", ctx.model.id},
                                             {"model", ctx.model.id},
                                             {"size", ctx.model.file_bytes},
                                             {"digest", digest(ctx)},
                                             {"details", details(ctx)},
                                             {"expires_at", "2999-01-01T00:00:00Z"},
                                             {"size_vram", 0},
                                             {"context_length", ctx.model.n_ctx}}})}});
  });
  http.Post("/api/show", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::string err;
    auto body = parse_json_object(req.body, err);
    if (!body) return send_error(res, kP, 400, err);
    const std::string name = body->value("model", body->value("name", ""));
    if (name.empty()) return send_error(res, kP, 400, "model: is required", "model");
    if (!check_model_name(ctx, name, kP, res)) return;
    Json caps = Json::array({"completion"});
    if (ctx.tool_dialect != "none") caps.push_back("tools");
    if (ctx.model.chat_template_source.find("<think>") != std::string::npos)
      caps.push_back("thinking");
    send_json(res, {{"modelfile", ""},
                    {"parameters", ""},
                    {"template", ctx.model.chat_template_source},
                    {"details", details(ctx)},
                    {"model_info",
                     {{"general.architecture", ctx.model.architecture},
                      {"general.parameter_count", ctx.model.n_params},
                      {ctx.model.architecture + ".context_length", ctx.model.n_ctx}}},
                    {"capabilities", caps},
                    {"modified_at", rfc3339_now()}});
  });
}

}  // namespace t9::server::api
