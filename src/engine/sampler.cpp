#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

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

bool make_logit_edits(const SamplingParams& params, int n_vocab, std::span<const TokenId> prompt,
                      std::span<const TokenId> generated, int row, bool with_bias,
                      std::vector<LogitEdit>* out) {
  std::unordered_map<TokenId, LogitEdit> m;
  auto edit = [&](TokenId t) -> LogitEdit& {
    LogitEdit& e = m[t];
    e.row = row, e.token = t;
    return e;
  };
  if (with_bias) {
    for (auto [tok, bias] : params.logit_bias) {
      if (tok < 0 || tok >= n_vocab) continue;
      LogitEdit& e = edit(tok);
      if (e.has_add != 0) return false;
      e.add = bias, e.has_add = 1;
    }
  }
  if (params.repetition_penalty != 1.0f) {
    // Each distinct token once, however often it occurs (CTRL, as in HF transformers).
    for (std::span<const TokenId> part : {prompt, generated})
      for (TokenId t : part)
        if (t >= 0 && t < n_vocab) edit(t).rep = params.repetition_penalty;
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    std::unordered_map<TokenId, int> counts;
    for (TokenId t : generated) counts[t]++;
    for (auto [t, c] : counts) {
      if (t < 0 || t >= n_vocab) continue;
      edit(t).sub = params.frequency_penalty * static_cast<float>(c) + params.presence_penalty;
    }
  }
  const size_t first = out->size();
  for (const auto& [t, e] : m) out->push_back(e);
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
            [](const LogitEdit& a, const LogitEdit& b) { return a.token < b.token; });
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
  make_logit_edits(params, n_vocab, prompt, generated, 0, /*with_bias=*/false, &edits);
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
  const int n = static_cast<int>(raw_logits.size());
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float l : raw_logits) max_logit = std::max(max_logit, l);
  double sum = 0;
  for (float l : raw_logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const float lse = max_logit + static_cast<float>(std::log(sum));
  *logprob = raw_logits[token] - lse;
  top->clear();
  n_top = std::min(n_top, n);
  if (n_top <= 0) return;
  std::vector<TokenId> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), [&](TokenId a, TokenId b) {
    return raw_logits[a] > raw_logits[b] || (raw_logits[a] == raw_logits[b] && a < b);
  });
  for (int i = 0; i < n_top; ++i) top->push_back({ids[i], raw_logits[ids[i]] - lse});
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
