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

#include <climits>
#include <type_traits>

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

// ---- the scales and offsets of one span in 16 rows, lane r = row r ----
// Gathered straight from the block headers (blk: row 0's block; row_off: lane r = byte offset of
// row r's block from it), with the float operations of the formats' begin() (scale * d,
// min * -dmin, ...), so the values are unpack_row's bit for bit. One gather per header word
// replaces 16 scalar header decodes and the transposes that turned them into lane = row order.

inline __m512i gather32(const uint8_t* p, __m512i row_off) {
  return _mm512_i32gather_epi32(row_off, p, 1);
}
// The fp16 in the low (kHigh: high) half of each dword, as floats.
template <bool kHigh>
inline __m512 half_of(__m512i v) {
  if constexpr (kHigh) v = _mm512_srli_epi32(v, 16);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

// ls[g], off[g] for the span's F::kSpan / F::kGroup groups. off is the group's offset per unit of
// activation sum (the fma(off, sum(x)) term); wide formats (Q8_0) have none.
template <class F>
inline void span16(const uint8_t* blk, __m512i row_off, __m512* ls, __m512* off) {
  if constexpr (std::is_same_v<F, Q4_KFmt>) {
    const __m512i w0 = gather32(blk, row_off);  // d | dmin << 16
    const __m512i a0 = gather32(blk + 4, row_off), a1 = gather32(blk + 8, row_off),
                  a2 = gather32(blk + 12, row_off);
    const __m512 d = half_of<false>(w0);
    const __m512 neg_dmin = _mm512_castsi512_ps(_mm512_xor_si512(  // -dmin, signed zeros too
        _mm512_castps_si512(half_of<true>(w0)), _mm512_set1_epi32(INT32_MIN)));
    const __m512i m3f = _mm512_set1_epi32(0x3F3F3F3F), m0f = _mm512_set1_epi32(0x0F0F0F0F),
                  m30 = _mm512_set1_epi32(0x30303030);
    // Bytes 0..3: the 6-bit scales (mins) of pairs 0..3, then of pairs 4..7 (k_scale_min).
    const __m512i sc[2] = {_mm512_and_si512(a0, m3f),
                           _mm512_or_si512(_mm512_and_si512(a2, m0f),
                                           _mm512_and_si512(_mm512_srli_epi32(a0, 2), m30))};
    const __m512i mi[2] = {_mm512_and_si512(a1, m3f),
                           _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), m0f),
                                           _mm512_and_si512(_mm512_srli_epi32(a1, 2), m30))};
    const __m512i ff = _mm512_set1_epi32(0xFF);
    for (int j = 0; j < 8; ++j) {
      const int sh = 8 * (j % 4);
      const __m512i sj = _mm512_and_si512(_mm512_srli_epi32(sc[j / 4], sh), ff);
      const __m512i mj = _mm512_and_si512(_mm512_srli_epi32(mi[j / 4], sh), ff);
      ls[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(sj), d);
      off[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(mj), neg_dmin);
    }
  } else if constexpr (std::is_same_v<F, Q6_KFmt>) {
    // 16 int8 scales at byte 192, the fp16 d at 208 (read as the high half of bytes 206..209:
    // a dword at 208 would run past the block, and past the tensor on its last block).
    const __m512 d = half_of<true>(gather32(blk + 206, row_off));
    for (int q = 0; q < 4; ++q) {
      const __m512i v = gather32(blk + 192 + 4 * q, row_off);
      for (int b = 0; b < 4; ++b) {  // byte b, sign-extended
        const __m512i s = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * b), 24);
        ls[4 * q + b] = _mm512_mul_ps(_mm512_cvtepi32_ps(s), d);
        off[4 * q + b] = _mm512_mul_ps(ls[4 * q + b], _mm512_set1_ps(F::kOffsetPerScale));
      }
    }
  } else {  // two 32-element blocks with an fp16 d at byte 0 (and an fp16 min at byte 2)
    for (int k = 0; k < 2; ++k) {
      const __m512i h = gather32(blk + k * F::kBlockBytes, row_off);
      ls[k] = half_of<false>(h);
      if constexpr (F::kWide)
        off[k] = _mm512_setzero_ps();
      else if constexpr (F::kOffsetPerScale != 0.0f)  // exact: a power-of-two multiple
        off[k] = _mm512_mul_ps(ls[k], _mm512_set1_ps(F::kOffsetPerScale));
      else
        off[k] = half_of<true>(h);
    }
  }
}

constexpr int64_t kQ6kAhead = 2;  // spans (see rows16_tile's prefetches)

template <class F, int kCols>
void rows16_tile(const uint8_t* const* w, const int8_t* const* xq, const AmxActs& x, int64_t n_in,
                 float* out, PrefetchRange ahead) {
  constexpr int kG = F::kGroup, kPerStep = 64 / kG, kSpanGroups = F::kSpan / kG;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  typename F::State st[kAmxRows];
  // Lane r: row r's start relative to row 0's (the rows of one matrix: within 2 GiB).
  alignas(64) int32_t off32[kAmxRows];
  for (int r = 0; r < kAmxRows; ++r) off32[r] = static_cast<int32_t>(w[r] - w[0]);
  const __m512i row_off = _mm512_load_si512(off32);
  __m512 acc[kCols];
  for (auto& a : acc) a = _mm512_setzero_ps();
  // Prefetches. Long rows: the hardware's L2 streamer follows 16 Q4_K-like rows by itself, and
  // software prefetches into L1 only took line-fill buffers from it (8960-wide Q4_K rows from
  // DRAM: 8.5 GB/s without, 7.5 with). A Q6_K span is read out of order (scales at its end first,
  // then the low bits of each half with their high bits 128 bytes on), which the streamer does
  // not follow over 16 rows: there each row's span kQ6kAhead spans on goes into L2 (Zen 4 VM,
  // 8960-wide Q6_K from DRAM: 6.4 -> 11.6 GB/s; rows of 4096+ inputs were all at ~6). Short rows
  // (the caller passes `ahead` for rows up to 2 KiB) end before the streamer ramps up: there the
  // next 16 rows are prefetched into L2, spread evenly over this tile's spans (1536-wide Q4_K:
  // 5.8 -> 6.9 GB/s, dev/kernels/README.md).
  const int64_t n_spans = n_in / F::kSpan;
  const int64_t pf_lines = (ahead.n_bytes + 63) / 64;
  const int64_t pf_per_span = (pf_lines + n_spans - 1) / n_spans;
  int64_t pf_next = 0;
  for (int64_t e = 0; e < n_in; e += F::kSpan) {
    for (int64_t l = 0; l < pf_per_span && pf_next < pf_lines; ++l, ++pf_next)
      _mm_prefetch(reinterpret_cast<const char*>(ahead.begin) + 64 * pf_next, _MM_HINT_T1);
    if constexpr (std::is_same_v<F, Q6_KFmt>) {
      if (pf_lines == 0 && e + kQ6kAhead * F::kSpan < n_in) {
        for (int r = 0; r < kAmxRows; ++r) {
          const char* h =
              reinterpret_cast<const char*>(w[r] + (e / F::kSpan + kQ6kAhead) * F::kSpanBytes);
          for (int l = 0; l < (F::kSpanBytes + 63) / 64; ++l) _mm_prefetch(h + 64 * l, _MM_HINT_T1);
        }
      }
    }
    for (int r = 0; r < kAmxRows; ++r) F::begin_codes(st[r], w[r], e);
    __m512 span_ls[kSpanGroups], span_off[kSpanGroups];
    span16<F>(w[0] + e / F::kSpan * F::kSpanBytes, row_off, span_ls, span_off);
    for (int j = 0; j < F::kSpan / 64; ++j) {
      const int64_t i = e + 64 * j, g0 = i / kG;
      const __m512* ls = span_ls + j * kPerStep;  // this step's groups, lane r = row r
      const __m512* off = span_off + j * kPerStep;
      // Several columns: the step's codes are decoded once into L1 and reloaded per column.
      alignas(64) __m512i codes[kCols > 1 ? kAmxRows : 1];
      if constexpr (kCols > 1)
        for (int r = 0; r < kAmxRows; ++r) codes[r] = F::codes(st[r], j);
      for (int c = 0; c < kCols; ++c) {
        const __m512i xv = _mm512_loadu_si512(xq[c] + i);
        __m512i init = _mm512_setzero_si512();
        if constexpr (F::kWide)  // -128 * sum(x) per lane undoes the +128 bias of wide weights
          init = _mm512_sub_epi32(init, _mm512_dpbusd_epi32(init, bias, xv));
        __m512i p[kAmxRows];
        for (int r = 0; r < kAmxRows; ++r) {
          __m512i wq;
          if constexpr (kCols > 1)
            wq = _mm512_load_si512(codes + r);
          else
            wq = F::codes(st[r], j);
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
                    const AmxActs& x, int64_t n_in, float* out, PrefetchRange ahead) {
  visit_format(type, [&](auto fmt) {
    using F = decltype(fmt);
    switch (n_cols) {  // 1..8 (with_tile_count's 1..4 and 5..8)
      case 8:
        return rows16_tile<F, 8>(w, xq, x, n_in, out, ahead);
      case 7:
        return rows16_tile<F, 7>(w, xq, x, n_in, out, ahead);
      case 6:
        return rows16_tile<F, 6>(w, xq, x, n_in, out, ahead);
      case 5:
        return rows16_tile<F, 5>(w, xq, x, n_in, out, ahead);
      default:
        with_tile_count(n_cols, [&](auto cols) {
          rows16_tile<F, decltype(cols)::value>(w, xq, x, n_in, out, ahead);
        });
    }
  });
}

}  // namespace t9::cpu
