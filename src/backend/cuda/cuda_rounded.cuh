// Activations rounded by the op that wrote them. Internal to src/backend/cuda/*.cu.
//
// The int8-activation matmuls round x per 32 elements before their dot products (round_x, one
// quantize_act_kernel launch). In a decode step nearly every such x is the output of the op just
// before: a pre-norm (add_rms_norm, rms_norm) or a GLU (the expert and shared-expert down
// projections, the Gated DeltaNet's gated norm). Those ops can write the codes as they write the
// floats (quantize_value on the value in the register: the same bits as round_x), which removes
// ~200 of a 35B decode step's ~1250 launches.
//
// The backend keeps the one most recent such output here. A matmul whose x covers exactly those
// floats takes the codes instead of rounding; every op reports what it writes (wrote()), and a
// write that overlaps the floats drops them, as do uploads, frees and sync(). What a step
// enqueues depends only on its op sequence and shapes, so CUDA graph tapes still repeat.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_units.cuh"  // ActBlock

namespace t9::cuda {

// Where a producer writes the codes of its output (both null: it does not).
struct RoundedOut {
  int8_t* xq = nullptr;    // one code per element, in the output's memory order
  ActBlock* xb = nullptr;  // one block per 32 elements
};

// The bytes [begin, end) a tensor's elements span (an empty span for an empty tensor).
struct ByteSpan {
  const char* begin = nullptr;
  const char* end = nullptr;
  bool overlaps(const ByteSpan& o) const { return begin < o.end && o.begin < end; }
  bool operator==(const ByteSpan&) const = default;
};

inline ByteSpan byte_span(const Tensor& t) {
  if (!t.valid() || t.n_elements() == 0) return {};
  size_t extent = row_bytes(t.type, t.ne[0]);  // rows (dim 0) are contiguous for every op
  for (int d = 1; d < 4; ++d) extent += static_cast<size_t>(t.ne[d] - 1) * t.nb[d];
  const char* b = base_ptr(t);
  return {b, b + extent};
}

class RoundedCache {
 public:
  explicit RoundedCache(bool enabled) : enabled_(enabled) {}

  // Called by a producer about to write `out`: where to put the codes, or {} when the output
  // is not eligible (fusion off; not contiguous F32 rows of a multiple of 32 elements). Either
  // way `out` counts as written, and when eligible it becomes the cached rounding.
  RoundedOut produce(const Tensor& out, Scratch& scratch, Stream& stream) {
    wrote(out);
    if (!enabled_ || out.type != GgmlType::F32 || !out.is_contiguous() || out.ne[0] % 32 != 0 ||
        out.n_elements() == 0)
      return {};
    const size_t n = static_cast<size_t>(out.n_elements());
    const size_t q_bytes = (n + 255) & ~size_t{255};
    auto* base =
        static_cast<uint8_t*>(scratch.reserve(q_bytes + n / 32 * sizeof(ActBlock), stream));
    RoundedOut ro{reinterpret_cast<int8_t*>(base), reinterpret_cast<ActBlock*>(base + q_bytes)};
    span_ = byte_span(out);
    rx_ = {ro.xq, ro.xb};
    valid_ = true;
    return ro;
  }

  // The codes of x when the cached output is exactly x's floats, else null.
  const RoundedX* find(const Tensor& x) {
    if (!valid_ || x.type != GgmlType::F32 || !x.is_contiguous() || x.ne[0] % 32 != 0 ||
        !(byte_span(x) == span_))
      return nullptr;
    ++reuses_;
    return &rx_;
  }

  // Every op calls this for each tensor it writes (before launching).
  void wrote(const Tensor& t) { wrote(byte_span(t)); }
  void wrote(const ByteSpan& s) {
    if (valid_ && s.overlaps(span_)) clear();
  }
  void clear() { valid_ = false; }
  long reuses() const { return reuses_; }

 private:
  bool enabled_;
  bool valid_ = false;
  ByteSpan span_;
  RoundedX rx_;
  long reuses_ = 0;
};

}  // namespace t9::cuda
