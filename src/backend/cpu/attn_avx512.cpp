// The attention task (attn_kernels.h) with AVX-512: the task's queries sit in one or two vectors
// of 16 lanes, so a key row is converted once and scored against all of them; scores come from
// 8 (4 x 2, 2 x 4 vectors) independent FMA chains over head_dim, one per key, which keeps the FMA
// units busy; values are converted once per 16-key tile and accumulated two queries at a time.
// exp is a Cephes-style polynomial (about 2 ulp), the same for every lane.
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source, which it
// then reports as uninitialized (as in the other *_avx512.cpp files).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attn_kernels.h"

#define T9_ISA_NS avx512_attn
#include "backend/cpu/attn_impl.h"

namespace t9::cpu {
namespace {

constexpr int kTile = 16;  // keys per value tile

// exp(x) for softmax arguments (x <= 0): x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial.
__m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

void load_row(const uint8_t* row, bool f16, int64_t hd, float* dst) {
  if (!f16) {
    std::memcpy(dst, row, static_cast<size_t>(hd) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < hd; i += 16)
    _mm512_storeu_ps(
        dst + i, _mm512_maskz_cvtph_ps(
                     0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i))));
}

// The cache lines of a key or value row, for the next step.
void prefetch_row(const uint8_t* row, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(row + o), _MM_HINT_T0);
}

// Lanes of query vectors: positions, visible ranges, per-lane state.
template <int NV>
struct Lanes {
  __m512i lo[NV], pos[NV];
  __m512 mx[NV], sum[NV];
  __mmask16 visible(int v, int64_t kp) const {
    const __m512i k = _mm512_set1_epi32(static_cast<int32_t>(kp));
    return _mm512_cmpge_epi32_mask(k, lo[v]) & _mm512_cmple_epi32_mask(k, pos[v]);
  }
};

// Pass 1: s[k][lane] and the lane maxima, KB keys per step (one FMA chain per key and vector).
template <int NV>
void score_keys(const AttnTask& t, const float* qt, int64_t kmin, int64_t kmax, float* s,
                float* krows, Lanes<NV>& L) {
  constexpr int KB = 8 / NV, W = NV * 16;
  const int64_t hd = t.head_dim;
  const __m512 scale = _mm512_set1_ps(t.scale);
  for (int64_t kp = kmin; kp <= kmax; kp += KB) {
    const int nb = static_cast<int>(std::min<int64_t>(KB, kmax - kp + 1));
    for (int64_t b = kp + KB; b < std::min<int64_t>(kp + 2 * KB, kmax + 1); ++b)
      prefetch_row(t.k_row(b), hd * (t.k_f16 ? 2 : 4));
    for (int b = 0; b < KB; ++b) {
      if (b < nb)
        load_row(t.k_row(kp + b), t.k_f16, hd, krows + b * hd);
      else
        std::memset(krows + b * hd, 0, static_cast<size_t>(hd) * sizeof(float));
    }
    __m512 acc[KB][NV];
    for (int b = 0; b < KB; ++b)
      for (int v = 0; v < NV; ++v) acc[b][v] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; ++d) {
      __m512 q[NV];
      for (int v = 0; v < NV; ++v) q[v] = _mm512_loadu_ps(qt + d * W + 16 * v);
      for (int b = 0; b < KB; ++b) {
        const __m512 kd = _mm512_set1_ps(krows[b * hd + d]);
        for (int v = 0; v < NV; ++v) acc[b][v] = _mm512_fmadd_ps(kd, q[v], acc[b][v]);
      }
    }
    for (int b = 0; b < nb; ++b) {
      for (int v = 0; v < NV; ++v) {
        __m512 sc = _mm512_mul_ps(acc[b][v], scale);
        float* dst = s + (kp + b - kmin) * W + 16 * v;
        if (t.softcap > 0.0f) {
          alignas(64) float tmp[16];
          _mm512_store_ps(tmp, sc);
          for (float& x : tmp) x = t.softcap * std::tanh(x / t.softcap);
          sc = _mm512_load_ps(tmp);
        }
        _mm512_storeu_ps(dst, sc);
        L.mx[v] = _mm512_mask_max_ps(L.mx[v], L.visible(v, kp + b), L.mx[v], sc);
      }
    }
  }
}

// acc[i] += sum_b w[b][i] * V[b] over nt keys for queries i0 .. i0 + Q - 1, head_dim in chunks
// of NR * 16 floats (accumulators stay in registers over the keys of the tile).
template <int Q, int NR>
void accumulate_values(const float* w, int W, int i0, int nt, const float* vt, int64_t hd,
                       float* acc) {
  for (int64_t c = 0; c < hd; c += NR * 16) {
    __m512 a[Q][NR];
    for (int j = 0; j < Q; ++j)
      for (int r = 0; r < NR; ++r) a[j][r] = _mm512_loadu_ps(acc + (i0 + j) * hd + c + 16 * r);
    for (int b = 0; b < nt; ++b) {
      const float* vb = vt + b * hd + c;
      for (int j = 0; j < Q; ++j) {
        const __m512 wb = _mm512_set1_ps(w[b * W + i0 + j]);
        for (int r = 0; r < NR; ++r)
          a[j][r] = _mm512_fmadd_ps(wb, _mm512_loadu_ps(vb + 16 * r), a[j][r]);
      }
    }
    for (int j = 0; j < Q; ++j)
      for (int r = 0; r < NR; ++r) _mm512_storeu_ps(acc + (i0 + j) * hd + c + 16 * r, a[j][r]);
  }
}

template <int NR>
void accumulate_all(const float* w, int W, int nq, int nt, const float* vt, int64_t hd,
                    float* acc) {
  int i = 0;
  for (; i + 2 <= nq; i += 2) accumulate_values<2, NR>(w, W, i, nt, vt, hd, acc);
  if (i < nq) accumulate_values<1, NR>(w, W, i, nt, vt, hd, acc);
}

template <int NV>
void attn_task_lanes(const AttnTask& t) {
  constexpr int W = NV * 16;
  const int64_t hd = t.head_dim;
  const int nq = t.n_q;
  Lanes<NV> L;
  alignas(64) int32_t lo[W], pos[W];
  for (int i = 0; i < W; ++i) {
    lo[i] = i < nq ? t.lo[i] : std::numeric_limits<int32_t>::max();  // padding lanes see nothing
    pos[i] = i < nq ? t.pos[i] : -1;
  }
  for (int v = 0; v < NV; ++v) {
    L.lo[v] = _mm512_load_si512(lo + 16 * v);
    L.pos[v] = _mm512_load_si512(pos + 16 * v);
    L.mx[v] = _mm512_set1_ps(-INFINITY);
    L.sum[v] = _mm512_setzero_ps();
  }
  const int64_t kmin = *std::min_element(t.lo, t.lo + nq);
  const int64_t kmax = *std::max_element(t.pos, t.pos + nq);
  thread_local std::vector<float> qt, s, rows, w, acc;
  qt.assign(static_cast<size_t>(hd * W), 0.0f);
  for (int i = 0; i < nq; ++i)
    for (int64_t d = 0; d < hd; ++d) qt[static_cast<size_t>(d * W + i)] = t.q[i][d];
  s.resize(static_cast<size_t>((kmax - kmin + 1) * W));
  rows.resize(static_cast<size_t>(std::max<int64_t>(8, kTile) * hd));
  w.resize(static_cast<size_t>(kTile * W));
  acc.assign(static_cast<size_t>(nq * hd), 0.0f);
  score_keys<NV>(t, qt.data(), kmin, kmax, s.data(), rows.data(), L);

  for (int64_t k0 = kmin; k0 <= kmax; k0 += kTile) {
    const int nt = static_cast<int>(std::min<int64_t>(kTile, kmax - k0 + 1));
    for (int64_t b = k0 + kTile; b < std::min<int64_t>(k0 + 2 * kTile, kmax + 1); ++b)
      prefetch_row(t.v_row(b), hd * (t.v_f16 ? 2 : 4));
    for (int b = 0; b < nt; ++b) {
      load_row(t.v_row(k0 + b), t.v_f16, hd, rows.data() + b * hd);
      for (int v = 0; v < NV; ++v) {
        const __m512 sc = _mm512_loadu_ps(s.data() + (k0 + b - kmin) * W + 16 * v);
        const __m512 e =
            _mm512_maskz_mov_ps(L.visible(v, k0 + b), exp_ps(_mm512_sub_ps(sc, L.mx[v])));
        L.sum[v] = _mm512_add_ps(L.sum[v], e);
        _mm512_storeu_ps(w.data() + b * W + 16 * v, e);
      }
    }
    if (hd % 64 == 0)
      accumulate_all<4>(w.data(), W, nq, nt, rows.data(), hd, acc.data());
    else
      accumulate_all<1>(w.data(), W, nq, nt, rows.data(), hd, acc.data());
  }
  alignas(64) float sum[W];
  for (int v = 0; v < NV; ++v) _mm512_store_ps(sum + 16 * v, L.sum[v]);
  for (int i = 0; i < nq; ++i) {
    const __m512 d = _mm512_set1_ps(sum[i]);
    for (int64_t c = 0; c < hd; c += 16)
      _mm512_storeu_ps(t.out[i] + c, _mm512_div_ps(_mm512_loadu_ps(acc.data() + i * hd + c), d));
  }
}

}  // namespace

void attn_task_avx512(const AttnTask& t) {
  if (t.head_dim % 16 != 0) return avx512_attn::attn_task_portable(t);
  if (t.n_q <= 16) return attn_task_lanes<1>(t);
  if (t.n_q <= 32) return attn_task_lanes<2>(t);
  attn_task_lanes<4>(t);
}

}  // namespace t9::cpu
