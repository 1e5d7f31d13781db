// Internal to the CPU backend: addressing tensor rows in host memory, splitting work.
#pragma once

#include <algorithm>
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

// Contiguous range `c` of n_chunks over n_items.
inline void split(int64_t n_items, int64_t c, int64_t n_chunks, int64_t* begin, int64_t* end) {
  *begin = n_items * c / n_chunks;
  *end = n_items * (c + 1) / n_chunks;
}

// Chunks of weight-row groups per matmul: several per thread, so a thread that the OS delays
// leaves its share to the others (work_pool.h) instead of holding everyone up.
inline int64_t n_chunks_for(int64_t n_groups, int n_threads) {
  return std::min<int64_t>(n_groups, 8 * static_cast<int64_t>(n_threads));
}

}  // namespace t9::cpu
