// llama-server's own endpoints (not OpenAI's): POST /completion, the completion API that
// llama.cpp's web UI, editor plugins and scripts call, and GET /props. Errors use the OpenAI
// shape, as llama-server's do. Accepted and ignored (one engine, one cache): cache_prompt,
// id_slot, samplers, n_keep, t_max_predict_ms, timings_per_token.
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sampling.h"
#include "server/api/common.h"
#include "server/prompt_builder.h"

namespace t9::server::api {
namespace {

constexpr Protocol kP = Protocol::kOpenAI;
using Clock = std::chrono::steady_clock;

// prompt: a string (tokenized as a prompt: BOS where the vocabulary asks for it), or token ids
// and strings mixed ([12, 34, "text", 56]).
void read_prompt(FieldReader& r, const ServerContext& ctx, const Json& body,
                 std::vector<engine::TokenId>& out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return r.fail("prompt", "is required");
  const auto add_text = [&](const std::string& text, bool first) {
    tok::EncodeOptions opt;
    opt.add_special = first;  // BOS only when the prompt opens with text, as llama-server
    auto ids = ctx.tokenizer->encode(text, opt);
    if (!ids.ok()) return r.fail("prompt", ids.message());
    out.insert(out.end(), ids->begin(), ids->end());
  };
  if (it->is_string()) return add_text(it->get<std::string>(), true);
  if (!it->is_array() || it->empty())
    return r.fail("prompt", "expected a string or an array of token ids and strings");
  for (size_t i = 0; i < it->size() && r.ok(); ++i) {
    const Json& e = (*it)[i];
    if (e.is_string()) {
      add_text(e.get<std::string>(), i == 0);
    } else if (e.is_number_integer() && e.get<int64_t>() >= 0 &&
               e.get<int64_t>() < static_cast<int64_t>(ctx.tokenizer->n_tokens())) {
      out.push_back(e.get<engine::TokenId>());
    } else {
      r.fail(FieldReader::index("prompt", i), "not a token id of this model or a string");
    }
  }
}

// logit_bias: OpenAI's {"id": bias} or llama-server's [[id, bias], ...] (bias false: never).
void read_logit_bias(FieldReader& r, const Json& body, GenerationSpec& spec) {
  auto it = body.find("logit_bias");
  if (it == body.end() || !it->is_array()) return;  // objects: read_sampling
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& e = (*it)[i];
    const std::string p = FieldReader::index("logit_bias", i);
    // (The engine checks the id against the vocabulary, as for OpenAI's object form.)
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || e[0].get<int64_t>() < 0 ||
        e[0].get<int64_t>() > INT32_MAX)
      return r.fail(p, "expected [token id, bias]");
    float bias = 0.0f;
    if (e[1].is_boolean() && !e[1].get<bool>())
      bias = -100.0f;  // false: the token is never drawn (OpenAI's -100 bans it too)
    else if (e[1].is_number() && e[1].get<double>() >= -100 && e[1].get<double>() <= 100)
      bias = e[1].get<float>();
    else
      return r.fail(p, "bias must be a number in [-100, 100] or false");
    spec.sampling.logit_bias.emplace_back(e[0].get<engine::TokenId>(), bias);
  }
}

const char* stop_type(Finish f) {
  switch (f) {
    case Finish::kLength:
      return "limit";
    case Finish::kStopString:
      return "word";
    case Finish::kStop:
      return "eos";
    default:
      return "none";
  }
}

struct Request {
  std::string model;
  int n_probs = 0;
  bool return_tokens = false;
  Json settings;  // generation_settings
  Clock::time_point t0 = Clock::now();
};

// The final object: the whole reply (non-streaming) or the stream's last event, content "" there.
Json final_json(const Request& q, const GenOutput& out, const Generation& g,
                const std::string& content, const std::vector<engine::TokenId>& tokens,
                const std::string& prompt_text) {
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - q.t0).count();
  const double prompt_ms = g.ttft_ms(), gen_ms = std::max(0.0, total_ms - prompt_ms);
  const int n_gen = out.usage.n_generated_tokens;
  const int n_eval = out.usage.n_prompt_tokens - out.usage.n_cached_prompt_tokens;
  Json timings = {{"cache_n", out.usage.n_cached_prompt_tokens},
                  {"prompt_n", n_eval},
                  {"prompt_ms", prompt_ms},
                  {"prompt_per_token_ms", n_eval > 0 ? prompt_ms / n_eval : 0.0},
                  {"prompt_per_second", prompt_ms > 0 ? 1e3 * n_eval / prompt_ms : 0.0},
                  {"predicted_n", n_gen},
                  {"predicted_ms", gen_ms},
                  {"predicted_per_token_ms", n_gen > 0 ? gen_ms / n_gen : 0.0},
                  {"predicted_per_second", gen_ms > 0 ? 1e3 * n_gen / gen_ms : 0.0}};
  return {{"index", 0},
          {"content", content},
          {"tokens", q.return_tokens ? Json(tokens) : Json::array()},
          {"id_slot", 0},
          {"stop", true},
          {"model", q.model},
          {"tokens_predicted", n_gen},
          {"tokens_evaluated", out.usage.n_prompt_tokens},
          {"generation_settings", q.settings},
          {"prompt", prompt_text},
          {"has_new_line", content.find('\n') != std::string::npos},
          {"truncated", false},
          {"stop_type", stop_type(out.finish)},
          {"stopping_word", out.finish == Finish::kStopString ? out.stop_string : ""},
          {"tokens_cached", out.usage.n_cached_prompt_tokens},
          {"timings", timings}};
}

// SSE events of llama-server's stream: {content, tokens, stop: false, ...} per batch of tokens,
// then the final object; no [DONE].
class NativeStream final : public StreamFormatter {
 public:
  NativeStream(Request q, std::shared_ptr<Generation> g, std::string prompt_text)
      : q_(std::move(q)), gen_(std::move(g)), prompt_text_(std::move(prompt_text)) {}
  std::string keepalive() override { return ": keepalive\n\n"; }
  std::string on_output(const GenOutput& out) override {
    std::string text;
    for (const auto& e : out.events) text += e.text;
    n_gen_ += static_cast<int>(out.tokens.size());
    pending_.insert(pending_.end(), out.logprobs.begin(), out.logprobs.end());
    std::string s;
    if (!text.empty() || !out.tokens.empty()) {
      Json j = {{"index", 0},
                {"content", text},
                {"tokens", out.tokens},
                {"stop", false},
                {"id_slot", 0},
                {"tokens_predicted", n_gen_},
                {"tokens_evaluated", gen_->n_prompt_tokens()}};
      if (q_.n_probs > 0 && !pending_.empty()) {
        j["completion_probabilities"] = token_logprobs_json(pending_, /*with_ids=*/true);
        pending_.clear();
      }
      s += event(j);
    }
    if (out.finish == Finish::kNone) return s;
    if (out.finish == Finish::kError)
      return s +
             event({{"error", {{"code", 500}, {"message", out.error}, {"type", "server_error"}}}});
    return s + event(final_json(q_, out, *gen_, "", {}, prompt_text_));
  }

 private:
  static std::string event(const Json& j) {
    return "data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  }
  Request q_;
  std::shared_ptr<Generation> gen_;
  std::string prompt_text_;
  int n_gen_ = 0;
  std::vector<TokenLogprob> pending_;
};

void handle_completion(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  Request q;
  q.model = r.str(*body, "", "model").value_or(ctx.model.id);
  GenerationSpec spec;
  read_prompt(r, ctx, *body, spec.prompt);
  // llama-server's sampling defaults, then the request's fields (read_sampling: temperature,
  // top_k, top_p, min_p, seed, penalties, ignore_eos, logit_bias as an object).
  spec.sampling.temperature = 0.8f, spec.sampling.top_k = 40, spec.sampling.top_p = 0.95f;
  spec.sampling.min_p = 0.05f;
  read_sampling(r, *body, "", spec);
  read_logit_bias(r, *body, spec);
  read_stop(r, *body, "", "stop", spec.stop);
  spec.max_tokens = ctx.config.default_max_tokens;
  if (auto n = r.integer(*body, "", "n_predict", -1, 1 << 24)) {
    if (*n == 0) r.fail("n_predict", "must be positive, or -1 (no limit)");
    spec.max_tokens = *n < 0 ? 1 << 24 : static_cast<int>(*n);  // -1: until the context is full
  }
  q.n_probs = static_cast<int>(r.integer(*body, "", "n_probs", 0, kMaxTopLogprobs).value_or(0));
  if (q.n_probs > 0) spec.n_top_logprobs = q.n_probs;
  q.return_tokens = r.boolean(*body, "", "return_tokens").value_or(false);
  const bool stream = r.boolean(*body, "", "stream").value_or(false);
  if (auto g = r.str(*body, "", "grammar"); g && !g->empty())
    spec.format = {OutputFormat::Kind::kGbnf, Json(*g), "grammar", {}};
  if (const Json* schema = r.object(*body, "", "json_schema")) {
    if (spec.format.kind != OutputFormat::Kind::kText)
      r.fail("json_schema", "give either grammar or json_schema, not both");
    else
      spec.format = {OutputFormat::Kind::kJsonSchema, *schema, "json_schema", {}};
  }
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, q.model, kP, res)) return;
  const auto& s = spec.sampling;
  q.settings = {{"n_predict", spec.max_tokens},
                {"temperature", s.temperature},
                {"top_k", s.top_k},
                {"top_p", s.top_p},
                {"min_p", s.min_p},
                {"repeat_penalty", s.repetition_penalty},
                {"presence_penalty", s.presence_penalty},
                {"frequency_penalty", s.frequency_penalty},
                {"n_probs", q.n_probs},
                {"ignore_eos", spec.ignore_eos},
                {"stop", spec.stop},
                {"n_ctx", ctx.model.n_ctx},
                {"model", q.model}};
  auto prompt_text = ctx.tokenizer->decode(spec.prompt);
  spec.protocol = "llama";
  std::shared_ptr<Generation> g = start_generation(ctx, std::move(spec), kP, res);
  if (!g) return;
  const std::string prompt = prompt_text.ok() ? *prompt_text : std::string();
  if (stream)
    return stream_generation(res, "text/event-stream", g,
                             std::make_shared<NativeStream>(std::move(q), g, prompt));
  GenOutput out = collect_generation(*g, nullptr);
  if (out.finish == Finish::kError) return send_error(res, kP, 500, out.error);
  std::string content;
  for (const auto& e : out.events) content += e.text;
  Json j = final_json(q, out, *g, content, out.tokens, prompt);
  if (q.n_probs > 0)
    j["completion_probabilities"] = token_logprobs_json(out.logprobs, /*with_ids=*/true);
  send_json(res, j);
}

}  // namespace

void register_llama_native(httplib::Server& http, ServerContext& ctx) {
  http.Post("/completion", [&ctx](const httplib::Request& q, httplib::Response& s) {
    handle_completion(ctx, q, s);
  });
  http.Get("/props", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(
        res,
        {{"default_generation_settings",
          {{"n_ctx", ctx.model.n_ctx}, {"params", {{"n_predict", ctx.config.default_max_tokens}}}}},
         {"total_slots", ctx.engine != nullptr ? ctx.engine->config().scheduler.max_seqs : 1},
         {"model_alias", ctx.model.id},
         {"model_path", ctx.model.file_path},
         {"chat_template", ctx.model.chat_template_source},
         {"modalities", {{"vision", false}, {"audio", false}}},
         {"build_info", "tempo9"}});
  });
}

}  // namespace t9::server::api
