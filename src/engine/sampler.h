// Sampler: turns one row of logits into a token, per request. Order of operations:
//   raw logits -> logit bias -> repetition penalty (prompt + generated) -> presence/frequency
//   penalties (generated) -> [temperature 0: argmax] -> / temperature -> top-k -> softmax ->
//   top-p -> min-p -> renormalize -> draw with the request's own RNG.
// Logprobs (TokenEvent::logprob, top_logprobs) are log_softmax of the RAW logits: what the model
// believes, independent of the sampling knobs (vLLM's default "raw logprobs").
// Each request owns an Rng seeded from its seed, and draws exactly one number per sampled token,
// so its output does not depend on what else is in the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/sampling.h"
#include "engine/request.h"

namespace t9::engine {

// splitmix64: tiny, fast, and identical on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t state_;
};

using t9::Candidate;
using t9::LogitEdit;
using t9::PendingEdit;

struct SampleResult {
  TokenId token = -1;
  float logprob = 0.0f;                  // raw log p(token); filled when logprobs are asked
  std::vector<TopLogprob> top_logprobs;  // [n_top], most likely first
};

// The distinct prompt tokens the repetition penalty reads: sorted, unique, in [0, n_vocab). The
// engine keeps them per request, so a step's edits cost O(distinct tokens), not a prompt scan.
std::vector<TokenId> distinct_tokens(std::span<const TokenId> tokens, int n_vocab);

// Repetition, presence or frequency penalty: the row's edits depend on the tokens so far.
inline bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

// What one row's edits are made of (make_logit_edits).
struct EditInputs {
  int n_vocab = 0;
  std::span<const TokenId> prompt_distinct;  // the prompt's distinct_tokens
  std::span<const TokenId> generated;        // the generated tokens the host knows
  int row = 0;                               // the edits' logit row
  bool with_bias = false;                    // fold the logit bias in (has_add)
  // >= 0: one more generated token is in flight, the call's input token at this index (a
  // pipelined step: the step before decided it on the backend). With penalties the edits then
  // carry sub_next and the row gets a PendingEdit.
  int input_in_flight = -1;
};

// The penalties of one row as edits (core/sampling.h), one per token in token order, each with
// row = in.row: the repetition penalty on every distinct prompt and generated token, presence and
// frequency on generated ones; the logit bias too with in.with_bias. False when the bias names a
// token twice (the host then adds both, one after the other). With in.input_in_flight and
// penalties, also the row's PendingEdit into *pending.
bool make_logit_edits(const SamplingParams& params, const EditInputs& in,
                      std::vector<LogitEdit>* out, std::vector<PendingEdit>* pending = nullptr);

// Mutates: adds logit bias and applies repetition, presence and frequency penalties.
void apply_bias_and_penalties(std::span<float> logits, const SamplingParams& params,
                              std::span<const TokenId> prompt, std::span<const TokenId> generated);

// core/sampling.h's cuts with the request's temperature, top-k, top-p and min-p.
std::vector<Candidate> truncate_candidates(std::span<const float> logits,
                                           const SamplingParams& params);

// Raw log-probability of `token` and the n_top most likely tokens (ties: lower id first):
// core/sampling.h's row_logprobs, the backends' `logprobs` op.
void compute_logprobs(std::span<const float> raw_logits, TokenId token, int n_top, float* logprob,
                      std::vector<TopLogprob>* top);

// Samples one token from a row of raw logits. The request's history feeds the penalties.
// True when the token is the argmax of the raw logits: greedy, no logit bias, no penalties and
// no logprobs asked (then a backend may compute the argmax and skip copying the logits).
bool argmax_suffices(const SamplingParams& params, bool want_logprobs, int n_top_logprobs);

SampleResult sample_token(std::span<const float> raw_logits, const SamplingParams& params,
                          std::span<const TokenId> prompt, std::span<const TokenId> generated,
                          Rng& rng, bool want_logprobs, int n_top_logprobs);
// The same with the uniform draw already taken from the request's Rng (one per token at
// temperature != 0, none at 0): a step whose row the runner was asked to sample on the device
// draws before the forward, and samples here only when the runner returned logits instead.
SampleResult sample_token(std::span<const float> raw_logits, const SamplingParams& params,
                          std::span<const TokenId> prompt, std::span<const TokenId> generated,
                          double u, bool want_logprobs, int n_top_logprobs);

}  // namespace t9::engine
