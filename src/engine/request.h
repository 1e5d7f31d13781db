// GenerateRequest (what an HTTP thread hands the engine) and TokenEvent (what comes back, one per
// generated token plus a final one). Protocol adapters translate to and from these; the engine
// never sees JSON or text.
//
// Stop strings: the engine works on token ids only (it must not depend on the tokenizer), so it
// checks stop token ids and max_tokens itself, and calls `stop_hook` for every generated token.
// The HTTP layer implements stop strings inside that hook with its streaming detokenizer: the
// hook sees every token in order (also across token boundaries and across preemptions, which
// never replay tokens), returns true once the text so far contains a stop string, and the HTTP
// layer trims the stop string (and holds back partial matches) from the text it streams.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "engine/token_constraint.h"

namespace t9::engine {

using TokenId = int32_t;

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax after bias and penalties)
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // 1 = off; keeps the smallest set with cumulative p >= top_p
  float min_p = 0.0f;               // 0 = off; keeps tokens with p >= min_p * max p
  float repetition_penalty = 1.0f;  // 1 = off; CTRL style over prompt + generated tokens
  float presence_penalty = 0.0f;    // OpenAI style over generated tokens
  float frequency_penalty = 0.0f;   // OpenAI style over generated tokens
  std::vector<std::pair<TokenId, float>> logit_bias;  // added to the raw logit
  // Per-request RNG seed. Unset: derived from the request id (still reproducible per request).
  std::optional<uint64_t> seed;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

struct TopLogprob {
  TokenId token = -1;
  float logprob = 0.0f;
};

struct Usage {
  int n_prompt_tokens = 0;
  int n_cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache (first admission)
  int n_generated_tokens = 0;
};

// One generated token, or (token == -1) a finish without a token (cancel, error). The last event
// of a request has finish != kNone. A stop token id is reported in `token` with finish == kStop;
// the HTTP layer does not render it.
struct TokenEvent {
  uint64_t request_id = 0;
  TokenId token = -1;
  float logprob = 0.0f;                  // log p(token) under the raw model distribution
  std::vector<TopLogprob> top_logprobs;  // [n_top_logprobs], most likely first
  FinishReason finish = FinishReason::kNone;
  std::string error;  // set when finish == kError
  Usage usage;        // running totals for this request
};

// Called on the engine thread: must be quick and must not block (push to a queue).
using EventCallback = std::function<void(const TokenEvent&)>;
// Called on the engine thread once per generated token, in order; true = finish with kStop.
using StopHook = std::function<bool(TokenId token)>;

struct GenerateRequest {
  std::vector<TokenId> prompt;  // [n_prompt], at least one token
  SamplingParams sampling;
  int max_tokens = 256;  // generated tokens, >= 1
  std::vector<TokenId> stop_token_ids;
  StopHook stop_hook;      // optional: stop strings (see the file comment)
  bool logprobs = false;   // fill TokenEvent::logprob
  int n_top_logprobs = 0;  // fill TokenEvent::top_logprobs with this many (0..20)
  // Structured output: only tokens it allows are sampled, and the request ends once it is
  // complete. Null: unconstrained. Used on the engine thread only.
  std::shared_ptr<TokenConstraint> constraint;
  // Extra key for prefix-cache hashing: requests share cached blocks only with equal salts
  // (LoRA adapter id, image ids, a tenant's cache namespace).
  uint64_t cache_salt = 0;
  // The HTTP thread sets it (client went away); the engine frees the blocks within one step.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  EventCallback on_event;
};

// Rejects requests the engine cannot serve; messages name the field and the reason.
// max_context_tokens bounds prompt + max_tokens.
Status validate_request(const GenerateRequest& req, int n_vocab, int max_context_tokens);

}  // namespace t9::engine
