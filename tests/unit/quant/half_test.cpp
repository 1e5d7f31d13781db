// fp16 / bf16 conversions against values worked out by hand from IEEE 754 binary16 and bfloat16.
#include "quant/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace t9 {
namespace {

float pow2(int e) {
  return std::ldexp(1.0f, e);
}

TEST(Half, F16ToF32NormalsZerosAndLimits) {
  EXPECT_EQ(f32_to_bits(f16_to_f32(0x0000)), 0x00000000u);
  EXPECT_EQ(f32_to_bits(f16_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);  // 1.0101010101b * 2^-2
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);         // largest finite
  EXPECT_EQ(f16_to_f32(0x0400), pow2(-14));        // smallest normal
}

TEST(Half, F16ToF32Subnormals) {
  EXPECT_EQ(f16_to_f32(0x0001), pow2(-24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0002), pow2(-23));
  EXPECT_EQ(f16_to_f32(0x03FF), 1023.0f * pow2(-24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x8001), -pow2(-24));
}

TEST(Half, F16ToF32InfAndNaN) {
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));  // signalling payload is still NaN
  EXPECT_TRUE(std::signbit(f16_to_f32(0xFE00)));
}

TEST(Half, F32ToF16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 (even mantissa) and 1 + 2^-10: goes to 1.
  EXPECT_EQ(f32_to_f16(1.0f + pow2(-11)), 0x3C00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): goes up.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * pow2(-11)), 0x3C02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(f32_to_f16(1.0f + pow2(-11) + pow2(-20)), 0x3C01);
  EXPECT_EQ(f32_to_f16(0.02f), 0x251F);  // 1.28 * 2^-6: mantissa 286.72 -> 287
}

TEST(Half, F32ToF16OverflowAndSubnormals) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);  // below the halfway point to 65536
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // halfway, ties to even = infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(pow2(-24)), 0x0001);
  EXPECT_EQ(f32_to_f16(pow2(-25)), 0x0000);      // halfway between 0 and 2^-24: even (0)
  EXPECT_EQ(f32_to_f16(3 * pow2(-25)), 0x0002);  // halfway between 1 and 2 ulps: even (2)
  EXPECT_EQ(f32_to_f16(1.5f * pow2(-25) * 1.01f), 0x0001);
  EXPECT_EQ(f32_to_f16(pow2(-14) - pow2(-24)), 0x03FF);  // largest subnormal, exact
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);
}

TEST(Half, F32ToF16InfAndNaN) {
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(Half, F16RoundTripsEveryNonNaNValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0) continue;  // NaNs: payload not kept
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Half, Bf16Conversions) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), bits_to_f32(0x00010000u));  // subnormal stays subnormal
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  // Ties: 1 + 2^-8 is halfway between 0x3F80 (even) and 0x3F81.
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F808000u)), 0x3F80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F818000u)), 0x3F82);  // from odd 0x3F81 up to even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F808001u)), 0x3F81);  // above halfway
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x00008000u)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  // NaNs stay NaN and become quiet, even when only low payload bits are set.
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0xFFC00000u)), 0xFFC0);
}

}  // namespace
}  // namespace t9
