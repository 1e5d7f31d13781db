#include "quant/frag_layout.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/half.h"
#include "quant/k_scales.h"

namespace t9 {
namespace {

constexpr int kHeaderBytes = 16;  // Q4_K: d, dmin, 12 scale bytes: a block's first bytes

// Calls f(r, c, at) for the 16 x 32 code words of a block whose code area starts at codes_at:
// tile row r's code bytes c .. c + 3 are stored at `at` (offset in the fragment-ordered block) as
// (c, c + 2, c + 1, c + 3).
template <typename F>
void for_each_word(int codes_at, F&& f) {
  for (int r = 0; r < kFragTileRows; ++r) {
    const int g = r % 8;
    for (int grp = 0; grp < 4; ++grp)
      for (int t = 0; t < 4; ++t)
        for (int h = 0; h < 2; ++h)  // bytes 8t .. 8t + 3, then 8t + 4 .. 8t + 7
          f(r, 32 * grp + 8 * t + 4 * h,
            codes_at + 16 * (32 * grp + 4 * g + t) + 4 * (2 * (r / 8) + h));
  }
}

// Where a field of tile row r's element i (0..255) goes: byte `at`, from bit shift (the words
// are little-endian).
struct HighBits {
  int at, shift;
};
// Element i = 64 grp + c, c = 32 (step / 2) + 8 t + 4 (step % 2) + 2 p + e (frag_input).
struct LanePos {
  int grp, t, step, p, e;
};
LanePos lane_pos(int i) {
  const int c = i % 64;
  return {i / 64, c % 32 / 8, 2 * (c / 32) + c % 8 / 4, c % 4 / 2, c % 2};
}
// 2-bit fields in words of one group pair a lane (Q6_K's high bits, Q3_K's low bits): group pair
// h and lane L at base + 16 (32 h + L), word 2 (grp % 2) + r / 8, bits 2m + 16 e (m = 2 step +
// p).
HighBits pair_word_bits_at(int base, int r, int i) {
  const LanePos q = lane_pos(i);
  const int bit = 2 * (2 * q.step + q.p) + 16 * q.e;
  const int at =
      base + 16 * (32 * (q.grp / 2) + 4 * (r % 8) + q.t) + 4 * (2 * (q.grp % 2) + r / 8) + bit / 8;
  return {at, bit % 8};
}
// 1-bit fields in words of the whole super-block a lane (Q5_K's and Q3_K's high bits): lane L at
// base + 16 L, word 2 (grp / 2) + r / 8, bit m + 8 (grp % 2) + 16 e.
HighBits block_word_bit_at(int base, int r, int i) {
  const LanePos q = lane_pos(i);
  const int bit = 2 * q.step + q.p + 8 * (q.grp % 2) + 16 * q.e;
  const int word = 2 * (q.grp / 2) + r / 8;
  return {base + 16 * (4 * (r % 8) + q.t) + 4 * word + bit / 8, bit % 8};
}
// Where a Q6_K code's high 2 bits go.
HighBits q6k_high_at(int r, int i) {
  return pair_word_bits_at(kQ6KFragHighsAt, r, i);
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

// Calls f(blk, rows) for every (16-row tile, super-block) of a matrix of GGUF blocks `Block`:
// blk is its fragment-ordered block in dst (16 x sizeof(Block) bytes), rows the tile's first row's
// block of that super-block (row r's: rows[r * n_in / 256]).
template <typename Block, typename F>
void for_each_frag_block(const void* src, int64_t n_in, int64_t n_out, void* dst, F&& f) {
  T9_CHECK(frag_shape_ok(n_in, n_out), "to fragment order: shape [{}, {}]", n_out, n_in);
  const int64_t n_sb = n_in / 256;
  const auto* in = static_cast<const Block*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t tile = 0; tile < n_out / kFragTileRows; ++tile)
    for (int64_t b = 0; b < n_sb; ++b)
      f(out + (tile * n_sb + b) * kFragTileRows * static_cast<int64_t>(sizeof(Block)),
        in + tile * kFragTileRows * n_sb + b);
}

// Q4_K and Q5_K (their first 16 bytes the header, qs the code bytes): the tile rows' headers and
// code bytes into fragment block blk (rows: the tile's first row's block, n_sb blocks a row),
// and row `want`'s back out of it.
static_assert(kQ4KFragCodesAt == kQ5KFragCodesAt);
template <typename Block>
void put_header_and_codes(uint8_t* blk, const Block* rows, int64_t n_sb) {
  for (int r = 0; r < kFragTileRows; ++r)
    std::memcpy(blk + kHeaderBytes * r, &rows[r * n_sb], kHeaderBytes);
  for_each_word(kQ4KFragCodesAt, [&](int r, int c, int at) {
    const uint8_t* q = rows[r * n_sb].qs + c;
    blk[at] = q[0], blk[at + 1] = q[2], blk[at + 2] = q[1], blk[at + 3] = q[3];
  });
}
template <typename Block>
void get_header_and_codes(const uint8_t* blk, int want, Block& q) {
  std::memcpy(&q, blk + kHeaderBytes * want, kHeaderBytes);
  for_each_word(kQ4KFragCodesAt, [&](int r, int c, int at) {
    if (r != want) return;
    q.qs[c] = blk[at], q.qs[c + 2] = blk[at + 1], q.qs[c + 1] = blk[at + 2],
    q.qs[c + 3] = blk[at + 3];
  });
}
// Block b of row `row` of a fragment-ordered matrix of block_bytes blocks.
const uint8_t* frag_block_at(const void* frag, int64_t n_in, int64_t row, int64_t b,
                             int block_bytes) {
  return static_cast<const uint8_t*>(frag) +
         ((row / kFragTileRows) * (n_in / 256) + b) * block_bytes;
}

}  // namespace

void q4k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  const int64_t n_sb = n_in / 256;
  for_each_frag_block<BlockQ4_K>(src, n_in, n_out, dst, [&](uint8_t* blk, const BlockQ4_K* rows) {
    put_header_and_codes(blk, rows, n_sb);
  });
}

BlockQ4_K q4k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b) {
  BlockQ4_K q;
  get_header_and_codes(frag_block_at(frag, n_in, row, b, kQ4KFragBlockBytes),
                       static_cast<int>(row % kFragTileRows), q);
  return q;
}

namespace {
// bf16(q * bf16(d * sc) - bf16(dmin * m)) of 32-input sub-block `sub`, the sum exact, rounded
// once: q * s has at most 13 significant bits and mn 8, so their sum is exact in double while
// their exponents lie within 40 of each other (d and dmin of one block are f16 values of
// similar size in real files).
float k_min_bf16_weight(uint16_t d, uint16_t dmin, const uint8_t* scales, int sub, int q) {
  int sc = 0, m = 0;
  unpack_k_scale_min(scales, sub, &sc, &m);
  const float s = bf16_to_f32(f32_to_bf16(f16_to_f32(d) * static_cast<float>(sc)));
  const float mn = bf16_to_f32(f32_to_bf16(-f16_to_f32(dmin) * static_cast<float>(m)));
  return to_bf16_rne(q * static_cast<double>(s) + mn);
}
}  // namespace

float q4k_bf16_weight(const BlockQ4_K& b, int i) {
  const int grp = i / 64, k = i % 64;
  const uint8_t byte = b.qs[32 * grp + k % 32];
  return k_min_bf16_weight(b.d, b.dmin, b.scales, 2 * grp + k / 32,
                           k < 32 ? (byte & 15) : (byte >> 4));
}

float q5k_bf16_weight(const BlockQ5_K& b, int i) {
  return k_min_bf16_weight(b.d, b.dmin, b.scales, i / 32, q5k_code(b, i));
}

int q5k_code(const BlockQ5_K& b, int i) {
  // Element i = 64 j + 32 n + l (l < 32): nibble n of qs[32 j + l], high bit i / 32 of qh[l]
  // (dequantize.cpp).
  const int lo = (b.qs[32 * (i / 64) + i % 32] >> (4 * (i % 64 / 32))) & 15;
  return lo | ((b.qh[i % 32] >> (i / 32)) & 1) << 4;
}

namespace {
// Where a Q5_K code's high bit goes.
HighBits q5k_high_at(int r, int i) {
  return block_word_bit_at(kQ5KFragHighsAt, r, i);
}
}  // namespace

void q5k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  const int64_t n_sb = n_in / 256;
  for_each_frag_block<BlockQ5_K>(src, n_in, n_out, dst, [&](uint8_t* blk, const BlockQ5_K* rows) {
    put_header_and_codes(blk, rows, n_sb);
    std::memset(blk + kQ5KFragHighsAt, 0, kQ5KFragBlockBytes - kQ5KFragHighsAt);
    for (int r = 0; r < kFragTileRows; ++r)
      for (int i = 0; i < 256; ++i) {
        const HighBits hb = q5k_high_at(r, i);
        blk[hb.at] =
            static_cast<uint8_t>(blk[hb.at] | (q5k_code(rows[r * n_sb], i) >> 4) << hb.shift);
      }
  });
}

BlockQ5_K q5k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b) {
  const uint8_t* blk = frag_block_at(frag, n_in, row, b, kQ5KFragBlockBytes);
  const int want = static_cast<int>(row % kFragTileRows);
  BlockQ5_K q{};
  get_header_and_codes(blk, want, q);
  for (int i = 0; i < 256; ++i) {
    const HighBits hb = q5k_high_at(want, i);
    q.qh[i % 32] = static_cast<uint8_t>(q.qh[i % 32] | ((blk[hb.at] >> hb.shift) & 1) << (i / 32));
  }
  return q;
}

int q6k_code(const BlockQ6_K& b, int i) {
  // Element i = 128 h + 64 n + l (l < 64): low nibble n of ql[64 h + l]; writing
  // i = 128 h + 32 s + l (l < 32): high bits 2s, 2s + 1 of qh[32 h + l] (dequantize.cpp).
  const int h = i / 128, n = i % 128 / 64, s = i % 128 / 32;
  const int lo = (b.ql[64 * h + i % 64] >> (4 * n)) & 15;
  return lo | ((b.qh[32 * h + i % 32] >> (2 * s)) & 3) << 4;
}

namespace {
void q6k_set_code(BlockQ6_K& b, int i, int q) {
  const int h = i / 128, n = i % 128 / 64, s = i % 128 / 32;
  uint8_t& lo = b.ql[64 * h + i % 64];
  lo = static_cast<uint8_t>((lo & ~(15 << (4 * n))) | (q & 15) << (4 * n));
  uint8_t& hi = b.qh[32 * h + i % 32];
  hi = static_cast<uint8_t>((hi & ~(3 << (2 * s))) | (q >> 4) << (2 * s));
}

// The Q6_K low nibbles as Q4_K code bytes: byte c of group grp (c < 32) of element codes q.
uint8_t q6k_nibble_byte(const BlockQ6_K& b, int grp, int c) {
  return static_cast<uint8_t>((q6k_code(b, 64 * grp + c) & 15) |
                              (q6k_code(b, 64 * grp + c + 32) & 15) << 4);
}
}  // namespace

void q6k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  const int64_t n_sb = n_in / 256;
  for_each_frag_block<BlockQ6_K>(src, n_in, n_out, dst, [&](uint8_t* blk, const BlockQ6_K* rows) {
    std::memset(blk, 0, kQ6KFragBlockBytes);
    for (int r = 0; r < kFragTileRows; ++r) {
      const BlockQ6_K& q = rows[r * n_sb];
      std::memcpy(blk + 16 * r, q.scales, 16);
      std::memcpy(blk + kQ6KFragDAt + 2 * r, &q.d, 2);
      for (int i = 0; i < 256; ++i) {
        const HighBits hb = q6k_high_at(r, i);
        blk[hb.at] = static_cast<uint8_t>(blk[hb.at] | (q6k_code(q, i) >> 4) << hb.shift);
      }
    }
    for_each_word(kQ6KFragNibblesAt, [&](int r, int c, int at) {
      const BlockQ6_K& q = rows[r * n_sb];
      uint8_t byte[4];
      for (int k = 0; k < 4; ++k) byte[k] = q6k_nibble_byte(q, c / 32, c % 32 + k);
      blk[at] = byte[0], blk[at + 1] = byte[2], blk[at + 2] = byte[1], blk[at + 3] = byte[3];
    });
  });
}

BlockQ6_K q6k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b) {
  const uint8_t* blk = frag_block_at(frag, n_in, row, b, kQ6KFragBlockBytes);
  const int want = static_cast<int>(row % kFragTileRows);
  BlockQ6_K q{};
  std::memcpy(q.scales, blk + 16 * want, 16);
  std::memcpy(&q.d, blk + kQ6KFragDAt + 2 * want, 2);
  uint8_t nib[4][32];  // group, code byte
  for_each_word(kQ6KFragNibblesAt, [&](int r, int c, int at) {
    if (r != want) return;
    uint8_t* v = &nib[c / 32][c % 32];
    v[0] = blk[at], v[2] = blk[at + 1], v[1] = blk[at + 2], v[3] = blk[at + 3];
  });
  for (int i = 0; i < 256; ++i) {
    const HighBits hb = q6k_high_at(want, i);
    const int c = i % 64;
    const int lo = (nib[i / 64][c % 32] >> (4 * (c / 32))) & 15;
    q6k_set_code(q, i, lo | ((blk[hb.at] >> hb.shift) & 3) << 4);
  }
  return q;
}

namespace {
// Where Q8_0 code i (0..255 of a super-block) of tile row r lands in its fragment-ordered block
// (frag_layout.h): group j, block h, lane 4 (r % 8) + t, word 2 s + r / 8 of the block's four,
// byte i % 4.
int q80_code_at(int r, int i) {
  const int j = i / 64, h = i % 64 / 32, c = i % 32, t = c / 8, s = c % 8 / 4;
  return kQ80FragCodesAt + 16 * (64 * j + 32 * h + 4 * (r % 8) + t) + 4 * (2 * s + r / 8) + c % 4;
}
}  // namespace

void q80_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  T9_CHECK(frag_shape_ok(n_in, n_out), "to fragment order: shape [{}, {}]", n_out, n_in);
  const int64_t n_blocks = n_in / 32, n_sb = n_in / 256;
  const auto* in = static_cast<const BlockQ8_0*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t tile = 0; tile < n_out / kFragTileRows; ++tile)
    for (int64_t b = 0; b < n_sb; ++b) {
      uint8_t* blk = out + (tile * n_sb + b) * kQ80FragBlockBytes;
      for (int r = 0; r < kFragTileRows; ++r) {
        const BlockQ8_0* row = in + (tile * kFragTileRows + r) * n_blocks + 8 * b;
        for (int k = 0; k < 8; ++k) {
          std::memcpy(blk + 16 * r + 2 * k, &row[k].d, 2);
          for (int c = 0; c < 32; ++c)
            blk[q80_code_at(r, 32 * k + c)] = static_cast<uint8_t>(row[k].qs[c] + 128);
        }
      }
    }
}

BlockQ8_0 q80_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b) {
  const uint8_t* blk = frag_block_at(frag, n_in, row, b / 8, kQ80FragBlockBytes);
  const int r = static_cast<int>(row % kFragTileRows), k = static_cast<int>(b % 8);
  BlockQ8_0 q;
  std::memcpy(&q.d, blk + 16 * r + 2 * k, 2);
  for (int c = 0; c < 32; ++c) q.qs[c] = static_cast<int8_t>(blk[q80_code_at(r, 32 * k + c)] - 128);
  return q;
}

namespace {
// Where BF16 weight pair c / 2 (c: 0..255 of a super-block, even) of tile row r lands in its
// fragment-ordered block: the inverse of frag_input (c % 64 = 32 (s / 2) + 8 t + 4 (s % 2) +
// 2 p + e), slot 2 p + r / 8 of lane 4 (r % 8) + t in group c / 64's step s.
int bf16_pair_at(int r, int c) {
  const int j = c / 64, i = c % 64, t = i % 32 / 8, s = 2 * (i / 32) + i % 8 / 4, p = i % 4 / 2;
  return 16 * (32 * (4 * j + s) + 4 * (r % 8) + t) + 4 * (2 * p + r / 8);
}
}  // namespace

void bf16_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  T9_CHECK(frag_shape_ok(n_in, n_out), "to fragment order: shape [{}, {}]", n_out, n_in);
  const int64_t n_sb = n_in / 256;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  int at[kFragTileRows][128];  // each row's pair offsets, the same in every block
  for (int r = 0; r < kFragTileRows; ++r)
    for (int c = 0; c < 256; c += 2) at[r][c / 2] = bf16_pair_at(r, c);
  for (int64_t tile = 0; tile < n_out / kFragTileRows; ++tile)
    for (int r = 0; r < kFragTileRows; ++r) {
      const uint8_t* row = in + (tile * kFragTileRows + r) * n_in * 2;
      for (int64_t b = 0; b < n_sb; ++b) {
        uint8_t* blk = out + (tile * n_sb + b) * kBf16FragBlockBytes;
        for (int c = 0; c < 128; ++c) std::memcpy(blk + at[r][c], row + 512 * b + 4 * c, 4);
      }
    }
}

uint16_t bf16_frag_weight(const void* frag, int64_t n_in, int64_t row, int64_t k) {
  const uint8_t* blk = frag_block_at(frag, n_in, row, k / 256, kBf16FragBlockBytes);
  const int c = static_cast<int>(k % 256);
  uint16_t v = 0;
  std::memcpy(&v, blk + bf16_pair_at(static_cast<int>(row % kFragTileRows), c & ~1) + 2 * (c & 1),
              2);
  return v;
}

int q3k_code(const BlockQ3_K& b, int i) {
  // Element i = 128 n + 32 j + l (l < 32): bits 2j, 2j + 1 of qs[32 n + l], and bit i / 32 of
  // hmask[l] (dequantize.cpp).
  const int lo = (b.qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
  return lo | ((b.hmask[i % 32] >> (i / 32)) & 1) << 2;
}

namespace {
void q3k_set_code(BlockQ3_K& b, int i, int q) {
  uint8_t& lo = b.qs[32 * (i / 128) + i % 32];
  const int s = 2 * (i % 128 / 32);
  lo = static_cast<uint8_t>((lo & ~(3 << s)) | (q & 3) << s);
  uint8_t& hi = b.hmask[i % 32];
  hi = static_cast<uint8_t>((hi & ~(1 << (i / 32))) | (q >> 2) << (i / 32));
}
constexpr int kQ3KScaleBytes = 12;
}  // namespace

void q3k_to_frag(const void* src, int64_t n_in, int64_t n_out, void* dst) {
  const int64_t n_sb = n_in / 256;
  for_each_frag_block<BlockQ3_K>(src, n_in, n_out, dst, [&](uint8_t* blk, const BlockQ3_K* rows) {
    std::memset(blk, 0, kQ3KFragBlockBytes);
    for (int r = 0; r < kFragTileRows; ++r) {
      const BlockQ3_K& q = rows[r * n_sb];
      std::memcpy(blk + kQ3KScaleBytes * r, q.scales, kQ3KScaleBytes);
      std::memcpy(blk + kQ3KFragDAt + 2 * r, &q.d, 2);
      for (int i = 0; i < 256; ++i) {
        const int code = q3k_code(q, i);
        const HighBits lo = pair_word_bits_at(kQ3KFragLowsAt, r, i);
        const HighBits hi = block_word_bit_at(kQ3KFragHighsAt, r, i);
        blk[lo.at] = static_cast<uint8_t>(blk[lo.at] | (code & 3) << lo.shift);
        blk[hi.at] = static_cast<uint8_t>(blk[hi.at] | (code >> 2) << hi.shift);
      }
    }
  });
}

BlockQ3_K q3k_frag_block(const void* frag, int64_t n_in, int64_t row, int64_t b) {
  const uint8_t* blk = frag_block_at(frag, n_in, row, b, kQ3KFragBlockBytes);
  const int want = static_cast<int>(row % kFragTileRows);
  BlockQ3_K q{};
  std::memcpy(q.scales, blk + kQ3KScaleBytes * want, kQ3KScaleBytes);
  std::memcpy(&q.d, blk + kQ3KFragDAt + 2 * want, 2);
  for (int i = 0; i < 256; ++i) {
    const HighBits lo = pair_word_bits_at(kQ3KFragLowsAt, want, i);
    const HighBits hi = block_word_bit_at(kQ3KFragHighsAt, want, i);
    q3k_set_code(q, i, ((blk[lo.at] >> lo.shift) & 3) | ((blk[hi.at] >> hi.shift) & 1) << 2);
  }
  return q;
}

float q3k_bf16_weight(const BlockQ3_K& b, int i) {
  const float s = bf16_to_f32(
      f32_to_bf16(f16_to_f32(b.d) * static_cast<float>(unpack_q3_k_scale(b.scales, i / 16))));
  // (q - 4) has 3 significant bits and s 8: the product is exact in double, then rounded once.
  return to_bf16_rne(static_cast<double>(q3k_code(b, i) - 4) * s);
}

float q6k_bf16_weight(const BlockQ6_K& b, int i) {
  const float s = bf16_to_f32(f32_to_bf16(f16_to_f32(b.d) * static_cast<float>(b.scales[i / 16])));
  // (q - 32) has 6 significant bits and s 8: the product is exact in double, then rounded once.
  return to_bf16_rne(static_cast<double>(q6k_code(b, i) - 32) * s);
}

}  // namespace t9
