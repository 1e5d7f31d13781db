#include "engine/ngram_draft.h"

#include <gtest/gtest.h>

namespace t9::engine {
namespace {

using V = std::vector<TokenId>;

TEST(NgramDraft, LongestSuffixLatestOccurrence) {
  NgramDraftConfig c{4, 3, 2};
  // Suffix (7, 8, 9) occurred at 1..3: propose what followed it there.
  EXPECT_EQ(propose_ngram_draft(V{5, 7, 8, 9, 1, 2, 3, 4, 6, 7, 8, 9}, c), (V{1, 2, 3, 4}));
  // Two earlier occurrences of (1, 2): the latest wins.
  EXPECT_EQ(propose_ngram_draft(V{1, 2, 10, 1, 2, 11, 12, 0, 1, 2}, c), (V{11, 12, 0, 1}));
  // No 3-gram match, a 2-gram one: (3, 4) -> 5.
  EXPECT_EQ(propose_ngram_draft(V{3, 4, 5, 9, 3, 4}, c), (V{5, 9, 3, 4}));
  // The draft stops at the end of the history.
  EXPECT_EQ(propose_ngram_draft(V{2, 3, 6, 2, 3}, c), (V{6, 2, 3}));
}

TEST(NgramDraft, NothingBelowMinN) {
  NgramDraftConfig c{4, 3, 2};
  EXPECT_TRUE(propose_ngram_draft(V{1, 2, 3, 4, 5, 1}, c).empty());  // only a 1-gram repeats
  EXPECT_TRUE(propose_ngram_draft(V{}, c).empty());
  EXPECT_TRUE(propose_ngram_draft(V{7, 7}, c).empty());  // (7, 7) has no earlier occurrence
  c.min_n = 1;
  EXPECT_EQ(propose_ngram_draft(V{1, 2, 3, 4, 5, 1}, c), (V{2, 3, 4, 5}));
  c.max_draft = 0;
  EXPECT_TRUE(propose_ngram_draft(V{1, 2, 1, 2}, c).empty());
}

}  // namespace
}  // namespace t9::engine
