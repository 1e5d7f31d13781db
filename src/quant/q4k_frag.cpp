#include "quant/q4k_frag.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/half.h"
#include "quant/k_scales.h"

namespace t9 {
namespace {

constexpr int kHeaderBytes = 16;  // d, dmin, 12 scale bytes: a block's first bytes
constexpr int kCodesAt = kQ4KFragTileRows * kHeaderBytes;

// Calls f(r, c, at) for the 16 x 32 code words of a block: tile row r's code bytes c .. c + 3
// are stored at `at` (offset in the fragment-ordered block) as (c, c + 2, c + 1, c + 3).
template <typename F>
void for_each_word(F&& f) {
  for (int r = 0; r < kQ4KFragTileRows; ++r) {
    const int g = r % 8;
    for (int grp = 0; grp < 4; ++grp)
      for (int t = 0; t < 4; ++t)
        for (int h = 0; h < 2; ++h)  // bytes 8t .. 8t + 3, then 8t + 4 .. 8t + 7
          f(r, 32 * grp + 8 * t + 4 * h,
            kCodesAt + 16 * (32 * grp + 4 * g + t) + 4 * (2 * (r / 8) + h));
  }
}

// Round to nearest even bf16 of an exact double: through float with round-to-odd (truncate,
// then set the last bit when inexact), which keeps the one rounding that matters.
float to_bf16_rne(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
    f = bits_to_f32(f32_to_bits(f) | 1u);
  }
  return bf16_to_f32(f32_to_bf16(f));
}

}  // namespace

void q4k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  T9_CHECK(q4k_frag_shape_ok(n_in, n_out), "q4k_to_frag: shape [{}, {}]", n_out, n_in);
  const int64_t n_sb = n_in / 256;
  const auto* in = static_cast<const BlockQ4_K*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t tile = 0; tile < n_out / kQ4KFragTileRows; ++tile)
    for (int64_t b = 0; b < n_sb; ++b) {
      uint8_t* blk = out + (tile * n_sb + b) * kQ4KFragBlockBytes;
      const BlockQ4_K* rows = in + tile * kQ4KFragTileRows * n_sb + b;  // row r: rows[r * n_sb]
      for (int r = 0; r < kQ4KFragTileRows; ++r)
        std::memcpy(blk + kHeaderBytes * r, &rows[r * n_sb], kHeaderBytes);
      for_each_word([&](int r, int c, int at) {
        const uint8_t* q = rows[r * n_sb].qs + c;
        blk[at] = q[0], blk[at + 1] = q[2], blk[at + 2] = q[1], blk[at + 3] = q[3];
      });
    }
}

BlockQ4_K q4k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b) {
  const int64_t n_sb = n_in / 256;
  const auto* blk = static_cast<const uint8_t*>(frag) +
                    ((row / kQ4KFragTileRows) * n_sb + b) * kQ4KFragBlockBytes;
  const int want = static_cast<int>(row % kQ4KFragTileRows);
  BlockQ4_K q;
  std::memcpy(&q, blk + kHeaderBytes * want, kHeaderBytes);
  for_each_word([&](int r, int c, int at) {
    if (r != want) return;
    q.qs[c] = blk[at], q.qs[c + 2] = blk[at + 1], q.qs[c + 1] = blk[at + 2],
    q.qs[c + 3] = blk[at + 3];
  });
  return q;
}

float q4k_bf16_weight(const BlockQ4_K& b, int i) {
  const int grp = i / 64, k = i % 64, sub = 2 * grp + k / 32;
  int sc = 0, m = 0;
  unpack_k_scale_min(b.scales, sub, &sc, &m);
  const float s = bf16_to_f32(f32_to_bf16(f16_to_f32(b.d) * static_cast<float>(sc)));
  const float mn = bf16_to_f32(f32_to_bf16(-f16_to_f32(b.dmin) * static_cast<float>(m)));
  const uint8_t byte = b.qs[32 * grp + k % 32];
  const int q = k < 32 ? (byte & 15) : (byte >> 4);
  // q * s has at most 12 significant bits and mn 8: their sum is exact in double while their
  // exponents lie within 41 of each other (d and dmin of one block are f16 values of similar
  // size in real files), then rounded once.
  return to_bf16_rne(q * static_cast<double>(s) + mn);
}

}  // namespace t9
