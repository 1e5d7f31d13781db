// The fragment-ordered Q4_K layout (quant/q4k_frag.h): a byte lands where the layout comment
// says, the reordering loses nothing, and the bf16 weight rule rounds where it says.
#include "quant/q4k_frag.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant/dequantize.h"

namespace t9 {
namespace {

std::vector<BlockQ4_K> random_blocks(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<BlockQ4_K> v(static_cast<size_t>(n));
  for (BlockQ4_K& b : v) {
    b.d = static_cast<uint16_t>(0x2000 + byte(rng));  // small positive f16 scales
    b.dmin = static_cast<uint16_t>(0x2000 + byte(rng));
    for (uint8_t& s : b.scales) s = static_cast<uint8_t>(byte(rng));
    for (uint8_t& q : b.qs) q = static_cast<uint8_t>(byte(rng));
  }
  return v;
}

TEST(Q4KFrag, BytesLandWhereTheLayoutSays) {
  const int64_t n_in = 512, n_out = 32;  // two tiles of two super-blocks
  std::vector<BlockQ4_K> rows(static_cast<size_t>(n_out * n_in / 256));
  // Row 25 (tile 1, row 9 of it: g = 1, the upper half), super-block 1, code byte 93: group 2,
  // byte 29 of its 32 -> t = 3, word w3 (row g + 8, bytes 8t + 4 .. 8t + 7), c1 of the word,
  // stored at position 2 (c0, c2, c1, c3).
  BlockQ4_K& b = rows[25 * 2 + 1];
  b.qs[93] = 0xA7;
  b.d = 0x1234;
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ4_K), 0);
  q4k_to_frag(rows.data(), n_in, n_out, frag.data());
  const size_t blk = (1 * 2 + 1) * static_cast<size_t>(kQ4KFragBlockBytes);
  EXPECT_EQ(frag[blk + 256 + 16 * (32 * 2 + 4 * 1 + 3) + 4 * 3 + 2], 0xA7);
  uint16_t d = 0;
  std::memcpy(&d, &frag[blk + 16 * 9], 2);  // row 9's header: d first
  EXPECT_EQ(d, 0x1234);
  int nonzero = 0;
  for (const uint8_t v : frag) nonzero += v != 0;
  EXPECT_EQ(nonzero, 3);  // 0xA7 and d's two bytes, nothing else moved
}

TEST(Q4KFrag, EveryBlockComesBackBitForBit) {
  const int64_t n_in = 1024, n_out = 48;
  const std::vector<BlockQ4_K> rows = random_blocks(n_out * n_in / 256, 44);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ4_K));
  q4k_to_frag(rows.data(), n_in, n_out, frag.data());
  for (int64_t r = 0; r < n_out; ++r)
    for (int64_t b = 0; b < n_in / 256; ++b) {
      const BlockQ4_K got = q4k_frag_block(frag.data(), n_in, r, b);
      ASSERT_EQ(std::memcmp(&got, &rows[static_cast<size_t>(r * (n_in / 256) + b)], sizeof got), 0)
          << "row " << r << " block " << b;
    }
}

TEST(Q4KFrag, ShapesItCovers) {
  EXPECT_TRUE(q4k_frag_shape_ok(4096, 1024));
  EXPECT_TRUE(q4k_frag_shape_ok(256, 16));
  EXPECT_FALSE(q4k_frag_shape_ok(4096, 1000));  // rows not in 16-row tiles
  EXPECT_FALSE(q4k_frag_shape_ok(4000, 1024));  // not whole super-blocks
}

TEST(Q4KFrag, Bf16WeightRoundsTheScaleThenTheSum) {
  BlockQ4_K b{};
  b.d = 0x3555;     // 0.333251953125
  b.dmin = 0x3800;  // 0.5
  b.scales[0] = 7;  // sub-block 0: sc 7, m 0 (scales[4])
  b.scales[1] = 2;  // sub-block 1: sc 2, m 3
  b.scales[5] = 3;
  b.qs[0] = 0x0F;  // element 0: q 15 (sub-block 0); element 32: q 0 (sub-block 1)
  b.qs[1] = 0x40;  // element 1: q 0; element 33: q 4
  // d sc = 2.33276367 -> bf16 2.328125 (1 + 21/128, times 2); 15 x 2.328125 = 34.921875 ->
  // bf16 35 (1 + 12/128, times 32). GGUF's fp32 rule gives 34.99 instead.
  EXPECT_EQ(q4k_bf16_weight(b, 0), 35.0f);
  EXPECT_EQ(q4k_bf16_weight(b, 1), 0.0f);  // q 0, min 0
  // Sub-block 1: s = bf16(0.666503906) = 0.66796875 (1 + 43/128, / 2), m = -1.5 exactly;
  // q 4: 2.671875 - 1.5 = 1.171875, exact in bf16 (1 + 22/128).
  EXPECT_EQ(q4k_bf16_weight(b, 33), 1.171875f);
  EXPECT_EQ(q4k_bf16_weight(b, 32), -1.5f);  // q 0: just the min
  std::vector<float> gguf(256);
  dequantize_row(GgmlType::Q4_K, &b, gguf.data(), 256);
  EXPECT_NE(gguf[0], 35.0f);  // the two rules differ by the bf16 roundings
  EXPECT_NEAR(gguf[0], 35.0f, 35.0f / 128);
}

}  // namespace
}  // namespace t9
