// The CUDA int8 units' word decode for Q3_K and Q5_K (quant/unit_words.h, the functions the
// kernels call): every code of random blocks, read as the kernels read their words, against the
// code GGUF's dequantization implies.
#include "quant/unit_words.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/half.h"
#include "quant/k_scales.h"

namespace t9 {
namespace {

uint32_t word_at(const uint8_t* p) {  // little-endian, as the kernels' 32-bit loads
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

template <typename Block>
std::vector<Block> random_blocks(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Block> v(static_cast<size_t>(n));
  for (Block& b : v) {
    auto* bytes = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<uint8_t>(rng());
    b.d = static_cast<uint16_t>(0x2000 + (rng() & 0xFF));  // small positive f16 scale
  }
  return v;
}

// Q3_K: the weight of element e is d * scale(e / 16) * (code - 4); the code GGUF implies is
// the one whose d * scale * (code - 4) is the dequantized float, checked where the scale is not
// zero (there every code gives 0). Every element of every unit, group and word once.
TEST(UnitWords, Q3KCodesAreGgufs) {
  const std::vector<BlockQ3_K> blocks = random_blocks<BlockQ3_K>(16, 31);
  int checked = 0;
  for (const BlockQ3_K& b : blocks) {
    std::vector<float> y(256);
    dequantize_row(GgmlType::Q3_K, &b, y.data(), 256);
    for (int v = 0; v < 4; ++v) {
      const int h = v / 2, lh = v % 2;
      for (int k = 0; k < 4; ++k) {
        const uint32_t qs = word_at(b.qs + 32 * h + 16 * lh + 4 * k);
        const uint32_t hm = word_at(b.hmask + 16 * lh + 4 * k) >> (4 * h);
        for (int s = 0; s < 4; ++s) {
          const uint32_t codes = q3k_unit_codes(qs, hm, s);
          for (int i = 0; i < 4; ++i) {
            const int e = 128 * h + 32 * s + 16 * lh + 4 * k + i;
            const int code = static_cast<int>((codes >> (8 * i)) & 0xFF);
            ASSERT_LT(code, 8) << "element " << e;
            const float dl =
                f16_to_f32(b.d) * static_cast<float>(unpack_q3_k_scale(b.scales, e / 16));
            if (dl == 0.0f) continue;  // every code gives 0: nothing to compare
            ASSERT_EQ(y[static_cast<size_t>(e)], dl * static_cast<float>(code - 4))
                << "unit " << v << " word " << k << " group " << s << " element " << e;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 16 * 256 * 9 / 10);  // zero scales (1 in 64) skipped, no more
}

// Q5_K: weight = d * sc * code - dmin * m for sub-block e / 32 (as dequant_q5_k computes it), so
// the same expression over the decoded code must give the same float (where d * sc is not zero).
TEST(UnitWords, Q5KCodesAreGgufs) {
  const std::vector<BlockQ5_K> blocks = random_blocks<BlockQ5_K>(16, 32);
  int checked = 0;
  for (const BlockQ5_K& b : blocks) {
    std::vector<float> y(256);
    dequantize_row(GgmlType::Q5_K, &b, y.data(), 256);
    for (int p = 0; p < 4; ++p)
      for (int k = 0; k < 8; ++k) {
        const uint32_t qs = word_at(b.qs + 32 * p + 4 * k);
        const uint32_t qh = word_at(b.qh + 4 * k) >> (2 * p);
        for (int n = 0; n < 2; ++n) {
          const uint32_t codes = q5k_unit_codes(qs, qh, n);
          for (int i = 0; i < 4; ++i) {
            const int e = 64 * p + 32 * n + 4 * k + i;
            const int code = static_cast<int>((codes >> (8 * i)) & 0xFF);
            ASSERT_LT(code, 32) << "element " << e;
            int sc = 0, m = 0;
            unpack_k_scale_min(b.scales, e / 32, &sc, &m);
            const float d1 = f16_to_f32(b.d) * static_cast<float>(sc);
            const float m1 = f16_to_f32(b.dmin) * static_cast<float>(m);
            if (d1 == 0.0f) continue;  // every code gives -m1: nothing to compare
            ASSERT_EQ(y[static_cast<size_t>(e)], d1 * static_cast<float>(code) - m1)
                << "unit " << p << " word " << k << " half " << n << " element " << e;
            ++checked;
          }
        }
      }
  }
  EXPECT_GT(checked, 16 * 256 * 9 / 10);  // zero scales (1 in 64) skipped, no more
}

}  // namespace
}  // namespace t9
