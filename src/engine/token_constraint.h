// TokenConstraint: a request's restriction of which tokens may come next (structured output: a
// JSON schema, a "json" format). The engine never sees the grammar or any text: the server layer
// builds the constraint (grammar/token_filter.h behind this interface) and the engine, on its own
// thread, either checks the token the runner decided (allows(): the argmax, or an untruncated
// draw, kept when the constraint allows it) or masks the row's logits on the host before
// sampling, and reports each token it took. A constrained row never pipelines: the next step's
// check depends on this one's token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace t9::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets logits[t] = -inf for each token t that may not come next. False: no token may.
  virtual bool mask(std::span<float> logits) = 0;
  // Whether `token` may come next (mask() would leave it), without taking it.
  virtual bool allows(int32_t token) = 0;
  // The token that came next (one mask() left). False: it does not fit.
  virtual bool accept(int32_t token) = 0;
  // Nothing may follow the tokens so far: the request ends here (finish reason stop).
  virtual bool complete() const = 0;
  // Up to max_tokens tokens that spell what must come next whatever the model chooses (a JSON
  // key the schema fixes): proposed as the next step's draft and verified through mask() like any
  // draft, so they change how many steps the output takes, never the output. Empty: none.
  virtual std::vector<int32_t> forced_tokens(int max_tokens) {
    (void)max_tokens;
    return {};
  }
};

}  // namespace t9::engine
