// Prompt-lookup drafts for speculative decoding: agents re-send and quote their context (file
// contents, tool results, code being edited), so the next tokens often repeat an earlier span.
// The draft is what followed the most recent earlier occurrence of the sequence's last n tokens
// (n = max_n down to min_n, longest match first). The engine verifies drafts in one step and keeps
// what greedy decoding would have produced, so drafts change speed, never output.
#pragma once

#include <span>
#include <vector>

#include "engine/request.h"

namespace t9::engine {

struct NgramDraftConfig {
  int max_draft = 4;  // tokens proposed per step, at most
  int max_n = 3;      // longest suffix matched
  int min_n = 2;  // shortest suffix matched (1 proposes on a single repeated token: mostly noise)
};

// Up to cfg.max_draft tokens that followed the latest earlier occurrence of the longest matching
// suffix of `tokens`; empty when no suffix of at least min_n tokens occurred before.
std::vector<TokenId> propose_ngram_draft(std::span<const TokenId> tokens,
                                         const NgramDraftConfig& cfg);

}  // namespace t9::engine
