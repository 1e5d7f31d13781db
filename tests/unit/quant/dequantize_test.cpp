// Hand-made blocks whose decoded values are worked out by hand from the GGUF block layouts
// (comments give the arithmetic). Random-data parity with gguf.quants is in tests/py/quant.
#include "quant/dequantize.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "quant/blocks.h"

namespace t9 {
namespace {

template <typename Block>
std::vector<float> decode(GgmlType t, const Block& b) {
  std::vector<float> y(traits(t).block_elems);
  dequantize_row(t, &b, y.data(), static_cast<int64_t>(y.size()));
  return y;
}

constexpr uint16_t kF16Half = 0x3800, kF16Quarter = 0x3400, kF16One = 0x3C00, kF16Two = 0x4000;
constexpr uint16_t kF16MinusOne = 0xBC00, kF16Eighth = 0x3000;

TEST(Dequantize, Q4_0) {
  BlockQ4_0 b{};
  b.d = kF16Half;
  for (auto& q : b.qs) q = 0x88;  // every value 8 - 8 = 0
  b.qs[0] = 0x1F;                 // x[0] = 0.5 * (15 - 8), x[16] = 0.5 * (1 - 8)
  b.qs[15] = 0x08 | 0x00;         // x[15] = 0, x[31] = 0.5 * (0 - 8)
  const auto y = decode(GgmlType::Q4_0, b);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -3.5f);
  EXPECT_EQ(y[15], 0.0f);
  EXPECT_EQ(y[31], -4.0f);
  EXPECT_EQ(y[7], 0.0f);
}

TEST(Dequantize, Q4_1) {
  BlockQ4_1 b{};
  b.d = kF16Half;
  b.m = kF16MinusOne;
  b.qs[3] = 0xA5;  // x[3] = 0.5 * 5 - 1, x[19] = 0.5 * 10 - 1
  const auto y = decode(GgmlType::Q4_1, b);
  EXPECT_EQ(y[3], 1.5f);
  EXPECT_EQ(y[19], 4.0f);
  EXPECT_EQ(y[0], -1.0f);  // q = 0 decodes to the min
}

TEST(Dequantize, Q5_0) {
  BlockQ5_0 b{};
  b.d = kF16Quarter;
  b.qs[2] = 0x3C;
  b.qh[0] = 1 << 2;  // fifth bit of x[2] set; x[18]'s (bit 18) clear
  const auto y = decode(GgmlType::Q5_0, b);
  EXPECT_EQ(y[2], 3.0f);     // 0.25 * ((0xC | 0x10) - 16)
  EXPECT_EQ(y[18], -3.25f);  // 0.25 * (3 - 16)
  EXPECT_EQ(y[0], -4.0f);    // 0.25 * (0 - 16)
}

TEST(Dequantize, Q5_1) {
  BlockQ5_1 b{};
  b.d = kF16Two;
  b.m = kF16Half;
  b.qs[15] = 0x0F;
  b.qh[1] = 0x80;  // bit 15: x[15]
  b.qh[3] = 0x80;  // bit 31: x[31]
  const auto y = decode(GgmlType::Q5_1, b);
  EXPECT_EQ(y[15], 62.5f);  // 2 * 31 + 0.5
  EXPECT_EQ(y[31], 32.5f);  // 2 * 16 + 0.5
  EXPECT_EQ(y[14], 0.5f);
}

TEST(Dequantize, Q8_0) {
  BlockQ8_0 b{};
  b.d = kF16Eighth;
  b.qs[5] = -128;
  b.qs[31] = 127;
  const auto y = decode(GgmlType::Q8_0, b);
  EXPECT_EQ(y[5], -16.0f);
  EXPECT_EQ(y[31], 15.875f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(Dequantize, Q2_K) {
  BlockQ2_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  // Element 200 = 128 * 1 + 32 * 2 + 8: bits 4..5 of qs[32 + 8]; sub-block 200 / 16 = 12.
  b.scales[12] = 0x35;  // scale 5, min 3
  b.qs[40] = 2 << 4;
  const auto y = decode(GgmlType::Q2_K, b);
  EXPECT_EQ(y[200], 8.5f);   // 1 * 5 * 2 - 0.5 * 3
  EXPECT_EQ(y[201], -1.5f);  // q = 0: just the min
  EXPECT_EQ(y[0], 0.0f);     // sub-block 0: scale and min 0
}

TEST(Dequantize, Q3_K) {
  BlockQ3_K b{};
  b.d = kF16One;
  // Sub-block 5: low bits from scales[5] & 0xF = 3, high bits from scales[8 + 1] >> 2 = 2:
  // (3 | 2 << 4) - 32 = 3.
  b.scales[5] = 0x03;
  b.scales[9] = 0x08;
  // Sub-block 12: low bits from scales[4] >> 4 = 10, high bits from scales[8] >> 6 = 1: -6.
  b.scales[4] = 0xA0;
  b.scales[8] = 0x40;
  // Element 85 = 32 * 2 + 21: bits 4..5 of qs[21]; hmask[21] bit 2 clear -> subtract 4.
  b.qs[21] = 1 << 4;
  // Element 84: bits 4..5 of qs[20] = 3, hmask[20] bit 2 set -> no offset.
  b.qs[20] = 3 << 4;
  b.hmask[20] = 1 << 2;
  // Element 200 = 128 + 64 + 8: bits 4..5 of qs[32 + 8] = 2, hmask[8] bit 200 / 32 = 6 set.
  b.qs[40] = 2 << 4;
  b.hmask[8] = 1 << 6;
  const auto y = decode(GgmlType::Q3_K, b);
  EXPECT_EQ(y[85], -9.0f);    // 3 * (1 - 4)
  EXPECT_EQ(y[84], 9.0f);     // 3 * 3
  EXPECT_EQ(y[200], -12.0f);  // -6 * 2
  EXPECT_EQ(y[86], -12.0f);   // 3 * (0 - 4)
}

BlockQ4_K q4_k_block() {
  BlockQ4_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  // Sub-block 1: scale scales[1] & 63 = 7, min scales[5] & 63 = 2.
  b.scales[1] = 0x07;
  b.scales[5] = 0x02;
  // Sub-block 6: scale (scales[10] & 0xF) | (scales[2] >> 6) << 4 = 1 | 16 = 17,
  //              min (scales[10] >> 4) | (scales[6] >> 6) << 4 = 3 | 48 = 51.
  b.scales[10] = 0x31;
  b.scales[2] = 0x40;
  b.scales[6] = 0xC0;
  b.qs[8] = 0x90;    // element 40 (sub-block 1 = high nibbles of qs[0..31]): 9
  b.qs[101] = 0x0C;  // element 197 (sub-block 6 = low nibbles of qs[96..127]): 12
  return b;
}

TEST(Dequantize, Q4_K) {
  const auto y = decode(GgmlType::Q4_K, q4_k_block());
  EXPECT_EQ(y[40], 62.0f);    // 7 * 9 - 0.5 * 2
  EXPECT_EQ(y[197], 178.5f);  // 17 * 12 - 0.5 * 51
  EXPECT_EQ(y[33], -1.0f);    // q = 0
}

TEST(Dequantize, Q5_K) {
  const BlockQ4_K q4 = q4_k_block();
  BlockQ5_K b{};
  b.d = q4.d;
  b.dmin = q4.dmin;
  std::memcpy(b.scales, q4.scales, sizeof(b.scales));
  std::memcpy(b.qs, q4.qs, sizeof(b.qs));
  b.qh[8] = 1 << 1;  // fifth bit of element 40 (bit 40 / 32 = 1 of qh[40 % 32])
  const auto y = decode(GgmlType::Q5_K, b);
  EXPECT_EQ(y[40], 174.0f);   // 7 * (9 + 16) - 1
  EXPECT_EQ(y[197], 178.5f);  // as Q4_K: no fifth bit
}

TEST(Dequantize, Q6_K) {
  BlockQ6_K b{};
  b.d = kF16Half;
  // Element 100 = 64 + 36: high nibble of ql[36]; = 96 + 4: bits 6..7 of qh[4]; sub-block 6.
  b.ql[36] = 0x50;
  b.qh[4] = 0x80;
  b.scales[6] = -3;
  // Element 130 = 128 + 2: low nibble of ql[64 + 2], bits 0..1 of qh[32 + 2]; sub-block 8.
  b.ql[66] = 0x0F;
  b.scales[8] = 10;
  const auto y = decode(GgmlType::Q6_K, b);
  EXPECT_EQ(y[100], -7.5f);   // 0.5 * -3 * ((5 | 2 << 4) - 32)
  EXPECT_EQ(y[130], -85.0f);  // 0.5 * 10 * (15 - 32)
}

TEST(Dequantize, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.25f;
  b.qs[7] = -100;
  b.qs[255] = 3;
  const auto y = decode(GgmlType::Q8_K, b);
  EXPECT_EQ(y[7], -25.0f);
  EXPECT_EQ(y[255], 0.75f);
}

TEST(Dequantize, IQ4_NL) {
  BlockIQ4_NL b{};
  b.d = kF16Half;
  b.qs[0] = 0xF0;  // x[0] = 0.5 * -127 (index 0), x[16] = 0.5 * 113 (index 15)
  const auto y = decode(GgmlType::IQ4_NL, b);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[1], -63.5f);
}

TEST(Dequantize, IQ4_XS) {
  BlockIQ4_XS b{};
  b.d = kF16One;
  // Sub-block 3: low bits scales_l[1] >> 4 = 5, high bits (scales_h >> 6) & 3 = 2: 37 - 32 = 5.
  b.scales_l[1] = 0x50;
  b.scales_h = 0x0080;
  b.qs[16 * 3 + 1] = 0x83;  // element 97: index 3 (-65); element 113: index 8 (1)
  const auto y = decode(GgmlType::IQ4_XS, b);
  EXPECT_EQ(y[97], -325.0f);
  EXPECT_EQ(y[113], 5.0f);
  EXPECT_EQ(y[0], 127.0f * 32);  // sub-block 0: scale 0 - 32 = -32, index 0 (-127)
}

TEST(Dequantize, PlainTypes) {
  const uint16_t f16[3] = {0x3C00, 0xC000, 0x0001};
  const uint16_t bf16[2] = {0x3F80, 0xC040};
  const float f32[2] = {1.25f, -7.0f};
  float y[3];
  dequantize_row(GgmlType::F16, f16, y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 5.9604644775390625e-8f);  // 2^-24
  dequantize_row(GgmlType::BF16, bf16, y, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  dequantize_row(GgmlType::F32, f32, y, 2);
  EXPECT_EQ(y[0], 1.25f);
  EXPECT_EQ(y[1], -7.0f);
}

TEST(Dequantize, SeveralBlocksAdvanceTogether) {
  BlockQ8_0 b[2]{};
  b[0].d = kF16One;
  b[1].d = kF16Two;
  b[0].qs[31] = 5;
  b[1].qs[0] = 5;
  std::vector<float> y(64);
  dequantize_row(GgmlType::Q8_0, b, y.data(), 64);
  EXPECT_EQ(y[31], 5.0f);
  EXPECT_EQ(y[32], 10.0f);
}

TEST(Dequantize, SupportedTypes) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS})
    EXPECT_TRUE(can_dequantize(t)) << type_name(t);
  EXPECT_FALSE(can_dequantize(GgmlType::IQ2_XXS));
  EXPECT_FALSE(can_dequantize(GgmlType::Q8_1));
}

TEST(Dequantize, BytesValidatesInput) {
  std::vector<uint8_t> raw(2 * sizeof(BlockQ4_K));
  auto ok = dequantize_bytes(GgmlType::Q4_K, raw.data(), raw.size());
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->size(), 512u);

  auto partial = dequantize_bytes(GgmlType::Q4_K, raw.data(), 200);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.message(),
            "dequantize: 200 bytes is not a whole number of Q4_K blocks of 144 bytes");

  auto unsupported = dequantize_bytes(GgmlType::IQ2_XXS, raw.data(), 66);
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.message(), "dequantize: type IQ2_XXS is not supported");
}

}  // namespace
}  // namespace t9
