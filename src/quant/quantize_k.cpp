// Reference k-quant encoders. They follow ggml's reference (no importance matrix) algorithms
// step by step — same search grids, same float operation order, same rounding (nearest_int) —
// because files we write and activations we quantize should match what ggml produces.
#include "quant/quantize_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/k_scales.h"
#include "quant/quantize.h"

// Bit-exactness needs every multiply and add rounded separately: no fused multiply-add. GCC
// never contracts in ISO C++ mode (the build uses -std=c++20); clang needs telling.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace t9 {
namespace {

// Below this every value of a group counts as zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Search grid of fit_scale_min: candidate inverse scales (nmax + rmin + rdelta * k) / range for
// k = 0..nstep.
struct ScaleMinSearch {
  int nmax;              // levels are 0..nmax
  float rmin;            // first offset added to nmax
  float rdelta;          // step of the offset
  int nstep;             // number of steps after the first
  bool use_mad = false;  // minimise weighted absolute error instead of squared error
};

float weighted_error(float diff, bool use_mad) {
  return use_mad ? std::fabs(diff) : diff * diff;
}

// Weighted fit of x ~ scale * L + min with L in [0, nmax] and min <= 0 (ggml's
// make_qkx2_quants): starts from the min/max grid, then tries each candidate inverse scale of
// the search, solving the least-squares 2x2 normal equations for (scale, min) given the rounded
// levels, and keeps the one with the lowest weighted error (squared, or absolute for use_mad).
// x, w, L: [n] with n <= 32. Returns scale; *neg_min = -min >= 0.
float fit_scale_min(int n, const float* x, const float* w, uint8_t* L, float* neg_min,
                    const ScaleMinSearch& s) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(s.nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, s.nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * weighted_error(diff, s.use_mad);
  }
  uint8_t Laux[32];
  for (int is = 0; is <= s.nstep; ++is) {
    iscale =
        (s.rmin + s.rdelta * static_cast<float>(is) + static_cast<float>(s.nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, s.nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float cur_error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
      cur_error += w[i] * weighted_error(diff, s.use_mad);
    }
    if (cur_error < best_error) {
      std::copy(Laux, Laux + n, L);
      best_error = cur_error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// Q4_K / Q5_K common part: fits (scale, min) per 32-element sub-block with weights
// |x| + rms(sub-block), quantizes the 8 scales and 8 mins to 6 bits against the super-block's
// d = max_scale / 63 and dmin = max_min / 63, then re-rounds every element against its decoded
// sub-block scale and min. L: [256] levels in [0, s.nmax].
void quantize_k_scale_min(const float* x, const ScaleMinSearch& s, uint8_t scales[12],
                          uint16_t* d_out, uint16_t* dmin_out, uint8_t L[kQK_K]) {
  float sc[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    sc[j] = fit_scale_min(32, xs, weights, L + 32 * j, &mins[j], s);
    if (sc[j] > max_scale) max_scale = sc[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // ggml stores nearest_int into a uint8_t before clamping; keep that wrap-around.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * sc[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_k_scale_min(ls, lm, scales);
  *d_out = f32_to_f16(max_scale / 63.f);
  *dmin_out = f32_to_f16(max_min / 63.f);

  const float d_all = f16_to_f32(*d_out), dmin_all = f16_to_f32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    int is, im;
    unpack_k_scale_min(scales, j, &is, &im);
    const float d = d_all * static_cast<float>(is);
    if (d == 0.0f) continue;  // keep the levels of the fit; they decode to -dm anyway
    const float dm = dmin_all * static_cast<float>(im);
    for (int l = 0; l < 32; ++l) {
      const int q = nearest_int((x[32 * j + l] + dm) / d);
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, s.nmax));
    }
  }
}

// Weighted (w = x^2) symmetric fit x ~ scale * l, l in [-nmax, nmax - 1] (ggml's make_qx_quants
// with rmse_type 1): tries inverse scales -(nmax + 0.1 k) / max for k = -9..9 and keeps the one
// maximising sumlx^2 / suml2, i.e. minimising the weighted error. L: [n] levels + nmax.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  const auto level = [&](float iscale, int i) {
    return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
  };
  const auto sums = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(level(iscale, i));
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  sums(iscale, &sumlx, &suml2);
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric fit for Q3_K (ggml's make_q3_quants with do_rmse): start from the grid that maps
// the largest magnitude to level -nmax, then for up to 5 passes move single elements to the level
// that is optimal given the others' sums, keeping a move only when it raises sumlx^2 / suml2
// (x^2-weighted). L: [n] levels + nmax, in [0, 2 nmax - 1]. Returns the scale.
float fit_symmetric_q3(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * li * li;
      const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      const float fl = static_cast<float>(new_l);
      slx += w * x[i] * fl;
      sl2 += w * fl * fl;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q2_K and Q3_K store 2 low bits of element 128h + 32s + l in bits 2s of qs[32h + l].
void pack_2bit_low(const uint8_t L[kQK_K], uint8_t qs[kQK_K / 4]) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* Lh = L + 128 * h;
      qs[32 * h + l] = static_cast<uint8_t>((Lh[l] & 3) | (Lh[l + 32] & 3) << 2 |
                                            (Lh[l + 64] & 3) << 4 | (Lh[l + 96] & 3) << 6);
    }
}

}  // namespace

void quantize_blocks_q4_k(const float* x, void* dst, int64_t nb) {
  constexpr ScaleMinSearch kSearch{15, -1.0f, 0.1f, 20};
  auto* y = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_k_scale_min(x, kSearch, y[i].scales, &y[i].d, &y[i].dmin, L);
    // Byte 32c + l: element 64c + l in the low nibble, 64c + 32 + l in the high one.
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | L[64 * c + 32 + l] << 4);
  }
}

void quantize_blocks_q5_k(const float* x, void* dst, int64_t nb) {
  constexpr ScaleMinSearch kSearch{31, -0.5f, 0.1f, 15};
  auto* y = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_k_scale_min(x, kSearch, y[i].scales, &y[i].d, &y[i].dmin, L);
    // As Q4_K for the low 4 bits; the fifth bit of element e goes to bit e / 32 of qh[e % 32].
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | (hi & 0xF) << 4);
        y[i].qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
      }
    }
  }
}

void quantize_blocks_q6_k(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[kQK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      scales[ib] = fit_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    // The largest sub-block scale maps to -128 so its sign is absorbed into d.
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib)
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    const float d_all = f16_to_f32(y[i].d);
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(nearest_int(x[16 * j + l] / d), -32, 31);
        L[16 * j + l] = static_cast<int8_t>(q + 32);
      }
    }
    // Element 128h + 32s + l: low nibble in ql[64h + l + 32 (s % 2)] (nibble s / 2), high two
    // bits in qh[32h + l] at bits 2s.
    for (int h = 0; h < 2; ++h) {
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = y[i].ql + 64 * h;
      uint8_t* qh = y[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | (Lh[l + 64] & 0xF) << 4);
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | (Lh[l + 96] & 0xF) << 4);
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 |
                                     (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
      }
    }
  }
}

void quantize_blocks_q8_k(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // -127 (not -128) keeps levels symmetric, which SIMD dot products rely on.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void quantize_blocks_q2_k(const float* x, void* dst, int64_t nb) {
  // Absolute-error fit with weights |x| over 16-element sub-blocks; scales and mins to 4 bits.
  constexpr ScaleMinSearch kSearch{3, -0.5f, 0.1f, 15, true};
  constexpr float kQ4Scale = 15.f;
  auto* y = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    float scales[16], mins[16], weights[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_scale_min(16, x + 16 * j, weights, L + 16 * j, &mins[j], kSearch);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    y[i].d = y[i].dmin = f32_to_f16(0.f);
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = f32_to_f16(max_scale / kQ4Scale);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y[i].dmin = f32_to_f16(max_min / kQ4Scale);
    }
    const float d_all = f16_to_f32(y[i].d), dmin_all = f16_to_f32(y[i].dmin);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = dmin_all * static_cast<float>(y[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(nearest_int((x[16 * j + l] + dm) / d), 0, 3);
        L[16 * j + l] = static_cast<uint8_t>(q);
      }
    }
    pack_2bit_low(L, y[i].qs);
  }
}

void quantize_blocks_q3_k(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_symmetric_q3(16, 4, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    y[i].d = f32_to_f16(0.f);
    if (max_scale != 0.0f) {
      // The largest scale maps to -32; sub-block scales are stored + 32 in 6 bits.
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        // ggml keeps nearest_int in an int8_t before clamping; keep that wrap-around.
        const int8_t l8 = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        const int l = std::clamp<int>(l8, -32, 31) + 32;
        if (j < 8)
          y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
        else
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        y[i].scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y[i].d = f32_to_f16(1 / iscale);
    }
    const float d_all = f16_to_f32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(unpack_q3_k_scale(y[i].scales, j));
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(nearest_int(x[16 * j + l] / d), -4, 3);
        L[16 * j + l] = static_cast<int8_t>(q + 4);
      }
    }
    // Levels 0..7: the third bit of element e goes to bit e / 32 of hmask[e % 32].
    uint8_t low[kQK_K];
    std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
    for (int e = 0; e < kQK_K; ++e) {
      if (L[e] > 3) y[i].hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
      low[e] = static_cast<uint8_t>(L[e] & 3);
    }
    pack_2bit_low(low, y[i].qs);
  }
}

}  // namespace t9
