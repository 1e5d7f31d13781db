#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/argmax.h"
#include "core/check.h"

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

void apply_bias_and_penalties(std::span<float> logits, const SamplingParams& params,
                              std::span<const TokenId> prompt, std::span<const TokenId> generated) {
  const int n_vocab = static_cast<int>(logits.size());
  for (auto [tok, bias] : params.logit_bias) {
    if (tok >= 0 && tok < n_vocab) logits[tok] += bias;
  }
  if (params.repetition_penalty != 1.0f) {
    // Each distinct token seen once, however often it occurs (CTRL, as in HF transformers).
    std::vector<bool> seen(n_vocab, false);
    auto penalize = [&](TokenId t) {
      if (t < 0 || t >= n_vocab || seen[t]) return;
      seen[t] = true;
      float& l = logits[t];
      l = l > 0 ? l / params.repetition_penalty : l * params.repetition_penalty;
    };
    for (TokenId t : prompt) penalize(t);
    for (TokenId t : generated) penalize(t);
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    std::unordered_map<TokenId, int> counts;
    for (TokenId t : generated) counts[t]++;
    for (auto [t, c] : counts) {
      if (t < 0 || t >= n_vocab) continue;
      logits[t] -= params.frequency_penalty * static_cast<float>(c) + params.presence_penalty;
    }
  }
}

namespace {

bool by_logit_desc(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

void normalize(std::vector<Candidate>& c) {
  double sum = 0;
  for (const Candidate& x : c) sum += x.p;
  if (sum <= 0) return;
  for (Candidate& x : c) x.p = static_cast<float>(x.p / sum);
}

// p = exp(logit - max) / sum, the sum in double in the candidates' current order; every p is 0
// when all logits are -inf (all banned).
void softmax_in_place(std::vector<Candidate>& c) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c) max_logit = std::max(max_logit, x.logit);
  if (!std::isfinite(max_logit)) max_logit = 0.0f;
  for (Candidate& x : c) x.p = std::exp(x.logit - max_logit);
  normalize(c);
}

TokenId argmax(std::span<const float> logits) {
  return static_cast<TokenId>(first_argmax(logits.data(), static_cast<int64_t>(logits.size())));
}

}  // namespace

std::vector<Candidate> truncate_candidates(std::span<const float> logits,
                                           const SamplingParams& params) {
  T9_CHECK(params.temperature > 0.0f, "truncate_candidates needs temperature > 0");
  const int n = static_cast<int>(logits.size());
  std::vector<Candidate> c(n);
  for (int i = 0; i < n; ++i) c[i] = {i, logits[i] / params.temperature, 0.0f};
  int sorted = 0;  // c[0, sorted) is in sampling order (by_logit_desc)
  if (params.top_k > 0 && params.top_k < n) {
    std::partial_sort(c.begin(), c.begin() + params.top_k, c.end(), by_logit_desc);
    c.resize(params.top_k);
    sorted = params.top_k;
  }
  // Without top-k: the probabilities over the whole vocabulary, summed in token order (before
  // any sorting), then only as much of the order sorted as the cuts read: a 4096-long prefix
  // first, four times longer each time they need more. A full sort of a 248k vocabulary took ~20 ms
  // per token; the kept set of a real model is a few dozen tokens.
  softmax_in_place(c);
  if (params.top_p >= 1.0f && params.min_p <= 0.0f) return c;  // no cut: token order, unsorted
  const int size = static_cast<int>(c.size());
  auto at = [&](int i) -> const Candidate& {  // c[i] in sorted order, sorting more if needed
    if (i >= sorted) {                        // select the next block (linear), then sort only it
      const int want = std::min(size, std::max({4096, 4 * sorted, i + 1}));
      if (want < size)
        std::nth_element(c.begin() + sorted, c.begin() + want, c.end(), by_logit_desc);
      std::sort(c.begin() + sorted, c.begin() + want, by_logit_desc);
      sorted = want;
    }
    return c[i];
  };
  if (params.top_p < 1.0f) {
    // 1e-6 slack: a set whose probabilities add to top_p in exact arithmetic must qualify.
    double cum = 0;
    for (int i = 0; i < size; ++i) {
      cum += at(i).p;
      if (cum >= params.top_p - 1e-6) {
        c.resize(i + 1);
        break;
      }
    }
    if (size > 0 && static_cast<int>(c.size()) == size) at(size - 1);  // nothing cut: all sorted
    normalize(c);
  }
  if (params.min_p > 0.0f && !c.empty()) {
    const float threshold = params.min_p * at(0).p;
    int keep = 1;
    while (keep < static_cast<int>(c.size()) && at(keep).p >= threshold) ++keep;
    c.resize(keep);
    normalize(c);
  }
  return c;
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
  if (params.temperature == 0.0f) {
    r.token = argmax(logits);
  } else {
    std::vector<Candidate> c = truncate_candidates(logits, params);
    const double u = rng.uniform();
    double cum = 0;
    r.token = c.front().token;
    for (const Candidate& x : c) {
      if (x.p <= 0.0f) continue;
      r.token = x.token;
      cum += x.p;
      if (u < cum) break;
    }
  }
  if (want_logprobs || n_top_logprobs > 0)
    compute_logprobs(raw_logits, r.token, n_top_logprobs, &r.logprob, &r.top_logprobs);
  return r;
}

}  // namespace t9::engine
