// AMX-INT8 matmul kernels (contract and numerics in matmul_amx.h). One tdpbssd per (16 weight
// rows, 16 or fewer activation rows, G-element group): the sum of a group stays exact in int32,
// then leaves through memory for the float chain. A tdpbssd costs ~16 cycles of throughput on the
// dev VM whatever K and N, but its latency (with the tile loads and the store) is several times
// that: the kernels keep several products in flight while the chains of earlier ones run.
#include "backend/cpu/matmul_amx.h"
#include "backend/cpu/matmul_kernels.h"

#include <immintrin.h>

#include <cstring>

// GCC 12 false positives inside AVX-512 intrinsics (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace t9::cpu {
namespace {

// Tile layouts. kFew (1..4 activation columns): 0, 1 C [16][n_cols]; 2, 3 A [16][G];
// 4, 5 B [G / 4][n_cols]. kBlock (the 2x2 block of 16x16 outputs): 0..3 C [16][16]; 4, 5 A;
// 6, 7 B [G / 4][16].
enum class Layout { kFew, kBlock };

// Loads the tile shapes on this thread unless they are already loaded (the configuration is
// per thread and survives context switches).
void configure(Layout layout, int group, int n_cols) {
  thread_local int cur = -1;
  const int key = static_cast<int>(layout) << 16 | group << 8 | n_cols;
  if (cur == key) return;
  // The 64-byte LDTILECFG operand: palette 1; colsb[t] (16 bits) at 16 + 2t; rows[t] at 48 + t.
  // Written byte by byte: with a struct filled in loops, GCC 12 dropped some stores (it does
  // not see ldtilecfg read the struct), leaving tile 0 unconfigured (SIGILL at tilezero).
  alignas(64) volatile uint8_t cfg[64] = {};
  auto set = [&](int t, int rows, int colsb) {
    cfg[16 + 2 * t] = static_cast<uint8_t>(colsb & 0xFF);
    cfg[17 + 2 * t] = static_cast<uint8_t>(colsb >> 8);
    cfg[48 + t] = static_cast<uint8_t>(rows);
  };
  cfg[0] = 1;
  const int n_c = layout == Layout::kFew ? 2 : 4;
  for (int t = 0; t < n_c; ++t) set(t, kAmxRows, n_cols * 4);
  for (int t = n_c; t < n_c + 2; ++t) set(t, kAmxRows, group);
  for (int t = n_c + 2; t < n_c + 4; ++t) set(t, group / 4, n_cols * 4);
  _tile_loadconfig(const_cast<const uint8_t*>(cfg));
  cur = key;
}

// Issues group g's product into C tile 0 (weights in tile 2, activations in 4) or, with kSecond,
// into tile 1 (3, 5). GCC's tile intrinsics take tile numbers as literal tokens.
template <bool kSecond>
inline void issue(const AmxWeights& w, const int8_t* b, int64_t g, int group, int n_cols) {
  const uint8_t* a = w.q + g * group * kAmxRows;
  const int8_t* bg = b + g * group * n_cols;
  if constexpr (kSecond) {
    _tile_zero(1);
    _tile_loadd(3, a, group);
    _tile_loadd(5, bg, n_cols * 4);
    _tile_dpbssd(1, 3, 5);
  } else {
    _tile_zero(0);
    _tile_loadd(2, a, group);
    _tile_loadd(4, bg, n_cols * 4);
    _tile_dpbssd(0, 2, 4);
  }
}

// One group of one 16x16 output tile: lanes are activation columns, one accumulator per weight
// row (acc in memory: a 2x2 block has 64 of them).
template <bool kNarrow>
inline void chain_many(const AmxWeights& w, const AmxActs& x, int64_t g, int64_t gs,
                       const int32_t* c, __m512* acc) {
  const __m512 d = _mm512_loadu_ps(x.dv + g * kAmxCols);
  const __m512 s = _mm512_loadu_ps(x.sv + g * kAmxCols);
#pragma GCC unroll 16
  for (int m = 0; m < kAmxRows; ++m) {
    const float* ls = w.ls + m * w.s_stride + g * gs;
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c + m * kAmxCols));
    __m512 a = _mm512_fmadd_ps(isum, _mm512_mul_ps(_mm512_set1_ps(*ls), d), acc[m]);
    if constexpr (kNarrow) a = _mm512_fmadd_ps(_mm512_set1_ps(w.mn[m * w.s_stride + g * gs]), s, a);
    acc[m] = a;
  }
}

// Group g's four products of the block into C tiles 0..3 (A: weights in 4, 5; B: activations
// in 6, 7). Tile numbers must be literal tokens for GCC's intrinsics.
inline void issue_block(const AmxWeights* w, const AmxActs* x, int64_t g, int group) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, w[0].q + g * group * kAmxRows, group);
  _tile_loadd(5, w[1].q + g * group * kAmxRows, group);
  _tile_loadd(6, x[0].b + g * group * kAmxCols, kAmxCols * 4);
  _tile_loadd(7, x[1].b + g * group * kAmxCols, kAmxCols * 4);
  _tile_dpbssd(0, 4, 6);
  _tile_dpbssd(1, 4, 7);
  _tile_dpbssd(2, 5, 6);
  _tile_dpbssd(3, 5, 7);
}

// 2 weight-row groups x 2 activation groups. The four C tiles of group g are stored, group g + 1
// is issued, and only then do g's float chains run, so the tile unit works during them.
template <bool kNarrow>
void dot_block(const AmxWeights* w, const AmxActs* x, int group, int64_t n_in, float* out) {
  configure(Layout::kBlock, group, kAmxCols);
  alignas(64) int32_t c[4][kAmxRows * kAmxCols];
  alignas(64) __m512 acc[4][kAmxRows];
  for (auto& tile : acc)
    for (auto& a : tile) a = _mm512_setzero_ps();
  const int64_t n_g = n_in / group, gs = group / 16;
  issue_block(w, x, 0, group);
  const int64_t tile = group * kAmxRows;  // bytes of one A or B tile
  for (int64_t g = 0; g < n_g; ++g) {
    // Staggered: each C tile is stored and refilled with group g + 1 as soon as its own operands
    // allow, with a float chain of group g between, so the tile unit never idles behind a
    // four-tile barrier (the 2x2 loads are shared: A4 by C0, C1; B6 by C0, C2; ...).
    const bool next = g + 1 < n_g;
    const int64_t o = (g + 1) * tile;
    _tile_stored(0, c[0], kAmxCols * 4);
    if (next) {
      _tile_zero(0);
      _tile_loadd(4, w[0].q + o, group);
      _tile_loadd(6, x[0].b + o, kAmxCols * 4);
      _tile_dpbssd(0, 4, 6);
    }
    chain_many<kNarrow>(w[0], x[0], g, gs, c[0], acc[0]);
    _tile_stored(1, c[1], kAmxCols * 4);
    if (next) {
      _tile_zero(1);
      _tile_loadd(7, x[1].b + o, kAmxCols * 4);
      _tile_dpbssd(1, 4, 7);
    }
    chain_many<kNarrow>(w[0], x[1], g, gs, c[1], acc[1]);
    _tile_stored(2, c[2], kAmxCols * 4);
    if (next) {
      _tile_zero(2);
      _tile_loadd(5, w[1].q + o, group);
      _tile_dpbssd(2, 5, 6);
    }
    chain_many<kNarrow>(w[1], x[0], g, gs, c[2], acc[2]);
    _tile_stored(3, c[3], kAmxCols * 4);
    if (next) {
      _tile_zero(3);
      _tile_dpbssd(3, 5, 7);
    }
    chain_many<kNarrow>(w[1], x[1], g, gs, c[3], acc[3]);
    if (g + 3 < n_g) {  // group g + 3's tiles into L1 (4 x 512 bytes for 32-element groups)
      const int64_t bytes = group * kAmxRows;
      for (int i = 0; i < 2; ++i) {
        const char* a = reinterpret_cast<const char*>(w[i].q + (g + 3) * bytes);
        const char* b = reinterpret_cast<const char*>(x[i].b + (g + 3) * bytes);
        for (int64_t o = 0; o < bytes; o += 64) {
          _mm_prefetch(a + o, _MM_HINT_T0);
          _mm_prefetch(b + o, _MM_HINT_T0);
        }
      }
    }
  }
  for (int t = 0; t < 4; ++t)
    for (int m = 0; m < kAmxRows; ++m)
      _mm512_storeu_ps(out + (t * kAmxRows + m) * kAmxCols, acc[t][m]);
}

// Column col of a C tile stored [16][n_cols] (lane m = weight row m).
template <int kCols>
inline __m512 column(const int32_t* c, int col) {
  __m512i v;
  if constexpr (kCols == 1) {
    v = _mm512_load_si512(c);
  } else {
    const __m512i idx = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(kCols)),
        _mm512_set1_epi32(col));
    v = _mm512_i32gather_epi32(idx, c, 4);
  }
  return _mm512_cvtepi32_ps(v);
}

// One group of the few-rows kernel: lanes are weight rows, one accumulator per column.
template <bool kNarrow, int kCols>
inline void chain_few(const AmxWeights& w, const AmxActs& x, int64_t g, const int32_t* c,
                      __m512* acc) {
  const __m512 ls = _mm512_loadu_ps(w.ls_t + g * kAmxRows);
  const __m512 mn = _mm512_loadu_ps(w.mn_t + g * kAmxRows);
  for (int col = 0; col < kCols; ++col) {
    const __m512 isum = column<kCols>(c, col);
    acc[col] =
        _mm512_fmadd_ps(isum, _mm512_mul_ps(ls, _mm512_set1_ps(x.dv[g * kCols + col])), acc[col]);
    if constexpr (kNarrow)
      acc[col] = _mm512_fmadd_ps(mn, _mm512_set1_ps(x.sv[g * kCols + col]), acc[col]);
  }
}

template <bool kNarrow, int kCols>
void dot_few(const AmxWeights& w, int group, int64_t n_in, const AmxActs& x, float* out) {
  configure(Layout::kFew, group, kCols);
  alignas(64) int32_t c[2][kAmxRows * kCols];
  __m512 acc[kCols];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const int64_t n_g = n_in / group;
  for (int64_t g = 0; g < n_g; g += 2) {
    const bool two = g + 1 < n_g;
    issue<false>(w, x.b, g, group, kCols);
    if (two) issue<true>(w, x.b, g + 1, group, kCols);
    _tile_stored(0, c[0], kCols * 4);
    chain_few<kNarrow, kCols>(w, x, g, c[0], acc);
    if (two) {
      _tile_stored(1, c[1], kCols * 4);
      chain_few<kNarrow, kCols>(w, x, g + 1, c[1], acc);
    }
  }
  for (int col = 0; col < kCols; ++col) _mm512_storeu_ps(out + col * kAmxRows, acc[col]);
}

}  // namespace

void amx_pack_acts(const int8_t* const* q, const float* const* d, int n, int n_cols, int group,
                   int64_t n_in, int8_t* b, float* dv, float* sv, int32_t* xs) {
  const int64_t n_g = n_in / group;
  for (int64_t g = 0; g < n_g; ++g) {
    int8_t* bg = b + g * group * n_cols;
    for (int col = 0; col < n_cols; ++col) {
      float* dst_d = dv + g * n_cols + col;
      float* dst_s = sv + g * n_cols + col;
      int32_t* dst_x = xs + g * n_cols + col;
      if (col >= n) {
        for (int k = 0; k < group / 4; ++k) std::memset(bg + k * n_cols * 4 + col * 4, 0, 4);
        *dst_d = 0.0f;
        *dst_s = 0.0f;
        *dst_x = 0;
        continue;
      }
      const int8_t* src = q[col] + g * group;
      int sum = 0;
      for (int k = 0; k < group / 4; ++k) {
        std::memcpy(bg + k * n_cols * 4 + col * 4, src + 4 * k, 4);
        for (int j = 0; j < 4; ++j) sum += src[4 * k + j];
      }
      const float db = d[col][g * group / 32];
      *dst_d = db;
      *dst_s = db * static_cast<float>(sum);
      *dst_x = sum;
    }
  }
}

void amx_dot_block(const AmxWeights* w, bool narrow, int group, int64_t n_in, const AmxActs* x,
                   float* out) {
  if (narrow) return dot_block<true>(w, x, group, n_in, out);
  dot_block<false>(w, x, group, n_in, out);
}

void amx_store_transposed(const float* tile, int nr, int nc, float* dst, int64_t dst_stride) {
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(kAmxCols));
  const __mmask16 keep = static_cast<__mmask16>((1u << nr) - 1);
  for (int c = 0; c < nc; ++c)
    _mm512_mask_storeu_ps(dst + c * dst_stride, keep, _mm512_i32gather_ps(rows, tile + c, 4));
}

void amx_dot_few(const AmxWeights& w, bool narrow, int group, int64_t n_in, const AmxActs& x,
                 int n_cols, float* out) {
  with_tile_count(n_cols, [&](auto cols) {
    if (narrow) return dot_few<true, decltype(cols)::value>(w, group, n_in, x, out);
    dot_few<false, decltype(cols)::value>(w, group, n_in, x, out);
  });
}

}  // namespace t9::cpu
