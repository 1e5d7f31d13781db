// The fragment-ordered Q4_K, Q5_K, Q6_K, Q3_K, Q8_0 and BF16 layouts (quant/frag_layout.h): a byte
// lands where the layout comment says, the reordering loses nothing, the bf16 weight rule rounds
// where it says, and every lane decodes (quant/frag_decode.h) exactly the codes its A fragments
// must hold.
#include "quant/frag_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "quant/dequantize.h"
#include "quant/frag_decode.h"
#include "quant/half.h"
#include "quant/k_scales.h"

namespace t9 {
namespace {

// Random Q4_K, Q5_K or Q3_K blocks: small positive f16 d (and dmin), every other byte random.
template <typename Block = BlockQ4_K>
std::vector<Block> random_blocks(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<Block> v(static_cast<size_t>(n));
  for (Block& b : v) {
    b.d = static_cast<uint16_t>(0x2000 + byte(rng));
    if constexpr (requires { b.dmin; }) b.dmin = static_cast<uint16_t>(0x2000 + byte(rng));
    for (uint8_t& s : b.scales) s = static_cast<uint8_t>(byte(rng));
    if constexpr (requires { b.qh; })
      for (uint8_t& q : b.qh) q = static_cast<uint8_t>(byte(rng));
    if constexpr (requires { b.hmask; })
      for (uint8_t& q : b.hmask) q = static_cast<uint8_t>(byte(rng));
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
  EXPECT_EQ(frag[blk + kQ4KFragCodesAt + 16 * (32 * 2 + 4 * 1 + 3) + 4 * 3 + 2], 0xA7);
  uint16_t d = 0;
  std::memcpy(&d, &frag[blk + 16 * 9], 2);  // row 9's header: d first
  EXPECT_EQ(d, 0x1234);
  int nonzero = 0;
  for (const uint8_t v : frag) nonzero += v != 0;
  EXPECT_EQ(nonzero, 3);  // 0xA7 and d's two bytes, nothing else moved
}

// rows (n_out rows of n_in / kElems blocks: 256 for the K-quants, 32 for Q8_0) to fragment order
// and every block back, bit for bit.
template <int kElems = 256, typename Block, typename ToFrag, typename FragBlock>
void expect_round_trip(const std::vector<Block>& rows, int64_t n_in, int64_t n_out, ToFrag to_frag,
                       FragBlock frag_block) {
  std::vector<uint8_t> frag(rows.size() * sizeof(Block));
  to_frag(rows.data(), n_in, n_out, frag.data());
  const int64_t per_row = n_in / kElems;
  for (int64_t r = 0; r < n_out; ++r)
    for (int64_t b = 0; b < per_row; ++b) {
      const Block got = frag_block(frag.data(), n_in, r, b);
      ASSERT_EQ(std::memcmp(&got, &rows[static_cast<size_t>(r * per_row + b)], sizeof got), 0)
          << "row " << r << " block " << b;
    }
}

TEST(Q4KFrag, EveryBlockComesBackBitForBit) {
  expect_round_trip(random_blocks(48 * 1024 / 256, 44), 1024, 48, q4k_to_frag, q4k_frag_block);
}

TEST(Q4KFrag, ShapesItCovers) {
  EXPECT_TRUE(frag_shape_ok(4096, 1024));
  EXPECT_TRUE(frag_shape_ok(256, 16));
  EXPECT_FALSE(frag_shape_ok(4096, 1000));  // rows not in 16-row tiles
  EXPECT_FALSE(frag_shape_ok(4000, 1024));  // not whole super-blocks
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

std::vector<BlockQ6_K> random_q6k_blocks(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<BlockQ6_K> v(static_cast<size_t>(n));
  for (BlockQ6_K& b : v) {
    b.d = static_cast<uint16_t>(0x2000 + byte(rng));
    for (int8_t& s : b.scales) s = static_cast<int8_t>(byte(rng) - 128);
    for (uint8_t& q : b.ql) q = static_cast<uint8_t>(byte(rng));
    for (uint8_t& q : b.qh) q = static_cast<uint8_t>(byte(rng));
  }
  return v;
}

// q6k_code is GGUF's code: d * scale * (code - 32) is what dequantize_row gives, for every element.
TEST(Q6KFrag, CodeIsTheDequantizersCode) {
  const std::vector<BlockQ6_K> blocks = random_q6k_blocks(4, 61);
  for (const BlockQ6_K& b : blocks) {
    std::vector<float> y(256);
    dequantize_row(GgmlType::Q6_K, &b, y.data(), 256);
    for (int i = 0; i < 256; ++i)
      ASSERT_EQ(y[static_cast<size_t>(i)], f16_to_f32(b.d) * static_cast<float>(b.scales[i / 16]) *
                                               static_cast<float>(q6k_code(b, i) - 32))
          << "element " << i;
  }
}

TEST(Q6KFrag, BytesLandWhereTheLayoutSays) {
  const int64_t n_in = 512, n_out = 32;  // two tiles of two super-blocks
  std::vector<BlockQ6_K> rows(static_cast<size_t>(n_out * n_in / 256));
  for (BlockQ6_K& b : rows) std::memset(&b, 0, sizeof b);
  // Row 25 (tile 1, row 9: g = 1, the upper half), super-block 1, element 200 = group 3, c = 8:
  // t = 1, step 0, pair 0, e 0 (frag_input). Code 0x2B: GGUF's high nibble of ql[72]
  // (200 = 128 + 64 + 8) and bits 4, 5 of qh[40] (200 = 128 + 2 x 32 + 8).
  BlockQ6_K& b = rows[25 * 2 + 1];
  b.ql[72] = 0xB0;
  b.qh[40] = 0x20;
  b.scales[12] = -7;
  b.d = 0x1234;
  ASSERT_EQ(q6k_code(b, 200), 0x2B);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ6_K), 0xEE);
  q6k_to_frag(rows.data(), n_in, n_out, frag.data());
  const size_t blk = (1 * 2 + 1) * static_cast<size_t>(kQ6KFragBlockBytes);
  // Nibble: code byte 8 of group 3 (low nibble: c < 32) is word w2 (row g + 8, bytes 8t ..
  // 8t + 3), c0 of it, stored first.
  EXPECT_EQ(frag[blk + kQ6KFragNibblesAt + 16 * (32 * 3 + 4 * 1 + 1) + 4 * 2], 0x0B);
  // High bits: groups 2, 3 (h = 1), lane 5, word H(g + 8, 3) (the fourth), bits 2m + 16e = 0.
  EXPECT_EQ(frag[blk + kQ6KFragHighsAt + 16 * (32 * 1 + 4 * 1 + 1) + 4 * 3], 0x02);
  EXPECT_EQ(static_cast<int8_t>(frag[blk + 16 * 9 + 12]), -7);  // row 9's scales
  uint16_t d = 0;
  std::memcpy(&d, &frag[blk + kQ6KFragDAt + 2 * 9], 2);
  EXPECT_EQ(d, 0x1234);
  int nonzero = 0;
  for (const uint8_t v : frag) nonzero += v != 0;
  EXPECT_EQ(nonzero, 5);  // the nibble, the high bits, the scale, d's two bytes: nothing else
}

TEST(Q6KFrag, EveryBlockComesBackBitForBit) {
  expect_round_trip(random_q6k_blocks(48 * 1024 / 256, 62), 1024, 48, q6k_to_frag, q6k_frag_block);
}

TEST(Q6KFrag, Bf16WeightRoundsTheProductOnce) {
  BlockQ6_K b{};
  b.d = 0x3555;      // 0.333251953125
  b.scales[0] = 7;   // d x 7 = 2.33276367 -> bf16 2.328125
  b.scales[1] = -3;  // d x -3 = -0.999755859 -> bf16 -1.0
  b.ql[0] = 0x0F;    // element 0: nibble 15 ...
  b.qh[0] = 0x02;    // ... high bits 2: code 47, q - 32 = 15
  b.ql[16] = 0x01;   // element 16: code 1, q - 32 = -31
  // 15 x 2.328125 = 34.921875 -> bf16 35 (ties never arise: one product, one rounding).
  EXPECT_EQ(q6k_bf16_weight(b, 0), 35.0f);
  EXPECT_EQ(q6k_bf16_weight(b, 16), 31.0f);              // -31 x -1.0
  EXPECT_EQ(q6k_bf16_weight(b, 1), -32.0f * 2.328125f);  // code 0: -32 x s, exact
  std::vector<float> gguf(256);
  dequantize_row(GgmlType::Q6_K, &b, gguf.data(), 256);
  EXPECT_NE(gguf[0], 35.0f);  // GGUF's fp32 rule: 34.99
  EXPECT_NEAR(gguf[0], 35.0f, 35.0f / 128);
}

// A lane's four code words (and Q6_K's two high words) of group grp, read as the kernels read them.
struct LaneWords {
  uint32_t w[4];
  uint32_t h[2];
};
LaneWords lane_words(const uint8_t* blk, int codes_at, int grp, int lane, bool q6k) {
  LaneWords v{};
  std::memcpy(v.w, blk + codes_at + 16 * (32 * grp + lane), 16);
  if (q6k)
    std::memcpy(v.h, blk + kQ6KFragHighsAt + 16 * (32 * (grp / 2) + lane) + 8 * (grp % 2), 8);
  return v;
}

// One element of a lane's A fragments: fragment block (tile, sb) at blk; lane, 64-input group,
// k16 step, A register slot and its element e; r = the tile row (g + 8 (slot % 2)) and i = the
// input of the super-block (64 grp + frag_input) it must hold.
struct LaneElement {
  const uint8_t* blk;
  int64_t tile, sb;
  int lane, grp, step, slot, e, r, i;
};
std::string where(const LaneElement& el) {
  return fmt::format("tile {} sb {} lane {} group {} step {} slot {} e {}", el.tile, el.sb, el.lane,
                     el.grp, el.step, el.slot, el.e);
}

// Calls check for every element of every lane of an [n_out, n_in] matrix's fragment blocks
// (block_bytes each), then asserts that the elements covered each weight exactly once.
template <typename F>
void for_each_lane_element(const std::vector<uint8_t>& frag, int block_bytes, int64_t n_in,
                           int64_t n_out, F&& check) {
  std::vector<int> seen(static_cast<size_t>(n_out * n_in), 0);  // [row][input]
  for (int64_t tile = 0; tile < n_out / 16; ++tile)
    for (int64_t sb = 0; sb < n_in / 256; ++sb)
      for (int lane = 0; lane < 32; ++lane)
        for (int grp = 0; grp < 4; ++grp)
          for (int step = 0; step < 4; ++step)
            for (int slot = 0; slot < 4; ++slot)
              for (int e = 0; e < 2; ++e) {
                const LaneElement el{frag.data() + (tile * (n_in / 256) + sb) * block_bytes,
                                     tile,
                                     sb,
                                     lane,
                                     grp,
                                     step,
                                     slot,
                                     e,
                                     lane / 4 + 8 * (slot % 2),
                                     64 * grp + frag_input(step, slot, e, lane % 4)};
                check(el);
                if (::testing::Test::HasFatalFailure()) return;
                ++seen[static_cast<size_t>((16 * tile + el.r) * n_in + sb * 256 + el.i)];
              }
  for (size_t k = 0; k < seen.size(); ++k) ASSERT_EQ(seen[k], 1) << "weight " << k;  // each once
}

// Every lane of every block decodes, for each k16 step and A register, the codes of the inputs
// frag_input names, of rows g and g + 8, in the bf16 form 0x4300 | code; and the sub-block (Q4_K)
// or scale (Q6_K) it picks is the element's.
TEST(FragDecode, Q4KLanesDecodeTheirInputsCodes) {
  const int64_t n_in = 512, n_out = 32;
  const std::vector<BlockQ4_K> rows = random_blocks(n_out * n_in / 256, 71);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ4_K));
  q4k_to_frag(rows.data(), n_in, n_out, frag.data());
  for_each_lane_element(frag, kQ4KFragBlockBytes, n_in, n_out, [&](const LaneElement& el) {
    const LaneWords v = lane_words(el.blk, kQ4KFragCodesAt, el.grp, el.lane, false);
    const uint32_t pair = q4k_frag_biased(v.w, el.step, el.slot);
    const BlockQ4_K& b = rows[static_cast<size_t>((16 * el.tile + el.r) * (n_in / 256) + el.sb)];
    const int byte = b.qs[32 * el.grp + el.i % 32];
    const int code = el.i % 64 < 32 ? byte & 15 : byte >> 4;
    ASSERT_EQ((pair >> (16 * el.e)) & 0xFFFF, 0x4300u | static_cast<uint32_t>(code)) << where(el);
    ASSERT_EQ(q4k_frag_sub(el.grp, el.step), el.i / 32);
  });
}

TEST(FragDecode, Q6KLanesDecodeTheirInputsCodesAndScales) {
  const int64_t n_in = 512, n_out = 32;
  const std::vector<BlockQ6_K> rows = random_q6k_blocks(n_out * n_in / 256, 72);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ6_K));
  q6k_to_frag(rows.data(), n_in, n_out, frag.data());
  for_each_lane_element(frag, kQ6KFragBlockBytes, n_in, n_out, [&](const LaneElement& el) {
    const LaneWords v = lane_words(el.blk, kQ6KFragNibblesAt, el.grp, el.lane, true);
    const uint32_t pair = q6k_frag_biased(v.w, v.h, el.step, el.slot);
    const BlockQ6_K& b = rows[static_cast<size_t>((16 * el.tile + el.r) * (n_in / 256) + el.sb)];
    // The scale the kernel takes from the block's header for this row and step.
    const int8_t sc =
        static_cast<int8_t>(el.blk[16 * el.r + q6k_frag_scale(el.grp, el.step, el.lane % 4)]);
    uint16_t d = 0;
    std::memcpy(&d, el.blk + kQ6KFragDAt + 2 * el.r, 2);
    const float s = bf16_to_f32(f32_to_bf16(f16_to_f32(d) * static_cast<float>(sc)));
    const uint32_t half = (pair >> (16 * el.e)) & 0xFFFF;
    ASSERT_EQ(half, 0x4300u | static_cast<uint32_t>(q6k_code(b, el.i))) << where(el);
    // The kernel's arithmetic on it: (128 + code) - 160 exact, times s, one rounding.
    const float w =
        bf16_to_f32(f32_to_bf16((bf16_to_f32(static_cast<uint16_t>(half)) - 160.0f) * s));
    ASSERT_EQ(w, q6k_bf16_weight(b, el.i)) << "element " << el.i;
  });
}

std::vector<BlockQ8_0> random_q80_blocks(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<BlockQ8_0> v(static_cast<size_t>(n));
  for (BlockQ8_0& b : v) {
    b.d = static_cast<uint16_t>(0x2000 + byte(rng));
    for (int8_t& q : b.qs) q = static_cast<int8_t>(byte(rng) - 128);
  }
  return v;
}

TEST(Q80Frag, BytesLandWhereTheLayoutSays) {
  const int64_t n_in = 512, n_out = 32;  // two tiles of two super-blocks (16 blocks a row)
  std::vector<BlockQ8_0> rows(static_cast<size_t>(n_out * n_in / 32));
  for (BlockQ8_0& b : rows) b = BlockQ8_0{0, {}};
  // Row 25 (tile 1, row 9: g = 1, r = 1), block 13 (super-block 1, block k = 5: group 2, h = 1),
  // code 22: input 32 * 5 + 22 = 182 of the super-block = 64 * 2 + 32 + 22, so t = 2, s = 1,
  // byte 2 of word W[4 + 2 + 1] (the fourth of block h = 1's) of lane 4 * 1 + 2 = 6. Stored
  // biased: -100 + 128 = 28.
  BlockQ8_0& b = rows[25 * 16 + 13];
  b.qs[22] = -100;
  b.d = 0x1234;
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ8_0), 0xEE);
  q80_to_frag(rows.data(), n_in, n_out, frag.data());
  const size_t blk = (1 * 2 + 1) * static_cast<size_t>(kQ80FragBlockBytes);
  EXPECT_EQ(frag[blk + kQ80FragCodesAt + 16 * (64 * 2 + 32 * 1 + 6) + 4 * 3 + 2], 28);
  uint16_t d = 0;
  std::memcpy(&d, &frag[blk + 16 * 9 + 2 * 5], 2);
  EXPECT_EQ(d, 0x1234);
  int unbiased = 0, nonzero_d = 0;  // every other code is 0 (byte 128), every other d 0
  for (size_t t = 0; t < frag.size(); t += kQ80FragBlockBytes) {
    for (int k = 0; k < kQ80FragCodesAt; ++k) nonzero_d += frag[t + k] != 0;
    for (int k = kQ80FragCodesAt; k < kQ80FragBlockBytes; ++k) unbiased += frag[t + k] != 128;
  }
  EXPECT_EQ(unbiased, 1);
  EXPECT_EQ(nonzero_d, 2);
}

TEST(Q80Frag, EveryBlockComesBackBitForBit) {
  expect_round_trip<32>(random_q80_blocks(48 * 1024 / 32, 81), 1024, 48, q80_to_frag,
                        q80_frag_block);
}

// Every lane decodes, for each k16 step and A register, the exact codes of the inputs frag_input
// names, of rows g and g + 8; the d it scales that step's block by is the element's block's.
TEST(FragDecode, Q80LanesDecodeTheirInputsCodesAndBlocks) {
  const int64_t n_in = 512, n_out = 32;
  const std::vector<BlockQ8_0> rows = random_q80_blocks(n_out * n_in / 32, 82);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ8_0));
  q80_to_frag(rows.data(), n_in, n_out, frag.data());
  for_each_lane_element(frag, kQ80FragBlockBytes, n_in, n_out, [&](const LaneElement& el) {
    uint32_t w[8];  // the lane's chunks of the group's two blocks, as the kernels load them
    std::memcpy(w, el.blk + kQ80FragCodesAt + 16 * (64 * el.grp + el.lane), 16);
    std::memcpy(w + 4, el.blk + kQ80FragCodesAt + 16 * (64 * el.grp + 32 + el.lane), 16);
    const int k = q4k_frag_sub(el.grp, el.step);  // the 32-input block whose d applies
    uint16_t d = 0;
    std::memcpy(&d, el.blk + 16 * el.r + 2 * k, 2);
    const BlockQ8_0& b =
        rows[static_cast<size_t>((16 * el.tile + el.r) * (n_in / 32) + 8 * el.sb + el.i / 32)];
    ASSERT_EQ(q80_frag_code(w, el.step, el.slot, el.e), static_cast<float>(b.qs[el.i % 32]))
        << where(el);
    ASSERT_EQ(k, el.i / 32);
    ASSERT_EQ(d, b.d);
  });
}

// q5k_code is GGUF's code: d * sc * code - dmin * m is what dequantize_row gives.
TEST(Q5KFrag, CodeIsTheDequantizersCode) {
  for (const BlockQ5_K& b : random_blocks<BlockQ5_K>(4, 51)) {
    std::vector<float> y(256);
    dequantize_row(GgmlType::Q5_K, &b, y.data(), 256);
    for (int i = 0; i < 256; ++i) {
      int sc = 0, m = 0;
      unpack_k_scale_min(b.scales, i / 32, &sc, &m);
      const float want =
          f16_to_f32(b.d) * static_cast<float>(sc) * static_cast<float>(q5k_code(b, i)) -
          f16_to_f32(b.dmin) * static_cast<float>(m);
      ASSERT_FLOAT_EQ(y[static_cast<size_t>(i)], want) << "element " << i;
    }
  }
}

// Row 9 (g = 1, r = 1) of tile 0, element 64 * 3 + 32 + 13 = 237 (group 3, c = 45: t = 1,
// step 2 + 1, p = 0, e = 1): its high bit is bit 237 / 32 = 7 of qh[237 % 32 = 13]; it lands in
// lane 4 + 1's word H5(g + 8, 1) (the fourth), bit m + 8 + 16 = 6 + 24 = 30.
TEST(Q5KFrag, HighBitsLandWhereTheLayoutSays) {
  const int64_t n_in = 256, n_out = 16;
  std::vector<BlockQ5_K> rows(static_cast<size_t>(n_out));
  rows[9].qh[13] = 0x80;
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ5_K), 0xEE);
  q5k_to_frag(rows.data(), n_in, n_out, frag.data());
  uint32_t word = 0;
  std::memcpy(&word, &frag[kQ5KFragHighsAt + 16 * 5 + 4 * 3], 4);
  EXPECT_EQ(word, 1u << 30);
  int nonzero = 0;  // every other byte is a zero code's, header or bit
  for (const uint8_t v : frag) nonzero += v != 0;
  EXPECT_EQ(nonzero, 1);
}

TEST(Q5KFrag, EveryBlockComesBackBitForBit) {
  expect_round_trip(random_blocks<BlockQ5_K>(48 * 1024 / 256, 52), 1024, 48, q5k_to_frag,
                    q5k_frag_block);
}

// Every lane decodes, for each k16 step and A register, the 5-bit codes of the inputs
// frag_input names, of rows g and g + 8, as 0x4300 | code; and the kernel's arithmetic on them
// (Q4_K's) gives q5k_bf16_weight.
TEST(FragDecode, Q5KLanesDecodeTheirInputsCodes) {
  const int64_t n_in = 512, n_out = 32;
  const std::vector<BlockQ5_K> rows = random_blocks<BlockQ5_K>(n_out * n_in / 256, 53);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ5_K));
  q5k_to_frag(rows.data(), n_in, n_out, frag.data());
  for_each_lane_element(frag, kQ5KFragBlockBytes, n_in, n_out, [&](const LaneElement& el) {
    const LaneWords v = lane_words(el.blk, kQ5KFragCodesAt, el.grp, el.lane, false);
    uint32_t hw[4], h[2];  // the lane's high words, as the GEMV loads them (one 16-byte load)
    std::memcpy(hw, el.blk + kQ5KFragHighsAt + 16 * el.lane, 16);
    q5k_group_highs(hw[2 * (el.grp / 2)], hw[2 * (el.grp / 2) + 1], el.grp, h);
    const uint32_t pair = q5k_frag_biased(v.w, h, el.step, el.slot);
    const BlockQ5_K& b = rows[static_cast<size_t>((16 * el.tile + el.r) * (n_in / 256) + el.sb)];
    const uint32_t half = (pair >> (16 * el.e)) & 0xFFFF;
    ASSERT_EQ(half, 0x4300u | static_cast<uint32_t>(q5k_code(b, el.i))) << where(el);
    ASSERT_EQ(q4k_frag_sub(el.grp, el.step), el.i / 32);  // the sub-block of Q4_K's scales
  });
}

// Q4_K's rule with the high bit: d 1, sc 7, dmin 0.5, m 1, element 0's code 15 | 16 = 31:
// 31 x 7 - 0.5 = 216.5, a tie between 216 and 217 at bf16's 8 bits, rounded to even.
TEST(Q5KFrag, Bf16WeightRoundsTheSumOnce) {
  BlockQ5_K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  b.scales[0] = 7;  // sub-block 0: sc 7, m 1 (scales[4])
  b.scales[4] = 1;
  b.qs[0] = 0x0F;  // element 0's nibble 15 ...
  b.qh[0] = 0x01;  // ... and its high bit
  EXPECT_EQ(q5k_code(b, 0), 31);
  EXPECT_EQ(q5k_bf16_weight(b, 0), 216.0f);
  std::vector<float> gguf(256);
  dequantize_row(GgmlType::Q5_K, &b, gguf.data(), 256);
  EXPECT_EQ(gguf[0], 216.5f);               // GGUF's weight, before the rounding
  EXPECT_EQ(q5k_bf16_weight(b, 1), -0.5f);  // code 0: -dmin x m, exact
}

// Row 25 (tile 1, row 9: g = 1, r = 1), input 256 + 182 (super-block 1; 182 = 64 * 2 + 32 + 22:
// group 2, t = 2, step 2 + 1 (22 % 8 = 6: s = 1), pair p = 1, e = 0): lane 4 * 1 + 2 = 6, word
// slot 2 p + r = 3 of chunk (group 2, step 3), its low half.
TEST(Bf16Frag, BytesLandWhereTheLayoutSays) {
  const int64_t n_in = 512, n_out = 32;
  std::vector<uint16_t> rows(static_cast<size_t>(n_out * n_in), 0);
  rows[25 * 512 + 256 + 182] = 0xBEEF;
  std::vector<uint8_t> frag(rows.size() * 2, 0xEE);
  bf16_to_frag(rows.data(), n_in, n_out, frag.data());
  const size_t blk = (1 * 2 + 1) * static_cast<size_t>(kBf16FragBlockBytes);
  uint16_t v = 0;
  std::memcpy(&v, &frag[blk + 16 * (32 * (4 * 2 + 3) + 6) + 4 * 3], 2);
  EXPECT_EQ(v, 0xBEEF);
  int nonzero = 0;  // every other byte is a zero weight's
  for (const uint8_t b : frag) nonzero += b != 0;
  EXPECT_EQ(nonzero, 2);
}

// Random bf16 bits for an [n_out, n_in] matrix, and their fragment order.
struct Bf16Matrix {
  std::vector<uint16_t> rows;
  std::vector<uint8_t> frag;
};
Bf16Matrix random_bf16_matrix(int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  Bf16Matrix m{std::vector<uint16_t>(static_cast<size_t>(n_out * n_in)), {}};
  for (uint16_t& w : m.rows) w = static_cast<uint16_t>(rng());
  m.frag.resize(m.rows.size() * 2);
  bf16_to_frag(m.rows.data(), n_in, n_out, m.frag.data());
  return m;
}

TEST(Bf16Frag, EveryWeightComesBackBitForBit) {
  const int64_t n_in = 1024, n_out = 48;
  const auto [rows, frag] = random_bf16_matrix(n_in, n_out, 16);
  for (int64_t r = 0; r < n_out; ++r)
    for (int64_t k = 0; k < n_in; ++k)
      ASSERT_EQ(bf16_frag_weight(frag.data(), n_in, r, k), rows[static_cast<size_t>(r * n_in + k)])
          << "row " << r << " input " << k;
}

// Every lane's sixteen words of a group, read as the kernels read them, hold in A register
// `slot` of each k16 step the weights of the inputs frag_input names, of rows g and g + 8.
TEST(FragDecode, Bf16LanesHoldTheirInputsWeights) {
  const int64_t n_in = 512, n_out = 32;
  const auto [rows, frag] = random_bf16_matrix(n_in, n_out, 17);
  for_each_lane_element(frag, kBf16FragBlockBytes, n_in, n_out, [&](const LaneElement& el) {
    uint32_t w[16];  // chunk c of the group at 16 (32 (4 grp + c) + lane)
    for (int c = 0; c < 4; ++c)
      std::memcpy(w + 4 * c, el.blk + 16 * (32 * (4 * el.grp + c) + el.lane), 16);
    const uint32_t word = w[bf16_frag_word(el.step, el.slot)];
    const auto got = static_cast<uint16_t>(word >> (16 * el.e));
    ASSERT_EQ(got, rows[static_cast<size_t>((16 * el.tile + el.r) * n_in + 256 * el.sb + el.i)])
        << where(el);
  });
}

// q3k_code is GGUF's code: d * sc * (code - 4) is what dequantize_row gives, for every element.
TEST(Q3KFrag, CodeIsTheDequantizersCode) {
  for (const BlockQ3_K& b : random_blocks<BlockQ3_K>(4, 31)) {
    std::vector<float> y(256);
    dequantize_row(GgmlType::Q3_K, &b, y.data(), 256);
    for (int i = 0; i < 256; ++i)
      ASSERT_EQ(y[static_cast<size_t>(i)],
                f16_to_f32(b.d) * static_cast<float>(unpack_q3_k_scale(b.scales, i / 16)) *
                    static_cast<float>(q3k_code(b, i) - 4))
          << "element " << i;
  }
}

// Row 9 (g = 1, the upper half) of tile 0, element 200 = group 3, c = 8: t = 1, step 0, pair 0,
// e 0 (frag_input). Its code 7: low bits 4, 5 of qs[32 + 8] (200 = 128 + 2 x 32 + 8) and bit
// 200 / 32 = 6 of hmask[8]. The low bits land in group pair 1, lane 4 + 1, word L3(g + 8, 3) (the
// fourth), bits 2m + 16e = 0; the high bit in lane 5's word H3(g + 8, 1) (the fourth), bit
// m + 8 (3 % 2) + 16e = 8.
TEST(Q3KFrag, BytesLandWhereTheLayoutSays) {
  const int64_t n_in = 256, n_out = 16;
  std::vector<BlockQ3_K> rows(static_cast<size_t>(n_out));
  for (BlockQ3_K& b : rows) std::memset(&b, 0, sizeof b);
  BlockQ3_K& b = rows[9];
  b.qs[40] = 0x30;
  b.hmask[8] = 0x40;
  b.scales[0] = 0x05;
  b.d = 0x1234;
  ASSERT_EQ(q3k_code(b, 200), 7);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ3_K), 0xEE);
  q3k_to_frag(rows.data(), n_in, n_out, frag.data());
  EXPECT_EQ(frag[kQ3KFragLowsAt + 16 * (32 * 1 + 5) + 4 * 3], 0x03);
  EXPECT_EQ(frag[kQ3KFragHighsAt + 16 * 5 + 4 * 3 + 1], 0x01);
  EXPECT_EQ(frag[12 * 9], 0x05);  // row 9's first scale byte
  uint16_t d = 0;
  std::memcpy(&d, &frag[kQ3KFragDAt + 2 * 9], 2);
  EXPECT_EQ(d, 0x1234);
  int nonzero = 0;
  for (const uint8_t v : frag) nonzero += v != 0;
  EXPECT_EQ(nonzero, 5);  // the low bits, the high bit, the scale, d's two bytes: nothing else
}

TEST(Q3KFrag, EveryBlockComesBackBitForBit) {
  expect_round_trip(random_blocks<BlockQ3_K>(48 * 1024 / 256, 32), 1024, 48, q3k_to_frag,
                    q3k_frag_block);
}

// Q6_K's rule: d 0.333251953125 x sc 7 = 2.33276367 -> bf16 2.328125; element 0's code 7 (q - 4
// = 3): 6.984375, halfway between bf16 6.96875 and 7 (8 significant bits), rounded to even: 7.
TEST(Q3KFrag, Bf16WeightRoundsTheProductOnce) {
  BlockQ3_K b{};
  b.d = 0x3555;
  b.scales[0] = 0x07;  // sub-block 0: low 4 bits 7, high 2 bits (scales[8] bits 0, 1) 2: 39 - 32
  b.scales[8] = 0x02;
  b.qs[0] = 0x03;     // element 0: low bits 3 ...
  b.hmask[0] = 0x01;  // ... high bit set: code 7
  ASSERT_EQ(unpack_q3_k_scale(b.scales, 0), 7);
  ASSERT_EQ(q3k_code(b, 0), 7);
  EXPECT_EQ(q3k_bf16_weight(b, 0), 7.0f);
  EXPECT_EQ(q3k_bf16_weight(b, 1), -4.0f * 2.328125f);  // code 0: -4 x s, exact
  std::vector<float> gguf(256);
  dequantize_row(GgmlType::Q3_K, &b, gguf.data(), 256);
  EXPECT_NE(gguf[0], 7.0f);  // GGUF's fp32 rule: 6.998
  EXPECT_NEAR(gguf[0], 7.0f, 7.0f / 128);
}

// Every lane decodes, for each k16 step and A register, the 3-bit codes of the inputs frag_input
// names, of rows g and g + 8, as 0x4300 | code, from the words the GEMV would load (two 16-byte
// loads of low bits a super-block, one of high bits); the scale it picks is the element's
// sub-block's (Q6_K's index), and the kernel's arithmetic gives q3k_bf16_weight.
TEST(FragDecode, Q3KLanesDecodeTheirInputsCodesAndScales) {
  const int64_t n_in = 512, n_out = 32;
  const std::vector<BlockQ3_K> rows = random_blocks<BlockQ3_K>(n_out * n_in / 256, 33);
  std::vector<uint8_t> frag(rows.size() * sizeof(BlockQ3_K));
  q3k_to_frag(rows.data(), n_in, n_out, frag.data());
  for_each_lane_element(frag, kQ3KFragBlockBytes, n_in, n_out, [&](const LaneElement& el) {
    uint32_t lo[2], hw[4], h[2];
    std::memcpy(lo, el.blk + kQ3KFragLowsAt + 16 * (32 * (el.grp / 2) + el.lane) + 8 * (el.grp % 2),
                8);
    std::memcpy(hw, el.blk + kQ3KFragHighsAt + 16 * el.lane, 16);
    q5k_group_highs(hw[2 * (el.grp / 2)], hw[2 * (el.grp / 2) + 1], el.grp, h);
    const uint32_t pair = q3k_frag_biased(lo, h, el.step, el.slot);
    const BlockQ3_K& b = rows[static_cast<size_t>((16 * el.tile + el.r) * (n_in / 256) + el.sb)];
    const uint32_t half = (pair >> (16 * el.e)) & 0xFFFF;
    ASSERT_EQ(half, 0x4300u | static_cast<uint32_t>(q3k_code(b, el.i))) << where(el);
    // The scale from the block's header for this row and step, then (128 + code) - 132 exact,
    // times s, one rounding.
    const int sub = q6k_frag_scale(el.grp, el.step, el.lane % 4);
    ASSERT_EQ(sub, el.i / 16);
    uint16_t d = 0;
    std::memcpy(&d, el.blk + kQ3KFragDAt + 2 * el.r, 2);
    const float s = bf16_to_f32(f32_to_bf16(
        f16_to_f32(d) * static_cast<float>(unpack_q3_k_scale(el.blk + 12 * el.r, sub))));
    const float w =
        bf16_to_f32(f32_to_bf16((bf16_to_f32(static_cast<uint16_t>(half)) - 132.0f) * s));
    ASSERT_EQ(w, q3k_bf16_weight(b, el.i)) << "element " << el.i;
  });
}

}  // namespace
}  // namespace t9
