// FragmentCache alone: hits return the stored ids, the least recently used entry goes first past
// the byte budget, and a lookup makes an entry the most recent.
#include "tokenizer/fragment_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace t9::tok {
namespace {

using Ids = std::vector<TokenId>;

TEST(FragmentCache, EvictsTheLeastRecentlyUsedPastTheBudget) {
  const std::string a(3000, 'a'), b(3000, 'b'), c(3000, 'c');
  const Ids ia = {1, 2, 3}, ib = {4, 5}, ic = {6};
  // Each entry is its text plus 4 bytes per id: room for two of them.
  FragmentCache cache({.min_bytes = 2048, .max_bytes = 6100});
  EXPECT_TRUE(cache.wants(a));
  EXPECT_FALSE(cache.wants("short"));
  cache.insert(a, ia);
  cache.insert(b, ib);
  Ids out = {9};
  ASSERT_TRUE(cache.lookup(a, out));  // a is now more recent than b
  EXPECT_EQ(out, (Ids{9, 1, 2, 3}));
  cache.insert(c, ic);  // over budget: b goes
  out.clear();
  EXPECT_FALSE(cache.lookup(b, out));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(cache.lookup(c, out));
  ASSERT_TRUE(cache.lookup(a, out));
  EXPECT_EQ(out, (Ids{6, 1, 2, 3}));
  const FragmentCache::Stats st = cache.stats();
  EXPECT_EQ(st.hits, 3);
  EXPECT_EQ(st.misses, 1);
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.bytes, a.size() + 12 + c.size() + 4);
  // Same length and hash bucket do not matter: keys compare in full.
  std::string a2 = a;
  a2.back() = 'z';
  EXPECT_FALSE(cache.lookup(a2, out));
  cache.set_max_bytes(0);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_FALSE(cache.wants(a));
}

}  // namespace
}  // namespace t9::tok
