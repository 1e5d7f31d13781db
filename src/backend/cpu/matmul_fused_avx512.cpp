// Fused AVX-512 kernels for few activation rows (decode): each 64-element step builds the weight
// codes and group scales straight from the quantized blocks in registers, instead of unpacking
// whole rows to memory first (matmul_kernels.h). The codes, scales and offsets are exactly the
// unpacked ones and the float operations are the unpack kernel's (matmul_avx512.cpp) in the same
// order, so both paths give bit-identical outputs: a row's result does not depend on which path
// its batch size selected.
#include <immintrin.h>

// GCC 12 false positives inside AVX-512 intrinsics (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/avx512_common.h"
#include "backend/cpu/fused_formats_avx512.h"
#include "backend/cpu/matmul_kernels.h"

namespace t9::cpu {
namespace {

using namespace avx512_common;
using namespace fused_formats;

// kRows weight rows x kCols activation rows; per (row, column) pair the instruction sequence of
// dot_int_tile in matmul_avx512.cpp. mn: kRows * n_in / 16 floats of scratch.
template <class F, int kRows, int kCols>
void fused_tile(const uint8_t* const* w, const ActRow* x, int64_t n_in, float* mn, float* out) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t n_g = n_in / 16;
  __m512 acc[kCols][kRows];
  for (int c = 0; c < kCols; ++c)
    for (int r = 0; r < kRows; ++r) acc[c][r] = _mm512_setzero_ps();
  typename F::State st[kRows];
  for (int64_t e = 0; e < n_in; e += F::kSpan) {
    for (int r = 0; r < kRows; ++r) {
      prefetch_span_ahead<F>(w[r], e);
      F::begin(st[r], w[r], e, mn + r * n_g);
    }
    for (int j = 0; j < F::kSpan / 64; ++j) {
      const int64_t i = e + 64 * j;
      __m512i xq[kCols], init[kCols];
      __m512 dx[kCols];
      for (int c = 0; c < kCols; ++c) {
        xq[c] = _mm512_loadu_si512(x[c].q + i);
        dx[c] = act_scales(x[c].d + i / 32);
        init[c] = _mm512_setzero_si512();
        if constexpr (F::kWide)
          init[c] = _mm512_sub_epi32(init[c], _mm512_dpbusd_epi32(init[c], bias, xq[c]));
      }
      for (int r = 0; r < kRows; ++r) {
        __m512i wq = F::codes(st[r], j);
        if constexpr (F::kWide) wq = _mm512_xor_si512(wq, bias);
        const __m512 ls = F::scales(st[r], j);
        for (int c = 0; c < kCols; ++c) {
          const __m512i p = _mm512_dpbusd_epi32(init[c], wq, xq[c]);
          acc[c][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(ls, dx[c]), acc[c][r]);
        }
      }
    }
  }
  for (int c = 0; c < kCols; ++c) {
    for (int r = 0; r < kRows; ++r) {
      // + 0.0f: the unpack kernel's (empty) 32-element tail sum, kept so signed zeros agree.
      float total = hsum(acc[c][r]) + 0.0f;
      if constexpr (!F::kWide) total += offset_dot(mn + r * n_g, x[c].s16, n_g);
      out[c * kTileRows + r] = total;
    }
  }
}

}  // namespace

bool fused_supported_avx512(GgmlType type, int64_t n_in) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
      return n_in % 64 == 0;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return n_in % 256 == 0;
    default:
      return false;
  }
}

void dot_fused_avx512(GgmlType type, int n_w, const uint8_t* const* w, int n_x, const ActRow* x,
                      int64_t n_in, float* mn, float* out) {
  visit_format(type, [&](auto fmt) {
    with_tile_count(n_x, [&](auto cols) {
      with_tile_count(n_w, [&](auto rows) {
        fused_tile<decltype(fmt), decltype(rows)::value, decltype(cols)::value>(w, x, n_in, mn,
                                                                                out);
      });
    });
  });
}

}  // namespace t9::cpu
