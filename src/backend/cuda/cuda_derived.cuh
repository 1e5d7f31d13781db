// Data derived from a tensor, kept while the tensor is unchanged. Internal to
// src/backend/cuda/*.cu.
//
// Two kinds, one entry each:
//   - int8 codes. The int8-activation matmuls round x per 32 elements before their dot products
//     (round_x, one quantize_act_kernel launch). The down projections (dense, shared and routed
//     experts) and the Gated DeltaNet's output projection read a GLU's output, and the GLU writes
//     the codes as it writes the floats (quantize_value on the value in the register: the same
//     bits as round_x); so do the attention (its combine kernel, or the folded block's final
//     division: quantize_quad) and mul_sigmoid (the gated attention's output) for the output
//     projection. A matmul whose x covers exactly those floats takes the codes instead of
//     rounding. (The pre-norms did the same in session 10's first version; in their one block per
//     row the extra warp reductions ran one after another and Qwen3-8B decode lost ~6%, run 6.)
//   - the expert sort of a grouped matmul_id (cuda_moe_gemv.cuh): a MoE layer's gate, up and down
//     projections group the same ids the same way, so the sort runs once per layer, not three
//     times (84 us per call for a 2048-token chunk of the 35B, session 10 run 4).
//
// Every op reports what it writes (wrote()); a write that overlaps a tensor an entry was derived
// from drops the entry, as do uploads, frees and sync(). What a step enqueues depends only on its
// op sequence and shapes, so CUDA graph tapes still repeat.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_gemv.cuh"
#include "backend/cuda/cuda_moe_gemv.cuh"
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

class DerivedCache {
 public:
  explicit DerivedCache(bool codes_enabled) : codes_enabled_(codes_enabled) {}

  // ---- int8 codes ----

  // Called by a producer about to write `out`: where to put the codes, or {} when the output
  // is not eligible (fusion off; not contiguous F32 rows of a multiple of 32 elements). Either
  // way `out` counts as written, and when eligible it becomes the cached rounding.
  RoundedOut produce(const Tensor& out, Scratch& scratch, Stream& stream) {
    wrote(out);
    if (!codes_enabled_ || out.type != GgmlType::F32 || !out.is_contiguous() ||
        out.ne[0] % 32 != 0 || out.n_elements() == 0)
      return {};
    const size_t n = static_cast<size_t>(out.n_elements());
    const size_t q_bytes = (n + 255) & ~size_t{255};
    auto* base =
        static_cast<uint8_t*>(scratch.reserve(q_bytes + n / 32 * sizeof(ActBlock), stream));
    RoundedOut ro{reinterpret_cast<int8_t*>(base), reinterpret_cast<ActBlock*>(base + q_bytes)};
    codes_from_ = byte_span(out);
    codes_ = {ro.xq, ro.xb};
    has_codes_ = true;
    return ro;
  }

  // The codes of x when the cached output is exactly x's floats, else null.
  const RoundedX* codes(const Tensor& x) {
    if (!has_codes_ || x.type != GgmlType::F32 || !x.is_contiguous() || x.ne[0] % 32 != 0 ||
        !(byte_span(x) == codes_from_))
      return nullptr;
    ++code_reuses_;
    return &codes_;
  }

  // ---- expert sorts ----

  // The sort of these ids into tiles of tile_rows, if it is still current.
  const ExpertSort* sort(const Tensor& ids, int64_t n_expert, int tile_rows) {
    if (!has_sort_ || !(byte_span(ids) == sort_from_) || sort_.n_expert != n_expert ||
        sort_.tile_rows != tile_rows || sort_.pairs != ids.n_elements() || sort_.k != ids.ne[0])
      return nullptr;
    ++sort_reuses_;
    return &sort_;
  }
  void keep_sort(const Tensor& ids, const ExpertSort& s) {
    sort_from_ = byte_span(ids);
    sort_ = s;
    has_sort_ = true;
  }

  // ---- invalidation ----

  // Every op calls this for each tensor it writes (before launching).
  void wrote(const Tensor& t) { wrote(byte_span(t)); }
  void wrote(const ByteSpan& s) {
    if (has_codes_ && s.overlaps(codes_from_)) has_codes_ = false;
    if (has_sort_ && s.overlaps(sort_from_)) has_sort_ = false;
  }
  void clear() { has_codes_ = has_sort_ = false; }

  long code_reuses() const { return code_reuses_; }
  long sort_reuses() const { return sort_reuses_; }

 private:
  bool codes_enabled_;
  bool has_codes_ = false, has_sort_ = false;
  ByteSpan codes_from_, sort_from_;
  RoundedX codes_;
  ExpertSort sort_;
  long code_reuses_ = 0, sort_reuses_ = 0;
};

}  // namespace t9::cuda
