// CPU-only prefix cache tests in the style of vLLM's: exact block ids, sharing, eviction order.
// Block size 4 throughout; a "computed" sequence is simulated by advancing n_computed + commit.
#include "engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace t9::engine {
namespace {

using Ids = std::vector<BlockId>;

KvCacheConfig config(int max_blocks, bool prefix_cache = true) {
  KvCacheConfig c;
  c.pool.block_size_tokens = 4;
  c.pool.grow_chunk_blocks = max_blocks;
  c.pool.max_blocks = max_blocks;
  c.enable_prefix_cache = prefix_cache;
  return c;
}

Sequence make_seq(uint64_t id, std::vector<TokenId> tokens, uint64_t salt = 0) {
  Sequence s;
  s.id = id;
  s.n_prompt = static_cast<int>(tokens.size());
  s.tokens = std::move(tokens);
  s.cache_salt = salt;
  return s;
}

std::vector<TokenId> range(int first, int n) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Allocates with the prefix hit, then marks everything computed and commits.
PrefixMatch admit_and_compute(KvCacheManager& kv, Sequence& s) {
  PrefixMatch hit = kv.match_prefix(s);
  EXPECT_TRUE(kv.allocate(s, s.n_total() - hit.n_tokens, &hit));
  s.n_computed = s.n_total();
  kv.commit(s);
  return hit;
}

Status check(const KvCacheManager& kv, std::vector<const Sequence*> live) {
  return kv.check_integrity(live);
}

TEST(KvCacheManager, AllocatesExactBlockIds) {
  KvCacheManager kv(config(10), nullptr);
  Sequence a = make_seq(1, range(0, 10));
  ASSERT_TRUE(kv.allocate(a, 10));
  EXPECT_EQ(a.block_table, (Ids{0, 1, 2}));
  Sequence b = make_seq(2, range(100, 5));
  ASSERT_TRUE(kv.allocate(b, 5));
  EXPECT_EQ(b.block_table, (Ids{3, 4}));
  // Growing by tokens that still fit the last block takes nothing.
  a.n_computed = 10;
  a.tokens.push_back(7);
  ASSERT_TRUE(kv.allocate(a, 1));
  EXPECT_EQ(a.block_table, (Ids{0, 1, 2}));
  a.n_computed = 11;
  a.tokens.push_back(8);
  a.tokens.push_back(9);
  ASSERT_TRUE(kv.allocate(a, 2));  // tokens 11, 12: the second opens block 3 of a
  EXPECT_EQ(a.block_table, (Ids{0, 1, 2, 5}));
  EXPECT_TRUE(check(kv, {&a, &b}).ok());
}

TEST(KvCacheManager, CommonPrefixSharesFullBlocksOnly) {
  KvCacheManager kv(config(10), nullptr);
  Sequence a = make_seq(1, range(0, 10));
  admit_and_compute(kv, a);
  EXPECT_EQ(a.block_table, (Ids{0, 1, 2}));
  EXPECT_EQ(kv.pool().n_cached(), 2);  // blocks 0, 1 are full; block 2 holds 2 tokens
  Sequence b = make_seq(2, concat(range(0, 8), {50, 51, 52}));
  PrefixMatch hit = admit_and_compute(kv, b);
  EXPECT_EQ(hit.blocks, (Ids{0, 1}));
  EXPECT_EQ(hit.n_tokens, 8);
  EXPECT_EQ(b.block_table, (Ids{0, 1, 3}));
  EXPECT_EQ(kv.pool().ref_count(0), 2);
  EXPECT_EQ(kv.pool().ref_count(1), 2);
  EXPECT_EQ(kv.pool().ref_count(3), 1);
  EXPECT_TRUE(check(kv, {&a, &b}).ok());
}

TEST(KvCacheManager, HitNeverCoversTheWholePrompt) {
  KvCacheManager kv(config(10), nullptr);
  Sequence a = make_seq(1, range(0, 12));
  admit_and_compute(kv, a);
  // Exactly a's first two blocks: one block must stay to compute the last token's logits.
  Sequence b = make_seq(2, range(0, 8));
  PrefixMatch hit = kv.match_prefix(b);
  EXPECT_EQ(hit.blocks, (Ids{0}));
  ASSERT_TRUE(kv.allocate(b, 4, &hit));
  EXPECT_EQ(b.n_computed, 4);
  EXPECT_EQ(b.block_table, (Ids{0, 3}));
  // One token more: both blocks are hits, the new token goes into a fresh block.
  Sequence c = make_seq(3, range(0, 9));
  EXPECT_EQ(kv.match_prefix(c).blocks, (Ids{0, 1}));
}

TEST(KvCacheManager, SaltSeparatesCaches) {
  KvCacheManager kv(config(10), nullptr);
  Sequence a = make_seq(1, range(0, 9), /*salt=*/7);
  admit_and_compute(kv, a);
  Sequence b = make_seq(2, range(0, 9), /*salt=*/8);
  EXPECT_TRUE(kv.match_prefix(b).blocks.empty());
  Sequence c = make_seq(3, range(0, 9), /*salt=*/7);
  EXPECT_EQ(kv.match_prefix(c).blocks, (Ids{0, 1}));
  // A different first block changes every later hash (chained): no hit on block 1 alone.
  Sequence d = make_seq(4, concat({99, 1, 2, 3}, range(4, 5)), 7);
  EXPECT_TRUE(kv.match_prefix(d).blocks.empty());
}

TEST(KvCacheManager, FreedBlocksStayFindableAndAreEvictedLruTailFirst) {
  KvCacheManager kv(config(6), nullptr);
  Sequence a = make_seq(1, range(0, 12));
  Sequence b = make_seq(2, range(100, 12));
  admit_and_compute(kv, a);
  admit_and_compute(kv, b);
  EXPECT_EQ(a.block_table, (Ids{0, 1, 2}));
  EXPECT_EQ(b.block_table, (Ids{3, 4, 5}));
  kv.free(a);
  kv.free(b);
  // Each sequence frees its tail first; a was freed before b.
  EXPECT_EQ(kv.pool().free_queue(), (Ids{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(kv.stats().n_blocks_cached, 6);
  Sequence c = make_seq(3, range(200, 8));
  admit_and_compute(kv, c);
  EXPECT_EQ(c.block_table, (Ids{2, 1}));  // evicts a's tail, keeps a's head
  Sequence a2 = make_seq(4, range(0, 13));
  EXPECT_EQ(kv.match_prefix(a2).blocks, (Ids{0}));  // chain broken at a's block 1
  // b's blocks are intact: a hit adopts them out of the free queue; the new token's block
  // evicts the only other free block (a's block 0).
  Sequence b2 = make_seq(5, range(100, 13));
  PrefixMatch hit = kv.match_prefix(b2);
  EXPECT_EQ(hit.blocks, (Ids{3, 4, 5}));
  ASSERT_TRUE(kv.allocate(b2, 1, &hit));
  EXPECT_EQ(b2.block_table, (Ids{3, 4, 5, 0}));
  EXPECT_FALSE(kv.pool().find(a2.block_hashes[0]).has_value());
  EXPECT_TRUE(check(kv, {&c, &b2}).ok());
}

TEST(KvCacheManager, AllocateIsAllOrNothingAndCountsAdoptedFreeBlocks) {
  KvCacheManager kv(config(4), nullptr);
  Sequence a = make_seq(1, range(0, 8));
  admit_and_compute(kv, a);
  kv.free(a);  // blocks 0, 1 cached and free; 2, 3 free
  Sequence b = make_seq(2, range(0, 17));
  PrefixMatch hit = kv.match_prefix(b);
  ASSERT_EQ(hit.blocks, (Ids{0, 1}));
  // 17 tokens need 5 blocks; adopting 2 free hits leaves 2 for the 3 new ones.
  EXPECT_FALSE(kv.allocate(b, 9, &hit));
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(b.n_computed, 0);
  EXPECT_EQ(kv.pool().free_queue(), (Ids{2, 3, 1, 0}));
  EXPECT_TRUE(check(kv, {&b}).ok());
  // A chunk that fits: 8 hit tokens + 8 new ones.
  ASSERT_TRUE(kv.allocate(b, 8, &hit));
  EXPECT_EQ(b.block_table, (Ids{0, 1, 2, 3}));
  EXPECT_EQ(b.n_computed, 8);
  EXPECT_TRUE(check(kv, {&b}).ok());
}

TEST(KvCacheManager, FailedGrowthLeavesARunningSequenceUntouched) {
  KvCacheConfig c = config(8);
  c.pool.grow_chunk_blocks = 2;
  std::vector<int> calls;
  KvCacheManager kv(c, [&](int n) {
    calls.push_back(n);
    return n <= 2;
  });
  Sequence a = make_seq(1, range(0, 8));
  ASSERT_TRUE(kv.allocate(a, 8));
  a.n_computed = 8;
  kv.commit(a);
  a.tokens.push_back(9);
  // The capacity check passes (the cap says 8), then the device refuses: a keeps its blocks.
  EXPECT_FALSE(kv.allocate(a, 1));
  EXPECT_EQ(a.block_table, (Ids{0, 1}));
  EXPECT_EQ(a.n_computed, 8);
  EXPECT_EQ(calls, (std::vector<int>{2, 4, 3}));
  EXPECT_EQ(kv.pool().max_blocks(), 2);
  EXPECT_TRUE(check(kv, {&a}).ok());
  // The same with a prefix hit: the adopted blocks are given back.
  kv.free(a);
  Sequence b = make_seq(2, range(0, 9));
  PrefixMatch hit = kv.match_prefix(b);
  ASSERT_EQ(hit.blocks, (Ids{0, 1}));
  EXPECT_FALSE(kv.allocate(b, 1, &hit));
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(kv.pool().free_queue(), (Ids{1, 0}));
  EXPECT_TRUE(check(kv, {&b}).ok());
}

TEST(KvCacheManager, NoPrefixCacheSwitchDisablesSharing) {
  KvCacheManager kv(config(10, /*prefix_cache=*/false), nullptr);
  Sequence a = make_seq(1, range(0, 12));
  admit_and_compute(kv, a);
  Sequence b = make_seq(2, range(0, 12));
  PrefixMatch hit = admit_and_compute(kv, b);
  EXPECT_TRUE(hit.blocks.empty());
  EXPECT_EQ(b.block_table, (Ids{3, 4, 5}));
  EXPECT_EQ(kv.pool().n_cached(), 0);
  kv.free(a);
  EXPECT_EQ(kv.stats().n_blocks_cached, 0);
  EXPECT_TRUE(check(kv, {&b}).ok());
}

TEST(KvCacheManager, HashIsChainedXxh3OverParentSaltAndTokens) {
  std::vector<TokenId> t = {1, 2, 3, 4};
  uint64_t h0 = hash_block(0, 0, t);
  EXPECT_NE(h0, hash_block(1, 0, t));
  EXPECT_NE(h0, hash_block(0, 1, t));
  EXPECT_NE(h0, hash_block(0, 0, std::vector<TokenId>{1, 2, 3, 5}));
  Sequence s = make_seq(1, range(1, 9));
  KvCacheManager kv(config(4), nullptr);
  kv.match_prefix(s);
  ASSERT_EQ(s.block_hashes.size(), 2u);
  EXPECT_EQ(s.block_hashes[0], h0);
  EXPECT_EQ(s.block_hashes[1], hash_block(h0, 0, std::vector<TokenId>{5, 6, 7, 8}));
}

TEST(KvCacheManager, IntegrityCheckCatchesALeakAndADoubleHold) {
  KvCacheManager kv(config(4), nullptr);
  Sequence a = make_seq(1, range(0, 8));
  ASSERT_TRUE(kv.allocate(a, 8));
  Status leak = check(kv, {});  // a's blocks are held by no live table
  ASSERT_FALSE(leak.ok());
  EXPECT_EQ(leak.message(), "block 0: ref count 1 but 0 block tables hold it");
  Sequence b = make_seq(2, range(0, 4));
  b.block_table = {1};  // claims a's block without a reference
  Status dbl = check(kv, {&a, &b});
  ASSERT_FALSE(dbl.ok());
  EXPECT_EQ(dbl.message(), "block 1: ref count 1 but 2 block tables hold it");
  a.n_computed = 9;  // more tokens than its two blocks hold
  b.block_table.clear();
  Status cover = check(kv, {&a});
  ASSERT_FALSE(cover.ok());
  EXPECT_EQ(cover.message(), "seq 1: 2 blocks cannot hold 9 computed tokens");
}

}  // namespace
}  // namespace t9::engine
