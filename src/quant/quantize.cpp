// Reference quantizers for the plain and legacy 32-element formats, and the dispatch table.
// The k-quants live in quantize_k.cpp.
#include "quant/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize_k.h"

// Bit-exactness needs every multiply and add rounded separately: no fused multiply-add. GCC
// never contracts in ISO C++ mode (the build uses -std=c++20); clang needs telling.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace t9 {

int nearest_int(float x) {
  // Adding 1.5 * 2^23 leaves the rounded integer (plus 2^22) in the low mantissa bits.
  const float shifted = x + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

namespace {

using QuantFn = void (*)(const float* x, void* dst, int64_t nb);

void quant_f32(const float* x, void* dst, int64_t n) {
  std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}

void quant_f16(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_f16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void quant_bf16(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_bf16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

// The value of largest magnitude (the first one on ties), sign kept: the symmetric formats map
// it to the most negative level so that level is used exactly.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// ggml's (int8_t) cast of a float: truncation toward zero; in range for finite inputs.
int trunc_i8(float v) {
  return static_cast<int8_t>(static_cast<int>(v));
}

void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// Q4_0: d = max / -8, q = clamp(trunc(x / d + 8.5), 0, 15).
void quant_q4_0(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, trunc_i8(x[j] * id + 8.5f));
      const int q1 = std::min(15, trunc_i8(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// Q4_1: d = (max - min) / 15, m = min, q = clamp(trunc((x - min) / d + 0.5), 0, 15).
void quant_q4_1(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, trunc_i8((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, trunc_i8((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// Packs 32 five-bit values: low nibbles into qs (element j and j + 16 share byte j), fifth bits
// into the little-endian qh word (bit i for element i).
void pack_q5(const int q[kQK], uint8_t qs[kQK / 2], uint8_t qh_bytes[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | (q[j + kQK / 2] & 0xF) << 4);
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  for (int b = 0; b < 4; ++b) qh_bytes[b] = static_cast<uint8_t>(qh >> (8 * b));
}

// Q5_0: d = max / -16, q = clamp(trunc(x / d + 16.5), 0, 31).
void quant_q5_0(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, trunc_i8(x[j] * id + 16.5f));
    pack_q5(q, y[i].qs, y[i].qh);
  }
}

// Q5_1: d = (max - min) / 31, m = min, q = clamp(trunc((x - min) / d + 0.5), 0, 31).
void quant_q5_1(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, trunc_i8((x[j] - min) * id + 0.5f));
    pack_q5(q, y[i].qs, y[i].qh);
  }
}

// Q8_0: d = amax / 127, q = round-half-away(x / d).
void quant_q8_0(const float* x, void* dst, int64_t nb) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

QuantFn quant_fn(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return quant_f32;
    case GgmlType::F16:
      return quant_f16;
    case GgmlType::BF16:
      return quant_bf16;
    case GgmlType::Q4_0:
      return quant_q4_0;
    case GgmlType::Q4_1:
      return quant_q4_1;
    case GgmlType::Q5_0:
      return quant_q5_0;
    case GgmlType::Q5_1:
      return quant_q5_1;
    case GgmlType::Q8_0:
      return quant_q8_0;
    case GgmlType::Q2_K:
      return quantize_blocks_q2_k;
    case GgmlType::Q3_K:
      return quantize_blocks_q3_k;
    case GgmlType::Q4_K:
      return quantize_blocks_q4_k;
    case GgmlType::Q5_K:
      return quantize_blocks_q5_k;
    case GgmlType::Q6_K:
      return quantize_blocks_q6_k;
    case GgmlType::Q8_K:
      return quantize_blocks_q8_k;
    default:
      return nullptr;
  }
}

}  // namespace

bool can_quantize(GgmlType t) {
  return quant_fn(t) != nullptr;
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const QuantFn fn = quant_fn(t);
  T9_CHECK(fn != nullptr, "quantize_row: type {} is not supported", traits(t).name);
  const auto& tr = traits(t);
  T9_CHECK(n >= 0 && n % tr.block_elems == 0,
           "quantize_row: {} elements is not a multiple of {}'s block of {}", n, tr.name,
           tr.block_elems);
  fn(src, dst, n / tr.block_elems);
}

Result<std::vector<uint8_t>> quantize_floats(GgmlType t, const float* src, int64_t n) {
  const auto tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (!tr) return error("quantize: unknown type id {}", static_cast<uint32_t>(t));
  if (!can_quantize(t)) return error("quantize: type {} is not supported", tr->name);
  if (n < 0 || n % tr->block_elems != 0)
    return error("quantize: {} elements is not a multiple of {}'s block of {}", n, tr->name,
                 tr->block_elems);
  std::vector<uint8_t> out(row_bytes(t, n));
  quantize_row(t, src, out.data(), n);
  return out;
}

}  // namespace t9
