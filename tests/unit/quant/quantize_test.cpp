// Reference quantizers on inputs whose encoding is worked out by hand, plus round-trip error
// bounds derived from each format's step size. Byte parity with gguf.quants on random data is in
// tests/py/quant/test_quants.py.
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/half.h"

namespace t9 {
namespace {

template <typename Block>
Block encode(GgmlType t, const std::vector<float>& x) {
  Block b;
  EXPECT_EQ(x.size(), traits(t).block_elems);
  quantize_row(t, x.data(), &b, static_cast<int64_t>(x.size()));
  return b;
}

TEST(Quantize, NearestIntRoundsHalfToEven) {
  EXPECT_EQ(nearest_int(2.5f), 2);
  EXPECT_EQ(nearest_int(3.5f), 4);
  EXPECT_EQ(nearest_int(-2.5f), -2);
  EXPECT_EQ(nearest_int(-0.5f), 0);
  EXPECT_EQ(nearest_int(1.49f), 1);
  EXPECT_EQ(nearest_int(-31.6f), -32);
  EXPECT_EQ(nearest_int(4194303.0f), 4194303);
}

TEST(Quantize, Q8_0KnownBlock) {
  std::vector<float> x(32, 0.0f);
  x[3] = -2.54f;  // amax: d = 2.54 / 127 = 0.02, q = -127
  x[10] = 1.0f;   // 1 / 0.02 = 50
  const auto b = encode<BlockQ8_0>(GgmlType::Q8_0, x);
  EXPECT_EQ(b.d, 0x251F);  // fp16(0.02): 1.28 * 2^-6, mantissa 286.72 -> 287
  EXPECT_EQ(b.qs[3], -127);
  EXPECT_EQ(b.qs[10], 50);
  EXPECT_EQ(b.qs[0], 0);
}

TEST(Quantize, Q4_0KnownBlock) {
  // x[j] = j - 8: the largest magnitude is x[31] = 23, so d = 23 / -8 = -2.875 (exact in fp16:
  // -1.4375 * 2) and q = trunc(x / d + 8.5), clamped to 15.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 8);
  const auto b = encode<BlockQ4_0>(GgmlType::Q4_0, x);
  EXPECT_EQ(b.d, 0xC1C0);
  EXPECT_EQ(b.qs[0] & 0xF, 11);  // 8 / 2.875 + 8.5 = 11.28
  EXPECT_EQ(b.qs[8] & 0xF, 8);   // 0 + 8.5
  EXPECT_EQ(b.qs[15] >> 4, 0);   // x[31]: -8 + 8.5 = 0.5
  EXPECT_EQ(b.qs[0] >> 4, 5);    // x[16] = 8: -2.78 + 8.5 = 5.72
}

TEST(Quantize, Q5_KRampIsExact) {
  // Every sub-block is 0, 1, ..., 31: the min/max grid fits it with scale 1 and min 0 exactly, so
  // all 6-bit scales are 63 (d = 1/63), mins 0, and element e gets level e % 32.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e % 32);
  const auto b = encode<BlockQ5_K>(GgmlType::Q5_K, x);
  EXPECT_EQ(b.d, f32_to_f16(1.0f / 63.0f));
  EXPECT_EQ(b.dmin, 0);
  const uint8_t want_scales[12] = {0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0x0F, 0x0F, 0x0F, 0x0F};
  EXPECT_EQ(std::memcmp(b.scales, want_scales, 12), 0);
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(b.qh[l], l >= 16 ? 0xFF : 0x00) << l;
    for (int c = 0; c < 4; ++c) EXPECT_EQ(b.qs[32 * c + l], (l & 0xF) * 0x11) << l;
  }
}

TEST(Quantize, Q4_KRampIsExact) {
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e % 16);  // two ramps per sub-block
  const auto b = encode<BlockQ4_K>(GgmlType::Q4_K, x);
  EXPECT_EQ(b.d, f32_to_f16(1.0f / 63.0f));
  EXPECT_EQ(b.dmin, 0);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(b.qs[i], (i % 16) * 0x11) << i;
}

TEST(Quantize, Q6_KGridValuesAreExact) {
  // Sub-block values 0.25 * (l - 8), l < 16: the largest magnitude -2 maps to level -32, so
  // each sub-block fits x = (1/16) * 4 (l - 8) exactly (scale 1/16); the super-block maps that
  // scale to -128, so d = -1/2048 (fp16 0x9000), all scales -128, and the levels
  // 4 (l - 8) + 32 = 4l decode back to x bit-exactly.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = 0.25f * static_cast<float>(e % 16 - 8);
  const auto b = encode<BlockQ6_K>(GgmlType::Q6_K, x);
  EXPECT_EQ(b.d, 0x9000);
  for (int8_t s : b.scales) EXPECT_EQ(s, -128);
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q6_K, &b, y.data(), 256);
  EXPECT_EQ(y, x);
}

TEST(Quantize, Q3_KGridValuesAreExact) {
  // Sub-block values l % 8 - 4 (-4..3): the largest magnitude -4 maps to level -4, so every
  // sub-block fits with scale 1 and the level refit has nothing to move. Scale 1 is the largest,
  // mapped to -32: d = 1 / -32 (fp16 0xA800), every stored 6-bit scale is -32 + 32 = 0, and the
  // levels decode back to x exactly.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e % 8 - 4);
  const auto b = encode<BlockQ3_K>(GgmlType::Q3_K, x);
  EXPECT_EQ(b.d, 0xA800);
  for (uint8_t s : b.scales) EXPECT_EQ(s, 0);
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q3_K, &b, y.data(), 256);
  EXPECT_EQ(y, x);
}

TEST(Quantize, Q2_KRampIsNearlyExact) {
  // Sub-block values l % 4: fitted with scale 1 and min 0, so the 4-bit scales are all 15
  // (d = fp16(1/15)), mins 0 (dmin 0) and levels equal the values. Decoding multiplies by
  // fp16(1/15) * 15 = 1 within fp16's relative 2^-11, so |error| <= 3 * 2^-11.
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e % 4);
  const auto b = encode<BlockQ2_K>(GgmlType::Q2_K, x);
  EXPECT_EQ(b.d, f32_to_f16(1.0f / 15.0f));
  EXPECT_EQ(b.dmin, 0);
  for (uint8_t s : b.scales) EXPECT_EQ(s, 0x0F);
  // Element 128h + 32s + l sits in bits 2s of qs[32h + l]; its level is l % 4 for every s.
  for (int i = 0; i < 64; ++i) EXPECT_EQ(b.qs[i], (i % 4) * 0x55) << i;
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q2_K, &b, y.data(), 256);
  for (int e = 0; e < 256; ++e) EXPECT_NEAR(y[e], x[e], 3 * 0x1p-11) << e;
}

TEST(Quantize, Q8_KKnownBlock) {
  // x[j] = j - 128: the largest magnitude is x[0] = -128, iscale = -127 / -128 = 0.9921875.
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>(j - 128);
  const auto b = encode<BlockQ8_K>(GgmlType::Q8_K, x);
  EXPECT_EQ(b.d, 1.0f / 0.9921875f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[255], 126);  // 127 * 0.9921875 = 126.008
  EXPECT_EQ(b.qs[192], 64);   // 64 * 0.9921875 = 63.5: half to even
  EXPECT_EQ(b.qs[64], -64);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
    EXPECT_EQ(b.bsums[g], sum);
  }
}

TEST(Quantize, ZeroBlocksEncodeToZeros) {
  const std::vector<float> x(256, 0.0f);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::Q8_K}) {
    std::vector<uint8_t> q(row_bytes(t, 256), 0xAB);
    quantize_row(t, x.data(), q.data(), 256);
    std::vector<float> y(256, 1.0f);
    dequantize_row(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << type_name(t);
  }
}

// Largest |error| per block in units of the block's ideal step amax / levels, over random
// Gaussian data. A rounding quantizer errs by at most half a step; clamping the edge value of
// the symmetric formats (Q4_0/Q5_0 map +amax to level 2^(b-1), clamped to 2^(b-1) - 1) costs a
// full step; fp16 scales add a relative 2^-11 per level.
double worst_error_in_steps(GgmlType t, int block, double levels) {
  std::mt19937 gen(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(block * 64);
  for (auto& v : x) v = dist(gen);
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  std::vector<float> y(x.size());
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    double amax = 0, err = 0;
    for (int j = 0; j < block; ++j) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[b0 + j])));
      err = std::max(err, std::fabs(static_cast<double>(y[b0 + j]) - x[b0 + j]));
    }
    worst = std::max(worst, err / (amax / levels));
  }
  return worst;
}

TEST(Quantize, LegacyRoundTripErrorWithinHalfStep) {
  EXPECT_LE(worst_error_in_steps(GgmlType::Q8_0, 32, 127), 0.5 + 127 * 0x1p-11);
  EXPECT_LE(worst_error_in_steps(GgmlType::Q4_0, 32, 8), 1.0 + 8 * 0x1p-11);
  EXPECT_LE(worst_error_in_steps(GgmlType::Q5_0, 32, 16), 1.0 + 16 * 0x1p-11);
  // Q8_K keeps d in float32 and maps amax to exactly 127 levels: half a step, plus float
  // rounding of iscale.
  EXPECT_LE(worst_error_in_steps(GgmlType::Q8_K, 256, 127), 0.5 + 1e-4);
}

TEST(Quantize, SupportedTypesAndValidation) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::Q8_K})
    EXPECT_TRUE(can_quantize(t)) << type_name(t);
  EXPECT_TRUE(can_quantize(GgmlType::Q2_K));
  EXPECT_TRUE(can_quantize(GgmlType::Q3_K));
  EXPECT_FALSE(can_quantize(GgmlType::IQ4_NL));

  const std::vector<float> x(40, 1.0f);
  auto bad = quantize_floats(GgmlType::Q8_0, x.data(), 40);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "quantize: 40 elements is not a multiple of Q8_0's block of 32");
  auto good = quantize_floats(GgmlType::BF16, x.data(), 40);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->size(), 80u);
  EXPECT_EQ((*good)[0], 0x80);  // bf16(1.0) = 0x3F80, little-endian
  EXPECT_EQ((*good)[1], 0x3F);
}

}  // namespace
}  // namespace t9
