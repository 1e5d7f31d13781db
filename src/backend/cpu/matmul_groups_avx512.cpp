// The prompt side of CpuIsa::kAvx512Groups: matmul_amx.h's group order (an exact int32 sum per
// G-element group, then one float chain per pair) computed with AVX-512 VNNI instead of the tile
// unit, for CPUs with the avx512 ISA's features (VNNI and BF16) and no AMX: AMD Zen 4/5, Intel
// Cooper Lake, or Sapphire Rapids and later where Linux does not grant the tile state. Decode
// takes the rows16 kernel (matmul_rows16_avx512.cpp), which computes the same order, so prompts
// and decode agree bit for bit as on AMX.
//
// The operands are the tile kernels' layouts: weights AmxWeights::q [g][16 rows][G], activations
// AmxActs::b [g][G / 4][16 columns][4]. Lanes are activation columns: one zmm of b holds the 16
// columns' four codes of a k-step, and each weight row's four codes are broadcast against it, so
// a group's sums for (one row, 16 columns) take G / 4 vpdpbusd and no reduction. Against the
// float-lane order of matmul_avx512.cpp (a convert, a scale product and an fma after every
// vpdpbusd) this is one float step per G / 4 vpdpbusd.
//
// vpdpbusd multiplies unsigned by signed bytes: narrow codes (0..63) are unsigned already; wide
// weights arrive biased by +128 (cpu_matmul_amx.cpp, unpack_group) and 128 * sum(x) of each group
// and column (AmxActs::xs) is subtracted in int32, exactly.
#include <immintrin.h>

#include <cstring>

// GCC 12 false positives inside AVX-512 intrinsics (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/matmul_amx.h"

namespace t9::cpu {
namespace {

inline __m512i broadcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Rows m0 .. m0 + kR - 1 of weight group w against kX activation groups x[0..kX-1]; writes tile
// j's rows to out[j] ([16][16], lane = column). Registers: kX * kR int sums and as many float
// accumulators, kX activation vectors and one broadcast (kX * kR = 8: 19 of the 32 zmm).
template <bool kNarrow, int kG, int kX, int kR>
void rows_pass(const AmxWeights& w, int m0, const AmxActs* x, int64_t n_in, float* const* out) {
  constexpr int kSteps = kG / 4;
  constexpr int64_t kGs = kG / 16;  // 16-element scale slots per group
  const int64_t n_g = n_in / kG;
  __m512 acc[kX][kR];
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t g = 0; g < n_g; ++g) {
    __m512i s[kX][kR];
    for (int j = 0; j < kX; ++j) {
      __m512i init = _mm512_setzero_si512();
      if constexpr (!kNarrow)  // -128 * sum(x): undoes the +128 bias of wide weights
        init = _mm512_sub_epi32(init, _mm512_slli_epi32(_mm512_loadu_si512(x[j].xs + g * 16), 7));
      for (int r = 0; r < kR; ++r) s[j][r] = init;
    }
    const uint8_t* wq = w.q + (g * kAmxRows + m0) * kG;
#pragma GCC unroll 8
    for (int k = 0; k < kSteps; ++k) {
      __m512i a[kX];
      for (int j = 0; j < kX; ++j) a[j] = _mm512_loadu_si512(x[j].b + (g * kSteps + k) * 64);
      for (int r = 0; r < kR; ++r) {
        const __m512i wb = broadcast4(wq + r * kG + 4 * k);
        for (int j = 0; j < kX; ++j) s[j][r] = _mm512_dpbusd_epi32(s[j][r], wb, a[j]);
      }
    }
    // matmul_amx.h's chain for each pair, as chain_many (tiles) and rows16 compute it.
    for (int j = 0; j < kX; ++j) {
      const __m512 d = _mm512_loadu_ps(x[j].dv + g * kAmxCols);
      const __m512 sv = _mm512_loadu_ps(x[j].sv + g * kAmxCols);
      for (int r = 0; r < kR; ++r) {
        const int64_t slot = (m0 + r) * w.s_stride + g * kGs;
        __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j][r]),
                                   _mm512_mul_ps(_mm512_set1_ps(w.ls[slot]), d), acc[j][r]);
        if constexpr (kNarrow) v = _mm512_fmadd_ps(_mm512_set1_ps(w.mn[slot]), sv, v);
        acc[j][r] = v;
      }
    }
  }
  for (int j = 0; j < kX; ++j)
    for (int r = 0; r < kR; ++r) _mm512_storeu_ps(out[j] + (m0 + r) * kAmxCols, acc[j][r]);
}

template <bool kNarrow, int kG>
void dot_block(const AmxWeights* w, int n_w, const AmxActs* x, int n_x, int64_t n_in, float* out) {
  for (int i = 0; i < n_w; ++i) {
    float* tiles[2] = {out + (i * 2) * kAmxRows * kAmxCols,
                       out + (i * 2 + 1) * kAmxRows * kAmxCols};
    if (n_x == 2) {
      for (int m0 = 0; m0 < kAmxRows; m0 += 4)
        rows_pass<kNarrow, kG, 2, 4>(w[i], m0, x, n_in, tiles);
    } else {
      for (int m0 = 0; m0 < kAmxRows; m0 += 8)
        rows_pass<kNarrow, kG, 1, 8>(w[i], m0, x, n_in, tiles);
    }
  }
}

}  // namespace

void groups_dot_block(const AmxWeights* w, int n_w, bool narrow, int group, int64_t n_in,
                      const AmxActs* x, int n_x, float* out) {
  if (group == 16) {
    if (narrow) return dot_block<true, 16>(w, n_w, x, n_x, n_in, out);
    return dot_block<false, 16>(w, n_w, x, n_x, n_in, out);
  }
  if (narrow) return dot_block<true, 32>(w, n_w, x, n_x, n_in, out);
  dot_block<false, 32>(w, n_w, x, n_x, n_in, out);
}

}  // namespace t9::cpu
