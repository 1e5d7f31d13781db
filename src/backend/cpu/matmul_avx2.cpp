// AVX2 + FMA matmul kernels (256-bit): 32 elements per step, int8 products summed per 4 elements
// with maddubs/madd, then scaled and accumulated in 8 float lanes per weight row.
#include <immintrin.h>

#define T9_ISA_NS avx2_isa
#include "backend/cpu/attn_impl.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/unpack_impl.h"

namespace t9::cpu {
namespace {

using namespace avx2_isa;

// Fixed-order horizontal sum, so results never depend on the tile a pair was computed in.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// int32 sums of 4 products per lane. Narrow codes are <= 63 so maddubs cannot saturate
// (2 * 63 * 127 < 32767); wide ones use |w| * sign(x, w) (2 * 128 * 127 < 32767).
// [ls[0] x 4, ls[1] x 4]: the scales of the two 16-element groups of a 32-element step, per lane.
inline __m256 expand_scales(const float* ls) {
  const __m256 two =
      _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(ls))));
  return _mm256_permutevar8x32_ps(two, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

template <bool kWide>
inline __m256i dot4(__m256i wq, __m256i xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kWide) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq)),
                             ones);
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xq), ones);
  }
}

// Sum of mn[g] * s16[g]: the offset terms of narrow formats.
inline float offset_dot(const float* mn, const float* s16, int64_t n_g) {
  __m256 macc = _mm256_setzero_ps();
  int64_t g = 0;
  for (; g + 8 <= n_g; g += 8)
    macc = _mm256_fmadd_ps(_mm256_loadu_ps(mn + g), _mm256_loadu_ps(s16 + g), macc);
  float m = hsum(macc);
  for (; g < n_g; ++g) m += mn[g] * s16[g];
  return m;
}

// kRows weight rows x kCols activation rows. Each pair's accumulator sees the same instruction
// sequence whatever kRows/kCols are, which is what makes matmul batch-invariant.
template <int kRows, int kCols, bool kWide>
void dot_int_tile(const UnpackedRow* w, const ActRow* x, int64_t n_in, float* out) {
  __m256 acc[kCols][kRows];
  for (int c = 0; c < kCols; ++c)
    for (int r = 0; r < kRows; ++r) acc[c][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_in / 32; ++b) {
    __m256i xq[kCols];
    __m256 dx[kCols];
    for (int c = 0; c < kCols; ++c) {
      xq[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[c].q + b * 32));
      dx[c] = _mm256_broadcast_ss(x[c].d + b);
    }
    for (int r = 0; r < kRows; ++r) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r].q + b * 32));
      const __m256 ls = expand_scales(w[r].ls + b * 2);
      for (int c = 0; c < kCols; ++c) {
        const __m256 sc = _mm256_mul_ps(ls, dx[c]);
        acc[c][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot4<kWide>(wq, xq[c])), sc, acc[c][r]);
      }
    }
  }
  for (int c = 0; c < kCols; ++c) {
    for (int r = 0; r < kRows; ++r) {
      float total = hsum(acc[c][r]);
      if constexpr (!kWide) total += offset_dot(w[r].mn, x[c].s16, n_in / 16);
      out[c * kTileRows + r] = total;
    }
  }
}

void dot_int_avx2(int n_w, const UnpackedRow* w, bool wide, int n_x, const ActRow* x, int64_t n_in,
                  float* out) {
  with_tile_count(n_x == 2 ? 2 : 1, [&](auto cols) {
    with_tile_count(n_w, [&](auto rows) {
      constexpr int kRows = decltype(rows)::value, kCols = decltype(cols)::value;
      if (wide) return dot_int_tile<kRows, kCols, true>(w, x, n_in, out);
      dot_int_tile<kRows, kCols, false>(w, x, n_in, out);
    });
  });
}

template <int kRows>
void dot_f32_tile(const float* const* w, const float* x, int64_t n_in, float* out) {
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n_in; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < kRows; ++r) {
    float total = hsum(acc[r]);
    for (int64_t j = i; j < n_in; ++j) total += w[r][j] * x[j];
    out[r] = total;
  }
}

void dot_f32_avx2(int n_w, const float* const* w, const float* x, int64_t n_in, float* out) {
  switch (n_w) {
    case 4:
      return dot_f32_tile<4>(w, x, n_in, out);
    case 3:
      return dot_f32_tile<3>(w, x, n_in, out);
    case 2:
      return dot_f32_tile<2>(w, x, n_in, out);
    default:
      for (int r = 0; r < n_w; ++r) dot_f32_tile<1>(w + r, x, n_in, out + r);
  }
}

}  // namespace

const MatmulKernels& kernels_avx2() {
  static const MatmulKernels k{unpack_row,   quantize_act_row,   dot_int_avx2, 2,       row_to_f32,
                               dot_f32_avx2, attn_task_portable, nullptr,      nullptr, nullptr};
  return k;
}

}  // namespace t9::cpu
