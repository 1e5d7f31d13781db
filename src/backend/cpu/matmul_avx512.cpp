// AVX-512 (F/BW/VL + VNNI) matmul kernels: 64 elements per step; vpdpbusd sums 4 u8*s8 products
// per int32 lane without saturation. Wide (signed) weights are biased by +128 to unsigned and the
// bias is removed exactly in int32 (128 * sum(x) per lane, computed once per activation vector).
#include <immintrin.h>

// GCC 12 reports its own _mm512_undefined_*() self-initialization inside intrinsics such as
// _mm512_cvtepi32_ps as uninitialized use (a known false positive); keep the build warning-clean.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define T9_ISA_NS avx512_isa
#include "backend/cpu/avx512_common.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/unpack_impl.h"

namespace t9::cpu {
namespace {

using namespace avx512_isa;
using namespace avx512_common;

// Per-lane scales of a 64-element step: lane l (elements 4l..4l+3) gets ls[l / 4].
inline __m512 expand_scales(const float* ls) {
  const __m512 four = _mm512_castps128_ps512(_mm_loadu_ps(ls));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                               four);
}

inline __m256 expand_scales_256(const float* ls) {
  const __m256 two =
      _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(ls))));
  return _mm256_permutevar8x32_ps(two, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

// kRows weight rows x kCols activation rows. Each pair's accumulator sees the same instruction
// sequence whatever kRows/kCols are, which is what makes matmul batch-invariant.
template <int kRows, int kCols, bool kWide>
void dot_int_tile(const UnpackedRow* w, const ActRow* x, int64_t n_in, float* out) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[kCols][kRows];
  for (int c = 0; c < kCols; ++c)
    for (int r = 0; r < kRows; ++r) acc[c][r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n_in; i += 64) {
    __m512i xq[kCols], init[kCols];
    __m512 dx[kCols];
    for (int c = 0; c < kCols; ++c) {
      xq[c] = _mm512_loadu_si512(x[c].q + i);
      dx[c] = _mm512_loadu_ps(x[c].dx16 + i / 4);  // = act_scales(x[c].d + i / 32)
      init[c] = _mm512_setzero_si512();
      if constexpr (kWide)  // -128 * sum(x) per lane undoes the +128 bias of wide weights
        init[c] = _mm512_sub_epi32(init[c], _mm512_dpbusd_epi32(init[c], bias, xq[c]));
    }
    for (int r = 0; r < kRows; ++r) {
      __m512i wq = _mm512_loadu_si512(w[r].q + i);
      if constexpr (kWide) wq = _mm512_xor_si512(wq, bias);
      const __m512 ls = expand_scales(w[r].ls + i / 16);
      for (int c = 0; c < kCols; ++c) {
        const __m512i p = _mm512_dpbusd_epi32(init[c], wq, xq[c]);
        acc[c][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(ls, dx[c]), acc[c][r]);
      }
    }
  }
  __m256 tail[kCols][kRows];
  for (int c = 0; c < kCols; ++c)
    for (int r = 0; r < kRows; ++r) tail[c][r] = _mm256_setzero_ps();
  if (i < n_in) {  // one 32-element block left
    const __m256i bias8 = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < kCols; ++c) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[c].q + i));
      const __m256 dx = _mm256_set1_ps(x[c].d[i / 32]);
      __m256i init = _mm256_setzero_si256();
      if constexpr (kWide) init = _mm256_sub_epi32(init, _mm256_dpbusd_epi32(init, bias8, xq));
      for (int r = 0; r < kRows; ++r) {
        __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r].q + i));
        if constexpr (kWide) wq = _mm256_xor_si256(wq, bias8);
        const __m256i p = _mm256_dpbusd_epi32(init, wq, xq);
        const __m256 sc = _mm256_mul_ps(expand_scales_256(w[r].ls + i / 16), dx);
        tail[c][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, tail[c][r]);
      }
    }
  }
  for (int c = 0; c < kCols; ++c) {
    for (int r = 0; r < kRows; ++r) {
      float total = hsum(acc[c][r]) + hsum256(tail[c][r]);
      if constexpr (!kWide) total += offset_dot(w[r].mn, x[c].s16, n_in / 16);
      out[c * kTileRows + r] = total;
    }
  }
}

void dot_int_avx512(int n_w, const UnpackedRow* w, bool wide, int n_x, const ActRow* x,
                    int64_t n_in, float* out) {
  with_tile_count(n_x, [&](auto cols) {
    with_tile_count(n_w, [&](auto rows) {
      constexpr int kRows = decltype(rows)::value, kCols = decltype(cols)::value;
      if (wide) return dot_int_tile<kRows, kCols, true>(w, x, n_in, out);
      dot_int_tile<kRows, kCols, false>(w, x, n_in, out);
    });
  });
}

// quantize_act_row (unpack_impl.h) with intrinsics, same results: the max is exact, x * id is
// the same float product, and cvtps_epi32 rounds to nearest-even like nearbyint.
void quantize_act_avx512(const float* x, int64_t n_in, int8_t* q, float* d, float* s16) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * 32), x1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1)));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, _mm512_set1_ps(id)));
    const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, _mm512_set1_ps(id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtsepi32_epi8(i1));
    d[b] = db;
    s16[2 * b] = db * static_cast<float>(_mm512_reduce_add_epi32(i0));
    s16[2 * b + 1] = db * static_cast<float>(_mm512_reduce_add_epi32(i1));
  }
}

template <int kRows>
void dot_f32_tile(const float* const* w, const float* x, int64_t n_in, float* out) {
  __m512 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n_in; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    for (int r = 0; r < kRows; ++r) acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < kRows; ++r) {
    float total = hsum(acc[r]);
    for (int64_t j = i; j < n_in; ++j) total += w[r][j] * x[j];
    out[r] = total;
  }
}

void dot_f32_avx512(int n_w, const float* const* w, const float* x, int64_t n_in, float* out) {
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

const MatmulKernels& kernels_avx512() {
  static const MatmulKernels k{
      unpack_row,       quantize_act_avx512, dot_int_avx512,   4,
      row_to_f32,       dot_f32_avx512,      attn_task_avx512, fused_supported_avx512,
      dot_fused_avx512, act_glu_avx512};
  return k;
}

}  // namespace t9::cpu
