#include "engine/request.h"

#include <cmath>

#include "core/sampling.h"

namespace t9::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

namespace {

Status validate_sampling(const SamplingParams& s, int n_vocab) {
  if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature))
    return error("temperature: must be a finite number >= 0, got {}", s.temperature);
  if (s.top_k < 0) return error("top_k: must be >= 0, got {}", s.top_k);
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f))
    return error("top_p: must be in (0, 1], got {}", s.top_p);
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f))
    return error("min_p: must be in [0, 1], got {}", s.min_p);
  if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty))
    return error("repetition_penalty: must be > 0, got {}", s.repetition_penalty);
  if (!std::isfinite(s.presence_penalty))
    return error("presence_penalty: must be finite, got {}", s.presence_penalty);
  if (!std::isfinite(s.frequency_penalty))
    return error("frequency_penalty: must be finite, got {}", s.frequency_penalty);
  for (size_t i = 0; i < s.logit_bias.size(); ++i) {
    auto [tok, bias] = s.logit_bias[i];
    if (tok < 0 || tok >= n_vocab)
      return error("logit_bias[{}]: token id {} outside the vocabulary [0, {})", i, tok, n_vocab);
    if (std::isnan(bias)) return error("logit_bias[{}]: bias is NaN", i);
  }
  return {};
}

}  // namespace

Status validate_request(const GenerateRequest& req, int n_vocab, int max_context_tokens) {
  if (req.prompt.empty()) return error("prompt: must contain at least one token");
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    if (req.prompt[i] < 0 || req.prompt[i] >= n_vocab)
      return error("prompt[{}]: token id {} outside the vocabulary [0, {})", i, req.prompt[i],
                   n_vocab);
  }
  if (req.max_tokens < 1) return error("max_tokens: must be >= 1, got {}", req.max_tokens);
  int64_t n_total = static_cast<int64_t>(req.prompt.size()) + req.max_tokens;
  if (n_total > max_context_tokens)
    return error(
        "max_tokens: prompt ({} tokens) + max_tokens ({}) exceeds the context of {} tokens",
        req.prompt.size(), req.max_tokens, max_context_tokens);
  for (size_t i = 0; i < req.stop_token_ids.size(); ++i) {
    if (req.stop_token_ids[i] < 0 || req.stop_token_ids[i] >= n_vocab)
      return error("stop_token_ids[{}]: token id {} outside the vocabulary [0, {})", i,
                   req.stop_token_ids[i], n_vocab);
  }
  if (req.n_top_logprobs < 0 || req.n_top_logprobs > kMaxTopLogprobs)
    return error("top_logprobs: must be in [0, {}], got {}", kMaxTopLogprobs, req.n_top_logprobs);
  if (!req.cancelled) return error("cancelled: the cancellation flag must not be null");
  return validate_sampling(req.sampling, n_vocab);
}

}  // namespace t9::engine
