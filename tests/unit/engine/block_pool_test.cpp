#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace t9::engine {
namespace {

using Ids = std::vector<BlockId>;

struct Recorder {
  std::vector<int> calls;
  int limit = 1 << 30;
  GrowFn fn() {
    return [this](int n) {
      calls.push_back(n);
      return n <= limit;
    };
  }
};

BlockPoolConfig config(int chunk, int max_blocks, int initial = 0) {
  BlockPoolConfig c;
  c.block_size_tokens = 4;
  c.grow_chunk_blocks = chunk;
  c.max_blocks = max_blocks;
  c.initial_blocks = initial;
  return c;
}

Status check(const BlockPool& pool, std::vector<int> refs) {
  return pool.check_integrity(refs);
}

TEST(BlockPool, ReservesNothingUntilAskedThenGrowsInChunks) {
  Recorder rec;
  BlockPool pool(config(4, 100000), rec.fn());
  EXPECT_EQ(pool.n_blocks(), 0);
  EXPECT_TRUE(rec.calls.empty());
  Ids got;
  ASSERT_TRUE(pool.take(2, &got));
  EXPECT_EQ(got, (Ids{0, 1}));
  EXPECT_EQ(rec.calls, (std::vector<int>{4}));
  got.clear();
  ASSERT_TRUE(pool.take(3, &got));  // 2 and 3 exist; growth adds 4..7 after them
  EXPECT_EQ(got, (Ids{2, 3, 4}));
  EXPECT_EQ(rec.calls, (std::vector<int>{4, 8}));
  EXPECT_EQ(pool.n_used(), 5);
  EXPECT_EQ(pool.free_queue(), (Ids{5, 6, 7}));
  ASSERT_TRUE(pool.take(9, &got));  // a request larger than a chunk grows by what it needs
  EXPECT_EQ(rec.calls.back(), 14);
  EXPECT_TRUE(check(pool, std::vector<int>(14, 1)).ok());
}

TEST(BlockPool, TakeIsAllOrNothingAtTheCap) {
  Recorder rec;
  BlockPool pool(config(4, 6), rec.fn());
  Ids got;
  EXPECT_FALSE(pool.take(7, &got));
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(rec.calls.empty());  // refused before asking for storage
  ASSERT_TRUE(pool.take(6, &got));
  EXPECT_EQ(rec.calls, (std::vector<int>{6}));  // the chunk is clipped to the cap
  EXPECT_EQ(pool.n_available(), 0);
}

TEST(BlockPool, FailedGrowthCapsThePool) {
  Recorder rec;
  rec.limit = 4;
  BlockPool pool(config(4, 16), rec.fn());
  Ids got;
  ASSERT_TRUE(pool.take(4, &got));
  EXPECT_FALSE(pool.take(1, &got));
  EXPECT_EQ(rec.calls, (std::vector<int>{4, 8, 5}));  // a chunk, then just the one block
  EXPECT_EQ(pool.max_blocks(), 4);
  EXPECT_EQ(pool.n_available(), 0);
  pool.unref(2);
  got.clear();
  ASSERT_TRUE(pool.take(1, &got));
  EXPECT_EQ(got, (Ids{2}));
  EXPECT_EQ(rec.calls.size(), 3u);  // at the cap: no more attempts to grow
}

TEST(BlockPool, FailedLargeGrowthStillLetsSmallerRequestsGrow) {
  Recorder rec;
  rec.limit = 8;
  BlockPool pool(config(8, 64), rec.fn());
  Ids got;
  EXPECT_FALSE(pool.take(10, &got));  // 10 blocks cannot be backed
  EXPECT_EQ(rec.calls, (std::vector<int>{10}));
  EXPECT_EQ(pool.max_blocks(), 9);
  ASSERT_TRUE(pool.take(3, &got));
  EXPECT_EQ(rec.calls, (std::vector<int>{10, 8}));
  EXPECT_EQ(got, (Ids{0, 1, 2}));
}

TEST(BlockPool, UncachedFreeBlocksGoFirstCachedOnesWaitInLruOrder) {
  BlockPool pool(config(6, 6, 6), nullptr);
  Ids got;
  ASSERT_TRUE(pool.take(6, &got));
  pool.set_hash(0, 100);
  pool.set_hash(1, 101);
  pool.set_hash(2, 102);
  pool.unref(1);  // cached: tail of the LRU part
  pool.unref(4);  // uncached: head
  pool.unref(0);
  pool.unref(5);
  EXPECT_EQ(pool.free_queue(), (Ids{5, 4, 1, 0}));
  EXPECT_EQ(pool.n_cached_free(), 2);
  EXPECT_EQ(pool.n_cached(), 3);  // block 2 is in use and still cached
  got.clear();
  ASSERT_TRUE(pool.take(3, &got));  // both uncached, then evicts the least recently freed
  EXPECT_EQ(got, (Ids{5, 4, 1}));
  EXPECT_FALSE(pool.find(101).has_value());
  EXPECT_EQ(pool.find(100), 0);
  EXPECT_FALSE(pool.is_cached(1));
  EXPECT_TRUE(check(pool, {0, 1, 1, 1, 1, 1}).ok());
}

TEST(BlockPool, PrefixHitTakesACachedBlockOutOfTheFreeQueue) {
  BlockPool pool(config(3, 3, 3), nullptr);
  Ids got;
  ASSERT_TRUE(pool.take(3, &got));
  pool.set_hash(1, 7);
  pool.unref(1);
  pool.unref(0);
  EXPECT_EQ(pool.free_queue(), (Ids{0, 1}));
  pool.ref(1);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.free_queue(), (Ids{0}));
  pool.ref(1);
  EXPECT_EQ(pool.ref_count(1), 2);
  EXPECT_TRUE(check(pool, {0, 2, 1}).ok());
}

TEST(BlockPool, DuplicateContentKeepsTheFirstBlockUnderTheHash) {
  BlockPool pool(config(2, 2, 2), nullptr);
  Ids got;
  ASSERT_TRUE(pool.take(2, &got));
  pool.set_hash(0, 55);
  pool.set_hash(1, 55);
  EXPECT_TRUE(pool.is_cached(0));
  EXPECT_FALSE(pool.is_cached(1));
  EXPECT_EQ(pool.find(55), 0);
}

TEST(BlockPool, IntegrityCheckNamesAWrongRefCount) {
  BlockPool pool(config(2, 2, 2), nullptr);
  Ids got;
  ASSERT_TRUE(pool.take(1, &got));
  Status s = check(pool, {2, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "block 0: ref count 1 but 2 block tables hold it");
}

}  // namespace
}  // namespace t9::engine
