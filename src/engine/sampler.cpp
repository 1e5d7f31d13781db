#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/argmax.h"
#include "core/check.h"
#include "core/sampling.h"

namespace t9::engine {

uint64_t Rng::next_u64() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Rng::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

std::vector<TokenId> distinct_tokens(std::span<const TokenId> tokens, int n_vocab) {
  std::vector<TokenId> d;
  d.reserve(tokens.size());
  for (TokenId t : tokens)
    if (t >= 0 && t < n_vocab) d.push_back(t);
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

bool make_logit_edits(const SamplingParams& params, const EditInputs& in,
                      std::vector<LogitEdit>* out, std::vector<PendingEdit>* pending) {
  const bool rep = params.repetition_penalty != 1.0f;
  const bool pf = params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f;
  // Plain sampling (the common case, every decode step) edits nothing: no scan of the output.
  if (!has_penalties(params) && (!in.with_bias || params.logit_bias.empty())) return true;
  // The subtraction for a generated token seen `count` times (the same expression for the
  // in-flight token's next count, so its bits are the host's once the token is known).
  auto sub_at = [&](int count) {
    return pf ? params.frequency_penalty * static_cast<float>(count) + params.presence_penalty
              : 0.0f;
  };
  const bool in_flight = in.input_in_flight >= 0 && (rep || pf);
  // The generated tokens with their counts, and the biased tokens: both short, sorted here.
  std::vector<std::pair<TokenId, int>> gen;
  if (rep || pf) {
    for (TokenId t : distinct_tokens(in.generated, in.n_vocab)) gen.push_back({t, 0});
    for (TokenId t : in.generated) {
      if (t < 0 || t >= in.n_vocab) continue;
      std::lower_bound(gen.begin(), gen.end(), std::pair<TokenId, int>{t, 0})->second++;
    }
  }
  std::vector<std::pair<TokenId, float>> bias;
  if (in.with_bias) {
    for (auto [tok, b] : params.logit_bias)
      if (tok >= 0 && tok < in.n_vocab) bias.push_back({tok, b});
    std::sort(bias.begin(), bias.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t i = 1; i < bias.size(); ++i)
      if (bias[i].first == bias[i - 1].first) return false;
  }
  // Merge the three sorted lists: one edit per token that any of them names (with its parts).
  size_t ip = 0, ig = 0, ib = 0;
  const size_t np = rep ? in.prompt_distinct.size() : 0;
  while (ip < np || ig < gen.size() || ib < bias.size()) {
    TokenId t = std::numeric_limits<TokenId>::max();
    if (ip < np) t = std::min(t, in.prompt_distinct[ip]);
    if (ig < gen.size()) t = std::min(t, gen[ig].first);
    if (ib < bias.size()) t = std::min(t, bias[ib].first);
    LogitEdit e;
    e.row = in.row, e.token = t;
    bool any = false;
    int count = 0;  // of t among the generated tokens
    if (ip < np && in.prompt_distinct[ip] == t) {
      e.rep = params.repetition_penalty, any = true;
      ++ip;
    }
    if (ig < gen.size() && gen[ig].first == t) {
      count = gen[ig].second;
      if (rep) e.rep = params.repetition_penalty, any = true;
      if (pf) e.sub = sub_at(count), any = true;
      ++ig;
    }
    if (ib < bias.size() && bias[ib].first == t) {
      e.add = bias[ib].second, e.has_add = 1, any = true;
      ++ib;
    }
    if (in_flight) e.sub_next = sub_at(count + 1);
    if (any) out->push_back(e);
  }
  if (in_flight && pending != nullptr)
    pending->push_back(
        {in.row, in.input_in_flight, rep ? params.repetition_penalty : 1.0f, sub_at(1)});
  return true;
}

void apply_bias_and_penalties(std::span<float> logits, const SamplingParams& params,
                              std::span<const TokenId> prompt, std::span<const TokenId> generated) {
  const int n_vocab = static_cast<int>(logits.size());
  for (auto [tok, bias] : params.logit_bias) {
    if (tok >= 0 && tok < n_vocab) logits[tok] += bias;
  }
  if (params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
      params.frequency_penalty == 0.0f)
    return;
  std::vector<LogitEdit> edits;
  const std::vector<TokenId> prompt_distinct = distinct_tokens(prompt, n_vocab);
  make_logit_edits(params, {n_vocab, prompt_distinct, generated, 0, /*with_bias=*/false}, &edits);
  for (const LogitEdit& e : edits) logits[e.token] = edited_logit(logits[e.token], e);
}

namespace {

TokenId argmax(std::span<const float> logits) {
  return static_cast<TokenId>(first_argmax(logits.data(), static_cast<int64_t>(logits.size())));
}

}  // namespace

std::vector<Candidate> truncate_candidates(std::span<const float> logits,
                                           const SamplingParams& params) {
  return t9::truncate_candidates(logits,
                                 {params.temperature, params.top_k, params.top_p, params.min_p});
}

void compute_logprobs(std::span<const float> raw_logits, TokenId token, int n_top, float* logprob,
                      std::vector<TopLogprob>* top) {
  n_top = std::clamp(n_top, 0, static_cast<int>(raw_logits.size()));
  std::vector<int32_t> ids(static_cast<size_t>(n_top));
  std::vector<float> lps(static_cast<size_t>(n_top));
  row_logprobs(raw_logits, token, n_top, logprob, ids.data(), lps.data());
  top->clear();
  for (int i = 0; i < n_top; ++i)
    top->push_back({ids[static_cast<size_t>(i)], lps[static_cast<size_t>(i)]});
}

bool argmax_suffices(const SamplingParams& params, bool want_logprobs, int n_top_logprobs) {
  return params.temperature == 0.0f && params.logit_bias.empty() &&
         params.repetition_penalty == 1.0f && params.presence_penalty == 0.0f &&
         params.frequency_penalty == 0.0f && !want_logprobs && n_top_logprobs == 0;
}

SampleResult sample_token(std::span<const float> raw_logits, const SamplingParams& params,
                          std::span<const TokenId> prompt, std::span<const TokenId> generated,
                          Rng& rng, bool want_logprobs, int n_top_logprobs) {
  const double u = params.temperature != 0.0f ? rng.uniform() : 0.0;
  return sample_token(raw_logits, params, prompt, generated, u, want_logprobs, n_top_logprobs);
}

SampleResult sample_token(std::span<const float> raw_logits, const SamplingParams& params,
                          std::span<const TokenId> prompt, std::span<const TokenId> generated,
                          double u, bool want_logprobs, int n_top_logprobs) {
  // Greedy without bias or penalties reads the raw row: no copy of the vocabulary (a 1 MB
  // copy per token on a 248k vocabulary, ~3% of a decode step on the H200).
  SampleResult r;
  if (argmax_suffices(params, false, 0)) {
    r.token = argmax(raw_logits);
    if (want_logprobs || n_top_logprobs > 0)
      compute_logprobs(raw_logits, r.token, n_top_logprobs, &r.logprob, &r.top_logprobs);
    return r;
  }
  std::vector<float> logits(raw_logits.begin(), raw_logits.end());
  apply_bias_and_penalties(logits, params, prompt, generated);
  r.token = params.temperature == 0.0f ? argmax(logits)
                                       : draw_candidate(truncate_candidates(logits, params), u);
  if (want_logprobs || n_top_logprobs > 0)
    compute_logprobs(raw_logits, r.token, n_top_logprobs, &r.logprob, &r.top_logprobs);
  return r;
}

}  // namespace t9::engine
