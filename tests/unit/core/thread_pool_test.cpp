#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/result.h"

namespace t9 {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1000);
  for (int rep = 0; rep < 50; ++rep) {
    pool.parallel_for(1000, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 50);
}

TEST(ThreadPool, RunOnAllGivesEachThreadItsIndex) {
  ThreadPool pool(3);
  std::vector<int> seen(3, 0);
  pool.run_on_all([&](int t, int n) {
    EXPECT_EQ(n, 3);
    seen[t] += 1;
  });
  EXPECT_EQ(seen, (std::vector<int>{1, 1, 1}));
}

Result<int> half_of(int x) {
  if (x % 2) return error("{} is odd", x);
  return x / 2;
}

Result<int> quarter_of(int x) {
  T9_ASSIGN_OR_RETURN(int h, half_of(x));
  return half_of(h);
}

TEST(Result, PropagatesTheFirstError) {
  EXPECT_EQ(quarter_of(8).value(), 2);
  auto r = quarter_of(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "3 is odd");
}

}  // namespace t9
