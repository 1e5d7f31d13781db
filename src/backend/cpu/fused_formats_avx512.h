// Internal to the CPU backend's AVX-512 files: the weight formats as the fused kernels see them.
// begin() is called at the start of every kSpan elements (kSpanBytes bytes) of a row (decodes the
// span's scales, writes its n / 16 group offsets to mn), then codes() and scales() give step j
// (elements 64j..64j+63 of the span): the 64 unpacked codes and the per-lane group scale (lane l
// covers elements 4l..4l+3). The codes, scales and offsets are exactly unpack_row's
// (unpack_impl.h). begin_codes() is begin() for codes() alone (the rows16 kernel decodes the
// scales of 16 rows at once). kGroup is the format's scale granularity (16 or 32 elements, =
// amx_group); where kOffsetPerScale != 0 every group offset is exactly scale * kOffsetPerScale
// (a power of two).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/avx512_common.h"
#include "backend/cpu/matmul_kernels.h"
#include "quant/blocks.h"

namespace t9::cpu::fused_formats {

using namespace avx512_common;

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// How far ahead of the current span the fused VNNI kernel prefetches each weight row (several
// 64-byte lines: the hardware prefetcher alone leaves the first loads of each block waiting on
// memory). A tile's kTileRows rows are adjacent in memory, so on a short row (Qwen2.5's 1536
// inputs: 864 bytes of Q4_K) a distance under kTileRows rows lands in rows the tile is reading
// already; 4096 bytes reach the next tile's. On a 2-core AMD EPYC VM (2026-12-05, tempo9 run,
// greedy decode): Qwen2.5-Coder-1.5B 7.7 -> 10.4 tok/s on 1 thread and 14.6 -> 19.0 on 2,
// gemma-3-270m +17-23%, SmolLM2 +10-17%, against 768 (tuned earlier on an Intel VM; prefetching
// nothing: 5.9 tok/s). The rows16 kernel prefetches differently (matmul_rows16_avx512.cpp).
constexpr int kPrefetchBytes = 4096;

// Software prefetch of the span that starts kPrefetchBytes after row's span e.
template <class F>
inline void prefetch_span_ahead(const uint8_t* row, int64_t e) {
  const char* p =
      reinterpret_cast<const char*>(row + e / F::kSpan * F::kSpanBytes) + kPrefetchBytes;
  for (int l = 0; l < (F::kSpanBytes + 63) / 64; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

inline __m512i low4(__m512i v) {
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

// Legacy 32-element blocks, two per step. kQh: offset of the 32-bit high-bit mask (Q5), -1 none;
// kM: offset of the fp16 min (Q4_1/Q5_1), -1 none; kZero: the code of level 0 for the _0 types.
template <int kBytes, int kQs, int kQh, int kM, int kZero>
struct LegacyNibbles {
  static constexpr int kSpan = 64, kSpanBytes = 2 * kBytes, kBlockBytes = kBytes;
  static constexpr bool kWide = false;
  static_assert(kM == -1 || kM == 2, "the rows16 kernel reads the min as the fp16 after d");
  struct State {
    const uint8_t* b;
    __m512 ls;
  };
  static void begin(State& s, const uint8_t* row, int64_t e, float* mn) {
    begin_codes(s, row, e);
    // Both blocks' fp16 (d, m) pairs converted at once: lanes d0, m0, d1, m1 (m unused for _0).
    uint32_t h0, h1;
    std::memcpy(&h0, s.b, 4);
    std::memcpy(&h1, s.b + kBytes, 4);
    const __m128 dm =
        _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(h0 | uint64_t{h1} << 32)));
    const __m512 dm512 = _mm512_castps128_ps512(dm);
    s.ls = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                                 dm512);
    if constexpr (kM >= 0) {
      _mm_storeu_ps(mn + e / 16, _mm_permute_ps(dm, _MM_SHUFFLE(3, 3, 1, 1)));
    } else {  // -kZero * d, as the unpack path computes it
      const __m128 d = _mm_permute_ps(dm, _MM_SHUFFLE(2, 2, 0, 0));
      _mm_storeu_ps(mn + e / 16, _mm_mul_ps(_mm_set1_ps(-static_cast<float>(kZero)), d));
    }
  }
  static void begin_codes(State& s, const uint8_t* row, int64_t e) { s.b = row + e / 32 * kBytes; }
  static __m512i codes(const State& s, int) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.b + kQs));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.b + kBytes + kQs));
    // 128-bit lanes [q0, q0, q1, q1]: low nibbles of a block are its elements 0..15, high 16..31.
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q0, q0)),
                                         _mm256_set_m128i(q1, q1), 1);
    __m512i v = low4(_mm512_mask_blend_epi64(0xCC, z, _mm512_srli_epi16(z, 4)));
    if constexpr (kQh >= 0) {  // bit j of a block's qh adds 16 to its element j
      uint32_t h0, h1;
      std::memcpy(&h0, s.b + kQh, 4);
      std::memcpy(&h1, s.b + kBytes + kQh, 4);
      const __mmask64 m =
          _cvtu64_mask64(static_cast<uint64_t>(h0) | static_cast<uint64_t>(h1) << 32);
      v = _mm512_mask_add_epi8(v, m, v, _mm512_set1_epi8(16));
    }
    return v;
  }
  static __m512 scales(const State& s, int) { return s.ls; }
  static constexpr int kGroup = 32;
  // Offsets that are an exact multiple of the scale (-kZero * d); 0: stored separately.
  static constexpr float kOffsetPerScale = kM >= 0 ? 0.0f : -static_cast<float>(kZero);
};

using Q4_0Fmt = LegacyNibbles<sizeof(BlockQ4_0), 2, -1, -1, 8>;
using Q4_1Fmt = LegacyNibbles<sizeof(BlockQ4_1), 4, -1, 2, 0>;
using Q5_0Fmt = LegacyNibbles<sizeof(BlockQ5_0), 6, 2, -1, 16>;
using Q5_1Fmt = LegacyNibbles<sizeof(BlockQ5_1), 8, 4, 2, 0>;

struct Q8_0Fmt {
  static constexpr int kSpan = 64, kSpanBytes = 2 * sizeof(BlockQ8_0),
                       kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kWide = true;
  struct State {
    const uint8_t* b;
    __m512 ls;
  };
  static void begin(State& s, const uint8_t* row, int64_t e, float*) {
    constexpr int kBytes = sizeof(BlockQ8_0);
    begin_codes(s, row, e);
    s.ls = _mm512_insertf32x8(_mm512_set1_ps(h2f(s.b)), _mm256_set1_ps(h2f(s.b + kBytes)), 1);
  }
  static void begin_codes(State& s, const uint8_t* row, int64_t e) {
    s.b = row + e / 32 * sizeof(BlockQ8_0);
  }
  static __m512i codes(const State& s, int) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b + 2));
    const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b + 36));
    return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
  }
  static __m512 scales(const State& s, int) { return s.ls; }
  static constexpr int kGroup = 32;
  static constexpr float kOffsetPerScale = 0.0f;  // wide: no offsets
};

// Q4_K: 8 (scale, min) pairs of 6 bits, each pair covering 32 elements (two groups); step j
// holds the low nibbles of qs[32j..32j+31] then their high nibbles.
struct Q4_KFmt {
  static constexpr int kSpan = 256, kSpanBytes = sizeof(BlockQ4_K);
  static constexpr bool kWide = false;
  struct State {
    const uint8_t* qs;
    alignas(32) float sc[8];
  };
  static void begin(State& s, const uint8_t* row, int64_t e, float* mn) {
    const uint8_t* b = row + e / 256 * sizeof(BlockQ4_K);
    const float d = h2f(b), dmin = h2f(b + 2);
    uint32_t a[3];
    std::memcpy(a, b + 4, 12);
    const __m128i sc8 =
        _mm_setr_epi32(static_cast<int>(a[0] & 0x3F3F3F3Fu),
                       static_cast<int>((a[2] & 0x0F0F0F0Fu) | ((a[0] >> 2) & 0x30303030u)), 0, 0);
    const __m128i m8 = _mm_setr_epi32(
        static_cast<int>(a[1] & 0x3F3F3F3Fu),
        static_cast<int>(((a[2] >> 4) & 0x0F0F0F0Fu) | ((a[1] >> 2) & 0x30303030u)), 0, 0);
    const __m256 scf =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc8)), _mm256_set1_ps(d));
    const __m256 mf =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m8)), _mm256_set1_ps(-dmin));
    _mm256_store_ps(s.sc, scf);
    const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    _mm512_storeu_ps(mn + e / 16, _mm512_permutexvar_ps(pairs, _mm512_castps256_ps512(mf)));
    s.qs = b + 16;
  }
  // begin() without the scales: the rows16 kernel decodes those for 16 rows at once.
  static void begin_codes(State& s, const uint8_t* row, int64_t e) {
    s.qs = row + e / 256 * sizeof(BlockQ4_K) + 16;
  }
  static __m512i codes(const State& s, int j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.qs + 32 * j));
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    return low4(z);
  }
  static __m512 scales(const State& s, int j) { return act_scales(s.sc + 2 * j); }
  static constexpr int kGroup = 32;
  static constexpr float kOffsetPerScale = 0.0f;
};

// Q6_K: codes are the stored level + 32 (0..63); 16 int8 scales, one per group.
struct Q6_KFmt {
  static constexpr int kSpan = 256, kSpanBytes = sizeof(BlockQ6_K);
  static constexpr bool kWide = false;
  struct State {
    const uint8_t* b;
    alignas(64) float dl[16];
  };
  static void begin(State& s, const uint8_t* row, int64_t e, float* mn) {
    begin_codes(s, row, e);
    const __m512 d = _mm512_set1_ps(h2f(s.b + 208));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.b + 192));
    const __m512 dl = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), d);
    _mm512_store_ps(s.dl, dl);
    _mm512_storeu_ps(mn + e / 16, _mm512_mul_ps(dl, _mm512_set1_ps(-32.0f)));
  }
  static void begin_codes(State& s, const uint8_t* row, int64_t e) {
    s.b = row + e / 256 * sizeof(BlockQ6_K);
  }
  static __m512i codes(const State& s, int j) {
    const int n = j >> 1;  // 128-element half
    const __m512i l = _mm512_loadu_si512(s.b + n * 64);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.b + 128 + n * 32));
    const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    if (j & 1) return _mm512_or_si512(low4(_mm512_srli_epi16(l, 4)), _mm512_and_si512(hh, m30));
    return _mm512_or_si512(low4(l), _mm512_and_si512(_mm512_slli_epi16(hh, 4), m30));
  }
  static __m512 scales(const State& s, int j) {
    const __m512 four = _mm512_castps128_ps512(_mm_load_ps(s.dl + 4 * j));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 four);
  }
  static constexpr int kGroup = 16;
  static constexpr float kOffsetPerScale = -32.0f;  // mn = dl * -32
};

// Calls fn(Fmt{}) with the format of `type` (one of the seven above; others CHECK-fail): the one
// place that maps weight types to formats for every fused kernel.
template <class Fn>
void visit_format(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::Q4_0:
      return fn(Q4_0Fmt{});
    case GgmlType::Q4_1:
      return fn(Q4_1Fmt{});
    case GgmlType::Q5_0:
      return fn(Q5_0Fmt{});
    case GgmlType::Q5_1:
      return fn(Q5_1Fmt{});
    case GgmlType::Q8_0:
      return fn(Q8_0Fmt{});
    case GgmlType::Q4_K:
      return fn(Q4_KFmt{});
    case GgmlType::Q6_K:
      return fn(Q6_KFmt{});
    default:
      unsupported_weight_type(type);
  }
}

}  // namespace t9::cpu::fused_formats
