// The decode side of CpuIsa::kAmx: 16 weight rows x 1..4 activation rows with VNNI, weights
// decoded straight from their blocks (fused_formats_avx512.h), giving bit for bit the AMX
// kernels' results (matmul_amx.h). The tile unit is latency-bound for so few activation rows
// (one tdpbssd per 16 rows x 32 elements, ~16 cycles each, not overlapped enough): this kernel
// keeps the VNNI decode speed.
//
// Per 64-element step, vpdpbusd gives each row's partial sums in 16 lanes (4 elements each); an
// exact int32 transpose-reduction then turns the 16 rows' partials into one vector per scale
// group with lane r = row r, and the float chain of matmul_amx.h runs on those vectors.
#include <immintrin.h>

// GCC 12 false positives inside AVX-512 intrinsics (see matmul_avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "backend/cpu/fused_formats_avx512.h"
#include "backend/cpu/matmul_amx.h"
#include "backend/cpu/matmul_kernels.h"

namespace t9::cpu {
namespace {

using namespace fused_formats;

// Chunk c (128 bits) of the result = [sum X_c, sum Y_c, sum Z_c, sum W_c]: each chunk's four
// dwords summed, for four vectors at once.
inline __m512i chunk_sums4(__m512i x, __m512i y, __m512i z, __m512i w) {
  const __m512i s0 = _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
  const __m512i s1 = _mm512_add_epi32(_mm512_unpacklo_epi32(z, w), _mm512_unpackhi_epi32(z, w));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s0, s1), _mm512_unpackhi_epi64(s0, s1));
}

constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);

// 32-element groups: p[r] lanes 0..7 hold row r's first group, 8..15 its second. Out: g[0], g[1]
// with lane r = that group's sum for row r.
inline void reduce_g32(const __m512i* p, __m512i* g) {
  __m512i
      q[8];  // q = [a:first | a:second | b:first | b:second], rows (a, b) = (i, i+4), (8+i, 12+i)
  for (int i = 0; i < 4; ++i) {
    q[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(p[i], p[i + 4], kEven),
                            _mm512_shuffle_i32x4(p[i], p[i + 4], kOdd));
    q[4 + i] = _mm512_add_epi32(_mm512_shuffle_i32x4(p[8 + i], p[12 + i], kEven),
                                _mm512_shuffle_i32x4(p[8 + i], p[12 + i], kOdd));
  }
  // r0 = [rows 0-3 first | rows 0-3 second | rows 4-7 first | rows 4-7 second], r1 rows 8-15.
  const __m512i r0 = chunk_sums4(q[0], q[1], q[2], q[3]);
  const __m512i r1 = chunk_sums4(q[4], q[5], q[6], q[7]);
  g[0] = _mm512_shuffle_i32x4(r0, r1, kEven);
  g[1] = _mm512_shuffle_i32x4(r0, r1, kOdd);
}

// 16-element groups: chunk c of p[r] is row r's group c. Out: g[0..3], lane r = row r.
inline void reduce_g16(const __m512i* p, __m512i* g) {
  __m512i t[4];  // t[k] chunk c = rows 4k..4k+3, group c
  for (int k = 0; k < 4; ++k)
    t[k] = chunk_sums4(p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]);
  constexpr int kLo = _MM_SHUFFLE(1, 0, 1, 0), kHi = _MM_SHUFFLE(3, 2, 3, 2);
  const __m512i u0 = _mm512_shuffle_i32x4(t[0], t[1], kLo),
                u1 = _mm512_shuffle_i32x4(t[2], t[3], kLo);
  const __m512i u2 = _mm512_shuffle_i32x4(t[0], t[1], kHi),
                u3 = _mm512_shuffle_i32x4(t[2], t[3], kHi);
  g[0] = _mm512_shuffle_i32x4(u0, u1, kEven);
  g[1] = _mm512_shuffle_i32x4(u0, u1, kOdd);
  g[2] = _mm512_shuffle_i32x4(u2, u3, kEven);
  g[3] = _mm512_shuffle_i32x4(u2, u3, kOdd);
}

// v[g] lane r = a[r][g] for 16 arrays a[r] of 8 floats: an 8x8 transpose in each 256-bit half,
// rows r and r + 4 (r < 4) or r + 8 and r + 12 sharing a vector so the halves land in row order.
inline void transpose_16x8(const float* const* a, __m512* v) {
  static constexpr int kPair[8] = {0, 1, 2, 3, 8, 9, 10, 11};
  __m512 z[8], t[8], u[8];
  for (int i = 0; i < 8; ++i)
    z[i] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_load_ps(a[kPair[i]])),
                              _mm256_load_ps(a[kPair[i] + 4]), 1);
  for (int h = 0; h < 2; ++h) {  // rows 0-7 (z 0-3), rows 8-15 (z 4-7)
    const __m512* zi = z + 4 * h;
    __m512* ti = t + 4 * h;
    ti[0] = _mm512_unpacklo_ps(zi[0], zi[1]);
    ti[1] = _mm512_unpackhi_ps(zi[0], zi[1]);
    ti[2] = _mm512_unpacklo_ps(zi[2], zi[3]);
    ti[3] = _mm512_unpackhi_ps(zi[2], zi[3]);
    __m512* ui = u + 4 * h;  // ui[k] 128-bit lane L: element k + 4 (L & 1) of 4 rows
    ui[0] = _mm512_shuffle_ps(ti[0], ti[2], _MM_SHUFFLE(1, 0, 1, 0));
    ui[1] = _mm512_shuffle_ps(ti[0], ti[2], _MM_SHUFFLE(3, 2, 3, 2));
    ui[2] = _mm512_shuffle_ps(ti[1], ti[3], _MM_SHUFFLE(1, 0, 1, 0));
    ui[3] = _mm512_shuffle_ps(ti[1], ti[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm512_shuffle_f32x4(u[k], u[4 + k], kEven);
    v[k + 4] = _mm512_shuffle_f32x4(u[k], u[4 + k], kOdd);
  }
}

// Formats whose scales (and offsets) for a whole span sit in their State (span_scales).
template <class F>
concept SpanScales = requires {
  F::kSpanGroups;
};

template <class F, int kCols>
void rows16_tile(const uint8_t* const* w, const int8_t* const* xq, const AmxActs& x, int64_t n_in,
                 float* mn, float* out, PrefetchRange ahead) {
  constexpr int kG = F::kGroup, kPerStep = 64 / kG;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t n_s = n_in / 16;
  typename F::State st[kAmxRows];
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i state_off = _mm512_mullo_epi32(iota, _mm512_set1_epi32(sizeof(st[0])));
  const __m512i mn_off = _mm512_mullo_epi32(iota, _mm512_set1_epi32(static_cast<int>(n_s)));
  __m512 acc[kCols];
  for (auto& a : acc) a = _mm512_setzero_ps();
  // No per-row prefetch here: the hardware's L2 streamer follows the 16 rows by itself where they
  // are long, and software prefetches into L1 only took line-fill buffers from it (8960-wide Q4_K
  // rows from DRAM: 8.5 GB/s without, 7.5 with). Short rows (the caller passes `ahead` for rows
  // up to 2 KiB) end before the streamer ramps up: there the next 16 rows are prefetched into L2,
  // spread evenly over this tile's spans (1536-wide Q4_K: 5.8 -> 6.9 GB/s, dev/kernels/README.md).
  const int64_t n_spans = n_in / F::kSpan;
  const int64_t pf_lines = (ahead.n_bytes + 63) / 64, pf_per_span = (pf_lines + n_spans - 1) / n_spans;
  int64_t pf_next = 0;
  for (int64_t e = 0; e < n_in; e += F::kSpan) {
    for (int64_t l = 0; l < pf_per_span && pf_next < pf_lines; ++l, ++pf_next)
      _mm_prefetch(reinterpret_cast<const char*>(ahead.begin) + 64 * pf_next, _MM_HINT_T1);
    for (int r = 0; r < kAmxRows; ++r) F::begin(st[r], w[r], e, mn + r * n_s);
    [[maybe_unused]] __m512 span_ls[16], span_mn[16];
    if constexpr (SpanScales<F>) {  // transposes once per span instead of gathers per step
      const float* a[kAmxRows];
      for (int h = 0; h < F::kSpanGroups / 8; ++h) {
        for (int r = 0; r < kAmxRows; ++r) a[r] = F::span_scales(st[r]) + 8 * h;
        transpose_16x8(a, span_ls + 8 * h);
        if constexpr (F::kOffsetPerScale == 0.0f) {
          for (int r = 0; r < kAmxRows; ++r) a[r] = F::span_offsets(st[r]) + 8 * h;
          transpose_16x8(a, span_mn + 8 * h);
        }
      }
    }
    for (int j = 0; j < F::kSpan / 64; ++j) {
      const int64_t i = e + 64 * j, g0 = i / kG;
      // Scales and offsets of this step's groups, lane r = row r.
      __m512 ls[kPerStep], off[kPerStep];
      const float* sbase = F::group_scales(st[0], j);
      for (int k = 0; k < kPerStep; ++k) {
        if constexpr (SpanScales<F>)
          ls[k] = span_ls[(g0 + k) % F::kSpanGroups];
        else
          ls[k] = _mm512_i32gather_ps(state_off, sbase + k * F::kScaleStride, 1);
        if constexpr (F::kWide)
          off[k] = _mm512_setzero_ps();
        else if constexpr (F::kOffsetPerScale != 0.0f)  // exact: a power-of-two multiple
          off[k] = _mm512_mul_ps(ls[k], _mm512_set1_ps(F::kOffsetPerScale));
        else if constexpr (SpanScales<F>)
          off[k] = span_mn[(g0 + k) % F::kSpanGroups];
        else
          off[k] = _mm512_i32gather_ps(mn_off, mn + (g0 + k) * kG / 16, 4);
      }
      for (int c = 0; c < kCols; ++c) {
        const __m512i xv = _mm512_loadu_si512(xq[c] + i);
        __m512i init = _mm512_setzero_si512();
        if constexpr (F::kWide)  // -128 * sum(x) per lane undoes the +128 bias of wide weights
          init = _mm512_sub_epi32(init, _mm512_dpbusd_epi32(init, bias, xv));
        __m512i p[kAmxRows];
        for (int r = 0; r < kAmxRows; ++r) {
          __m512i wq = F::codes(st[r], j);
          if constexpr (F::kWide) wq = _mm512_xor_si512(wq, bias);
          p[r] = _mm512_dpbusd_epi32(init, wq, xv);
        }
        __m512i g[kPerStep];
        if constexpr (kG == 32)
          reduce_g32(p, g);
        else
          reduce_g16(p, g);
        for (int k = 0; k < kPerStep; ++k) {
          const int64_t gi = (g0 + k) * kCols + c;
          acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(g[k]),
                                   _mm512_mul_ps(ls[k], _mm512_set1_ps(x.dv[gi])), acc[c]);
          if constexpr (!F::kWide)
            acc[c] = _mm512_fmadd_ps(off[k], _mm512_set1_ps(x.sv[gi]), acc[c]);
        }
      }
    }
  }
  for (int c = 0; c < kCols; ++c) _mm512_storeu_ps(out + c * kAmxRows, acc[c]);
}

}  // namespace

bool amx_rows16_supported(GgmlType type, int64_t n_in) {
  return fused_supported_avx512(type, n_in);
}

void amx_rows16_dot(GgmlType type, const uint8_t* const* w, int n_cols, const int8_t* const* xq,
                    const AmxActs& x, int64_t n_in, float* mn, float* out, PrefetchRange ahead) {
  visit_format(type, [&](auto fmt) {
    with_tile_count(n_cols, [&](auto cols) {
      rows16_tile<decltype(fmt), decltype(cols)::value>(w, xq, x, n_in, mn, out, ahead);
    });
  });
}

}  // namespace t9::cpu
