// StealRanges (src/backend/cpu/steal_ranges.h): every item handed out exactly once, owners walk
// their own span front to back, and concurrent owners never share an item.
#include "backend/cpu/steal_ranges.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

namespace t9::cpu {
namespace {

TEST(StealRanges, OwnSpanFrontToBackThenStealsFromTheBack) {
  // 10 items, 2 owners: spans [0, 5) and [5, 10), steps of 2.
  StealRanges r(10, 2, 2);
  int64_t b = -1, e = -1;
  ASSERT_TRUE(r.next(0, &b, &e));
  EXPECT_EQ(std::make_pair(b, e), std::make_pair(int64_t{0}, int64_t{2}));
  ASSERT_TRUE(r.next(0, &b, &e));
  EXPECT_EQ(std::make_pair(b, e), std::make_pair(int64_t{2}, int64_t{4}));
  ASSERT_TRUE(r.next(0, &b, &e));
  EXPECT_EQ(std::make_pair(b, e),
            std::make_pair(int64_t{4}, int64_t{5}));  // the span's last item: a short step
  ASSERT_TRUE(r.next(0, &b, &e));                     // own span empty: the back of owner 1's
  EXPECT_EQ(std::make_pair(b, e), std::make_pair(int64_t{8}, int64_t{10}));
  ASSERT_TRUE(r.next(1, &b, &e));  // owner 1 still starts at its front
  EXPECT_EQ(std::make_pair(b, e), std::make_pair(int64_t{5}, int64_t{7}));
  ASSERT_TRUE(r.next(0, &b, &e));
  EXPECT_EQ(std::make_pair(b, e), std::make_pair(int64_t{7}, int64_t{8}));
  EXPECT_FALSE(r.next(0, &b, &e));
  EXPECT_FALSE(r.next(1, &b, &e));
}

TEST(StealRanges, EmptyAndSingleOwner) {
  StealRanges none(0, 3, 4);
  int64_t b, e;
  for (int o = 0; o < 3; ++o) EXPECT_FALSE(none.next(o, &b, &e));
  StealRanges one(7, 1, 3);
  std::vector<std::pair<int64_t, int64_t>> got;
  while (one.next(0, &b, &e)) got.emplace_back(b, e);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 7}}));
}

TEST(StealRanges, ConcurrentOwnersTakeEveryItemOnce) {
  for (int n_owners : {2, 3, 4}) {
    for (int64_t n : {int64_t{1}, int64_t{97}, int64_t{5000}}) {
      StealRanges r(n, n_owners, 3);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::thread> threads;
      for (int o = 0; o < n_owners; ++o) {
        threads.emplace_back([&, o] {
          int64_t b, e, last_front = -1;
          while (r.next(o, &b, &e)) {
            ASSERT_LT(b, e);
            // Steps from the owner's own span come in increasing order.
            if (b >= n * o / n_owners && e <= n * (o + 1) / n_owners) {
              EXPECT_GT(b, last_front);
              last_front = b;
            }
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          }
        });
      }
      for (auto& t : threads) t.join();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "item " << i << " of " << n;
    }
  }
}

}  // namespace
}  // namespace t9::cpu
