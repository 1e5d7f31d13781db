// Request pieces shared by the protocol adapters: sampling fields, stop strings, the model name
// check, and the usage numbers every protocol reports.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_util.h"
#include "server/server_context.h"

namespace t9::server::api {

// Reads temperature, top_p, top_k, min_p, seed, presence_penalty, frequency_penalty,
// repetition_penalty (repeat_penalty for Ollama) from `obj` into spec.sampling; logit_bias as
// {"token id": bias}.
void read_sampling(FieldReader& r, const Json& obj, const std::string& path, GenerationSpec& spec);

// OpenAI's reasoning effort (chat's `reasoning_effort`, the Responses API's `reasoning.effort`):
// none / minimal turn the template's thinking off (enable_thinking false), low / medium / high /
// xhigh on; the value also reaches the template as `reasoning_effort` (gpt-oss templates read it).
void read_reasoning_effort(FieldReader& r, const Json& obj, const std::string& path,
                           const char* key, Json& kwargs);

// Tool-call arguments as templates want them: an object (they print it with tojson, as in
// llama.cpp), parsed from a JSON string; anything else (or a string that is not JSON) as given.
Json arguments_object(const Json& args);

// A message's content value (present, not null) as text: a string, or an array of parts whose
// type is one of `text_types` (their "text", joined) or, with `refusals`, "refusal" (its
// "refusal"). Other parts (images, files) fail naming the part. path: the content field's.
// separator goes between parts (Anthropic joins text blocks with "\n", OpenAI concatenates).
std::optional<std::string> content_parts_text(FieldReader& r, const Json& content,
                                              const std::string& path,
                                              std::initializer_list<std::string_view> text_types,
                                              bool refusals, std::string_view separator = "");

// "stop": a string or an array of strings (at most 16, each non-empty).
void read_stop(FieldReader& r, const Json& obj, const std::string& path, const char* key,
               std::vector<std::string>& out);

// False (and a 404 in the protocol's shape) when strict model names are on and `name` is not the
// served model. Otherwise any name is served by the loaded model, as llama-server does.
bool check_model_name(const ServerContext& ctx, const std::string& name, Protocol p,
                      httplib::Response& res);

// Starts the generation, or answers the error in the protocol's shape and returns null: 503 with
// Retry-After when more than config.max_queued requests already wait for the engine (overload),
// 400 when the request cannot be served (e.g. the prompt does not fit the context).
std::shared_ptr<Generation> start_generation(ServerContext& ctx, GenerationSpec spec, Protocol p,
                                             httplib::Response& res);

// 400 with the reader's error in the protocol's shape.
void send_bad_request(httplib::Response& res, Protocol p, const FieldReader& r);

// Tokens' log-probabilities as OpenAI's choices[].logprobs.content and Ollama's logprobs share
// them: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], bytes the token's
// UTF-8 bytes (a token may end inside a character); with_ids adds each token's id (llama-server's
// completion_probabilities).
Json token_logprobs_json(const std::vector<TokenLogprob>& lps, bool with_ids = false);

void register_openai(httplib::Server& http, ServerContext& ctx);
void register_responses(httplib::Server& http, ServerContext& ctx);  // /v1/responses
void register_anthropic(httplib::Server& http, ServerContext& ctx);
void register_ollama(httplib::Server& http, ServerContext& ctx);
void register_llama_native(httplib::Server& http, ServerContext& ctx);  // /completion, /props

}  // namespace t9::server::api
