// Internal to the CPU backend's AVX-512 files (*_avx512.cpp only: these need the AVX-512 compile
// flags). Helpers shared by the unpack kernel and the fused decode kernel, which must perform the
// very same float operations so that both give bit-identical results (batch invariance).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace t9::cpu::avx512_common {

inline float hsum(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hsum256(__m256 s8) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum_g mn[g] * s16[g] over n_g groups: 16 lanes at a time, then the rest in order.
inline float offset_dot(const float* mn, const float* s16, int64_t n_g) {
  __m512 macc = _mm512_setzero_ps();
  int64_t g = 0;
  for (; g + 16 <= n_g; g += 16)
    macc = _mm512_fmadd_ps(_mm512_loadu_ps(mn + g), _mm512_loadu_ps(s16 + g), macc);
  float m = hsum(macc);
  for (; g < n_g; ++g) m += mn[g] * s16[g];
  return m;
}

// Activation scales of a 64-element step: lanes 0..7 get d[0], lanes 8..15 get d[1].
inline __m512 act_scales(const float* d) {
  return _mm512_insertf32x8(_mm512_set1_ps(d[0]), _mm256_set1_ps(d[1]), 1);
}

}  // namespace t9::cpu::avx512_common
