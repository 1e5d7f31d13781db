// test_integration's own main(): the GoogleTest tests by default, or one of the measurement
// modes of probes.h. (Defining main here keeps gtest_main's from being linked in.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "unit/integration/probes.h"

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--rss-probe") == 0)
    return t9::integration::rss_probe_main(std::atoi(argv[2]));
  if (argc >= 2 && std::strcmp(argv[1], "--engine-bench") == 0)
    return t9::integration::engine_bench_main(argc >= 3 ? std::atoi(argv[2]) : 64);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
