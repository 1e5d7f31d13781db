#include "engine/ngram_draft.h"

#include <algorithm>

namespace t9::engine {

std::vector<TokenId> propose_ngram_draft(std::span<const TokenId> tokens,
                                         const NgramDraftConfig& cfg) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int n = cfg.max_n; n >= cfg.min_n && cfg.max_draft > 0; --n) {
    if (len <= n) continue;
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Latest earlier occurrence first: the nearest context is the likeliest to repeat.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n, to = std::min(len, from + cfg.max_draft);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

}  // namespace t9::engine
