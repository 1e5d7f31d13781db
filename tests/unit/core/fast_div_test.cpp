// FastDiv (core/fast_div.h), the CUDA kernels' division by a launcher-known divisor: exact for
// every n it covers. Every divisor up to 1024 (GQA groups, tile rows and KV page sizes are far
// smaller), each n below 200,000 and then a sparse walk to the bound, plus the bound's last n.
#include "core/fast_div.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace t9 {
namespace {

TEST(FastDiv, DividesEveryCoveredNumeratorExactly) {
  int64_t checked = 0;
  for (int32_t d = 1; d <= 1024; ++d) {
    const FastDiv f = FastDiv::of(d);
    ASSERT_EQ(f.d, d);
    const int64_t end = std::min<int64_t>((int64_t{1} << 32) / d, int64_t{1} << 31);
    ASSERT_TRUE(f.covers(end));
    ASSERT_FALSE(f.covers((int64_t{1} << 32) / d + 1));
    for (int64_t n = 0; n < end; n += n < 200000 ? 1 : n / 1000 + 1, ++checked)
      ASSERT_EQ(f.div(static_cast<int>(n)), n / d) << "d " << d << " n " << n;
    ASSERT_EQ(f.div(static_cast<int>(end - 1)), (end - 1) / d) << "d " << d << " last n";
  }
  EXPECT_GT(checked, int64_t{200000} * 1024);
}

TEST(FastDivDeathTest, AZeroDivisorIsABug) {
  EXPECT_DEATH(FastDiv::of(0), "FastDiv of 0");
}

}  // namespace
}  // namespace t9
