// The sampling cuts and the draw, shared by the engine's sampler (engine/sampler.h, after logit
// bias and penalties) and the backends' `sample` op (the whole decision on the device, copying
// back one token id per row). One definition, so a backend's CPU reference is the host sampler.
//
// Order: logits / temperature -> top-k -> softmax -> top-p -> min-p -> renormalize -> the first
// candidate (in the cut order) whose running probability sum exceeds the uniform draw u.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace t9 {

struct Candidate {
  int32_t token = -1;
  float logit = 0.0f;  // after penalties and temperature
  float p = 0.0f;      // renormalized over the kept set
};

struct SamplingCuts {
  float temperature = 1.0f;  // > 0
  int32_t top_k = 0;         // 0 (or >= n_vocab): off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
};

// One row's settings as the backends' `sample` op reads them (its params tensor holds these
// 24 bytes per row). temperature 0: the argmax (first index of the largest logit).
struct RowSampling {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double u = 0.0;  // the request's uniform draw for this token, in [0, 1)
};
static_assert(sizeof(RowSampling) == 24, "the sample op's params rows are 24 bytes");

// One token's edit of a logits row before sampling: the logit bias and penalties of
// engine/sampler.h, per token. l += add (when has_add); then, when rep != 1, l = l > 0 ? l / rep
// : l * rep (the repetition penalty); then l -= sub (frequency * count + presence). The backends'
// `adjust_logits` op reads these 32 bytes per edit.
struct LogitEdit {
  int32_t row = -1;  // logit row of the call; < 0: padding, no edit
  int32_t token = 0;
  float add = 0.0f;
  float rep = 1.0f;
  float sub = 0.0f;
  uint32_t has_add = 0;  // adding +0 would turn -0 into +0: only a bias adds
  // In a row with a PendingEdit: `sub` when the pending token is this one (its count one more).
  float sub_next = 0.0f;
  uint32_t pad = 0;
};
static_assert(sizeof(LogitEdit) == 32, "the adjust_logits op's edit rows are 32 bytes");

// The token in flight of a pipelined row (at most one per row): the row's sequence produced a
// token the host does not know yet (the step before decided it on the backend), and it counts in
// the row's penalties. It is the call's input token `input` (the pipelined step's token for that
// sequence, read on the backend). The row's edit of that token, if any, applies with rep and
// its sub_next; else the token gets {rep, sub} alone (a first occurrence: frequency + presence).
struct PendingEdit {
  int32_t row = -1;   // logit row of the call; < 0: padding
  int32_t input = 0;  // index into the call's input token ids
  float rep = 1.0f;   // the repetition penalty (1: none)
  float sub = 0.0f;   // frequency + presence: the token's subtraction at count 1
};
static_assert(sizeof(PendingEdit) == 16, "the adjust_logits op's pending rows are 16 bytes");

// Compiled for the host and, inside nvcc, for the device too (the CUDA adjust_logits kernel),
// with the same IEEE-rounded operations: the device spells them as intrinsics, which nvcc never
// contracts into a fused multiply-add (the host build has no FMA contraction).
#ifdef __CUDACC__
__host__ __device__
#endif
    inline float
    edited_logit(float l, const LogitEdit& e) {
#ifdef __CUDA_ARCH__
  if (e.has_add != 0) l = __fadd_rn(l, e.add);
  if (e.rep != 1.0f) l = l > 0 ? __fdiv_rn(l, e.rep) : __fmul_rn(l, e.rep);
  return __fsub_rn(l, e.sub);
#else
  if (e.has_add != 0) l += e.add;
  if (e.rep != 1.0f) l = l > 0 ? l / e.rep : l * e.rep;
  return l - e.sub;  // x - 0 == x for every x, -0 and NaN included
#endif
}

// The edit that applies to the pending token t of its row: the row's edit `e` of t with the
// count one more, or (e null) the pending token's own edit.
#ifdef __CUDACC__
__host__ __device__
#endif
    inline LogitEdit
    pending_edit(const LogitEdit* e, const PendingEdit& p) {
  LogitEdit r;
  if (e != nullptr) {
    r = *e;
    r.sub = e->sub_next;
  } else {
    r.sub = p.sub;
  }
  r.rep = p.rep;
  return r;
}

// The kept candidates after temperature, top-k, top-p and min-p, sorted by probability (ties:
// lower token id first) when any cut applies, else in token id order; probabilities
// renormalized to sum to 1. Without top-k, the first softmax runs over the whole vocabulary
// summed in token order, and only the sorted prefix the cuts read is sorted.
std::vector<Candidate> truncate_candidates(std::span<const float> logits, const SamplingCuts& cuts);

// The first candidate with p > 0 whose running sum (in double) exceeds u; the last such one when
// rounding leaves u above the total; the first candidate when every p is 0.
int32_t draw_candidate(const std::vector<Candidate>& c, double u);

// The whole decision for one row: the argmax at temperature 0, else the draw from the cuts.
int32_t sample_row(std::span<const float> logits, const RowSampling& s);

// The most top log-probabilities a request may ask for per token (OpenAI's limit).
constexpr int kMaxTopLogprobs = 20;

// A row's log-probabilities, log_softmax of the logits as given (the engine passes the RAW row:
// what the model believes, vLLM's default): *token_logprob = l[token] - lse (NaN when token is
// outside the row: a row a backend's sampler left undecided), and the n_top largest entries
// (larger first, ties: lower id first) into top_ids / top_logprobs [n_top], n_top <= the row's
// length. lse = max + log(sum of exp(l - max)), the sum in double in token order. Rows without
// NaN (a NaN's place in the order is unspecified).
void row_logprobs(std::span<const float> logits, int32_t token, int n_top, float* token_logprob,
                  int32_t* top_ids, float* top_logprobs);

// Rows of logits on the host: row r's n_vocab floats start at data + r * row_stride.
struct LogitRowsView {
  float* data = nullptr;
  int64_t n_rows = 0, n_vocab = 0, row_stride = 0;
};

// The `adjust_logits` op on the host, the backends' reference: edits sorted by (row, token), at
// most one per (row, token), rows < 0 skipped; pending at most one per row, rows < 0 skipped,
// its token ids[input]. False (the logits partly edited) when an entry names a row, token or
// input out of range.
bool apply_logit_edits(const LogitRowsView& logits, std::span<const LogitEdit> edits,
                       std::span<const PendingEdit> pending, std::span<const int32_t> ids);
// The same on n_vocab-float rows back to back.
inline bool apply_logit_edits(std::span<float> logits, int64_t n_vocab,
                              std::span<const LogitEdit> edits,
                              std::span<const PendingEdit> pending, std::span<const int32_t> ids) {
  const int64_t n_rows = n_vocab > 0 ? static_cast<int64_t>(logits.size()) / n_vocab : 0;
  return apply_logit_edits({logits.data(), n_rows, n_vocab, n_vocab}, edits, pending, ids);
}

}  // namespace t9
