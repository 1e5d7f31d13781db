#include "server/api/common.h"

#include <algorithm>

namespace t9::server::api {

void read_sampling(FieldReader& r, const Json& obj, const std::string& path, GenerationSpec& spec) {
  auto& s = spec.sampling;
  if (auto v = r.number(obj, path, "temperature", 0.0, 100.0))
    s.temperature = static_cast<float>(*v);
  if (auto v = r.number(obj, path, "top_p", 0.0, 1.0)) s.top_p = static_cast<float>(*v);
  if (auto v = r.integer(obj, path, "top_k", 0, 1 << 20)) s.top_k = static_cast<int>(*v);
  if (auto v = r.number(obj, path, "min_p", 0.0, 1.0)) s.min_p = static_cast<float>(*v);
  if (auto v = r.integer(obj, path, "seed", INT64_MIN, INT64_MAX))
    s.seed = static_cast<uint64_t>(*v);
  if (auto v = r.number(obj, path, "presence_penalty", -2.0, 2.0))
    s.presence_penalty = static_cast<float>(*v);
  if (auto v = r.number(obj, path, "frequency_penalty", -2.0, 2.0))
    s.frequency_penalty = static_cast<float>(*v);
  if (auto v = r.number(obj, path, "repetition_penalty", 0.0, 10.0))
    s.repetition_penalty = static_cast<float>(*v);
  if (auto v = r.number(obj, path, "repeat_penalty", 0.0, 10.0))
    s.repetition_penalty = static_cast<float>(*v);
  if (auto v = r.boolean(obj, path, "ignore_eos")) spec.ignore_eos = *v;
  if (const Json* bias = r.object(obj, path, "logit_bias")) {
    for (const auto& [k, v] : bias->items()) {
      const std::string p = FieldReader::join(FieldReader::join(path, "logit_bias"), k);
      char* end = nullptr;
      const long id = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0) {
        r.fail(p, "keys must be token ids");
        return;
      }
      if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100) {
        r.fail(p, "bias must be a number in [-100, 100]");
        return;
      }
      s.logit_bias.emplace_back(static_cast<engine::TokenId>(id), v.get<float>());
    }
  }
}

void read_stop(FieldReader& r, const Json& obj, const std::string& path, const char* key,
               std::vector<std::string>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  const std::string p = FieldReader::join(path, key);
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) out.push_back(it->get<std::string>());
    return;
  }
  if (!it->is_array()) return r.fail(p, "expected a string or an array of strings");
  if (it->size() > 16) return r.fail(p, "at most 16 stop strings");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& s = (*it)[i];
    if (!s.is_string()) return r.fail(FieldReader::index(p, i), "expected a string");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
}

bool check_model_name(const ServerContext& ctx, const std::string& name, Protocol p,
                      httplib::Response& res) {
  if (!ctx.config.strict_model_names || name.empty() || name == ctx.model.id) return true;
  send_error(res, p, 404,
             "model '" + name + "' not found; this server serves '" + ctx.model.id + "'", "model");
  return false;
}

std::shared_ptr<Generation> start_generation(ServerContext& ctx, GenerationSpec spec, Protocol p,
                                             httplib::Response& res) {
  if (ctx.engine->stats().n_waiting >= ctx.config.max_queued) {
    send_error(res, p, 503,
               fmt::format("server overloaded: {} requests are waiting; retry later",
                           ctx.config.max_queued));
    return nullptr;
  }
  auto gen = Generation::start(ctx, std::move(spec));
  if (!gen.ok()) {
    send_error(res, p, 400, gen.message());
    return nullptr;
  }
  return std::move(gen).value();
}

void send_bad_request(httplib::Response& res, Protocol p, const FieldReader& r) {
  send_error(res, p, 400, r.error(), r.param());
}

Json token_logprobs_json(const std::vector<TokenLogprob>& lps, bool with_ids) {
  const auto entry = [with_ids](const std::string& t, float l, engine::TokenId id) {
    Json e = {
        {"token", t}, {"logprob", l}, {"bytes", Json(std::vector<uint8_t>(t.begin(), t.end()))}};
    if (with_ids) e["id"] = id;
    return e;
  };
  Json content = Json::array();
  for (const auto& lp : lps) {
    Json top = Json::array();
    for (size_t k = 0; k < lp.top.size(); ++k)
      top.push_back(
          entry(lp.top[k].first, lp.top[k].second, k < lp.top_ids.size() ? lp.top_ids[k] : -1));
    Json e = entry(lp.text, lp.logprob, lp.id);
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return content;
}

void read_reasoning_effort(FieldReader& r, const Json& obj, const std::string& path,
                           const char* key, Json& kwargs) {
  auto effort = r.str(obj, path, key);
  if (!r.ok() || !effort) return;
  if (*effort == "none" || *effort == "minimal") {
    kwargs["enable_thinking"] = false;
  } else if (*effort == "low" || *effort == "medium" || *effort == "high" || *effort == "xhigh") {
    kwargs["enable_thinking"] = true;
  } else {
    return r.fail(FieldReader::join(path, key),
                  "must be none, minimal, low, medium, high or xhigh");
  }
  kwargs["reasoning_effort"] = *effort;
}

std::optional<std::string> content_parts_text(FieldReader& r, const Json& content,
                                              const std::string& path,
                                              std::initializer_list<std::string_view> text_types,
                                              bool refusals, std::string_view separator) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    r.fail(path, "expected a string or an array of content parts");
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pp = FieldReader::index(path, i);
    if (!part.is_object()) {
      r.fail(pp, "expected a content part object");
      return std::nullopt;
    }
    auto type = r.str(part, pp, "type");
    if (!r.ok()) return std::nullopt;
    const std::string_view ty = type.value_or("");
    if (!text.empty()) text += separator;
    if (std::find(text_types.begin(), text_types.end(), ty) != text_types.end()) {
      auto t = r.str(part, pp, "text");
      if (!t) r.fail(FieldReader::join(pp, "text"), "is required");
      if (!r.ok()) return std::nullopt;
      text += *t;
    } else if (refusals && ty == "refusal") {
      text += r.str(part, pp, "refusal").value_or("");
    } else {
      r.fail(FieldReader::join(pp, "type"),
             "content part type '" + std::string(ty) + "' is not supported (text parts only)");
      return std::nullopt;
    }
  }
  return text;
}

Json arguments_object(const Json& args) {
  if (!args.is_string()) return args;
  Json parsed = Json::parse(args.get<std::string>(), nullptr, false);
  return parsed.is_discarded() ? args : parsed;
}

}  // namespace t9::server::api
