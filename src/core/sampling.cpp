#include "core/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/argmax.h"
#include "core/check.h"

namespace t9 {
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

}  // namespace

std::vector<Candidate> truncate_candidates(std::span<const float> logits,
                                           const SamplingCuts& params) {
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

int32_t draw_candidate(const std::vector<Candidate>& c, double u) {
  double cum = 0;
  int32_t token = c.empty() ? 0 : c.front().token;
  for (const Candidate& x : c) {
    if (x.p <= 0.0f) continue;
    token = x.token;
    cum += x.p;
    if (u < cum) break;
  }
  return token;
}

int32_t sample_row(std::span<const float> logits, const RowSampling& s) {
  if (s.temperature == 0.0f)
    return static_cast<int32_t>(first_argmax(logits.data(), static_cast<int64_t>(logits.size())));
  return draw_candidate(truncate_candidates(logits, {s.temperature, s.top_k, s.top_p, s.min_p}),
                        s.u);
}

void row_logprobs(std::span<const float> logits, int32_t token, int n_top, float* token_logprob,
                  int32_t* top_ids, float* top_logprobs) {
  const int n = static_cast<int>(logits.size());
  T9_CHECK(n_top >= 0 && n_top <= n, "row_logprobs: {} best of {}", n_top, n);
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float l : logits) max_logit = std::max(max_logit, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const float lse = max_logit + static_cast<float>(std::log(sum));
  *token_logprob = token >= 0 && token < n ? logits[static_cast<size_t>(token)] - lse
                                           : std::numeric_limits<float>::quiet_NaN();
  if (n_top == 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (int i = 0; i < n_top; ++i) {
    top_ids[i] = ids[static_cast<size_t>(i)];
    top_logprobs[i] = logits[static_cast<size_t>(ids[static_cast<size_t>(i)])] - lse;
  }
}

bool apply_logit_edits(const LogitRowsView& logits, std::span<const LogitEdit> edits,
                       std::span<const PendingEdit> pending, std::span<const int32_t> ids) {
  const int64_t n_rows = logits.n_rows, n_vocab = logits.n_vocab;
  auto at = [&](int64_t row, int32_t token) -> float& {
    return logits.data[row * logits.row_stride + token];
  };
  // Each row's pending token (-1: none) and which of its PendingEdit entries names it.
  std::vector<int32_t> pending_token(static_cast<size_t>(n_rows), -1);
  std::vector<const PendingEdit*> pending_of(static_cast<size_t>(n_rows), nullptr);
  for (const PendingEdit& p : pending) {
    if (p.row < 0) continue;
    if (p.row >= n_rows || p.input < 0 || static_cast<size_t>(p.input) >= ids.size()) return false;
    const int32_t t = ids[static_cast<size_t>(p.input)];
    if (t < 0 || t >= n_vocab || pending_of[static_cast<size_t>(p.row)] != nullptr) return false;
    pending_token[static_cast<size_t>(p.row)] = t;
    pending_of[static_cast<size_t>(p.row)] = &p;
  }
  for (const LogitEdit& e : edits) {
    if (e.row < 0) continue;
    if (e.row >= n_rows || e.token < 0 || e.token >= n_vocab) return false;
    float& l = at(e.row, e.token);
    const size_t r = static_cast<size_t>(e.row);
    if (e.token != pending_token[r]) {
      l = edited_logit(l, e);
      continue;
    }
    l = edited_logit(l, pending_edit(&e, *pending_of[r]));
    pending_of[r] = nullptr;  // applied with the row's edit
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const PendingEdit* p = pending_of[static_cast<size_t>(r)];
    if (p == nullptr) continue;
    float& l = at(r, pending_token[static_cast<size_t>(r)]);
    l = edited_logit(l, pending_edit(nullptr, *p));
  }
  return true;
}

}  // namespace t9
