// Internal to the CPU backend: addressing tensor rows in host memory.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace t9::cpu {

inline uint8_t* base_ptr(const Tensor& t) {
  T9_CHECK(t.valid(), "op given an unset tensor");
  return static_cast<uint8_t*>(t.buf->device_ptr) + t.offset;
}

// Pointer to row r (a flat index over ne[1], ne[2], ne[3]) of t.
inline uint8_t* row_ptr(const Tensor& t, int64_t r) {
  const int64_t i1 = r % t.ne[1], i2 = (r / t.ne[1]) % t.ne[2], i3 = r / (t.ne[1] * t.ne[2]);
  return base_ptr(t) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

inline float* f32_row(const Tensor& t, int64_t r) {
  return reinterpret_cast<float*>(row_ptr(t, r));
}

inline void check_f32_rows(const Tensor& t, const char* what) {
  T9_CHECK(t.type == GgmlType::F32, "{} must be F32, is {}", what, type_name(t.type));
  T9_CHECK(t.nb[0] == 4, "{} rows must be contiguous", what);
}

inline void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  T9_CHECK(a.ne == b.ne, "{}: shape [{},{},{},{}] vs [{},{},{},{}]", what, a.ne[3], a.ne[2],
           a.ne[1], a.ne[0], b.ne[3], b.ne[2], b.ne[1], b.ne[0]);
}

}  // namespace t9::cpu
