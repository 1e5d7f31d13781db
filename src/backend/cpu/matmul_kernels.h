// Internal to the CPU backend: the matmul kernel table each ISA (scalar, AVX2, AVX-512) provides.
//
// Every quantized weight type goes through one integer path. A weight row is first "unpacked"
// (once, then reused for many activation rows) into
//   q  [n_in]      uint8: narrow types hold unsigned codes 0..63; wide types (Q8_0, IQ4_NL,
//                  IQ4_XS) hold signed int8 levels -128..127
//   ls [n_in / 16] float: the scale of each 16-element group
//   mn [n_in / 16] float: the offset of each 16-element group (narrow types; 0 for wide ones)
// so that w[i] = ls[i / 16] * q[i] + mn[i / 16]. Sixteen-element groups cover every format
// (Q2_K, Q3_K and Q6_K scale 16 elements at a time; the rest 32 or 64).
//
// An activation row is quantized to 8 bits in 32-element blocks (ggml's Q8_0 rule, with a float
// scale; one format for all weight types, at least as accurate as ggml's Q8_K):
//   q   [n_in]      int8 in -127..127
//   d   [n_in / 32] float scale, x[i] ~= d[i / 32] * q[i]
//   s16 [n_in / 16] float: d * sum(q) over each 16-element group (for the mn terms)
// Then dot(w, x) = sum_i ls * d * (q_w * q_x) summed as int32 per 4 elements, plus
// sum_g mn[g] * s16[g].
//
// Batch invariance: a kernel computes each (weight row, activation row) pair with the same
// instruction sequence whatever the tile it is part of, so an output never depends on which other
// rows were in the call or on how rows were split over threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/attn_kernels.h"
#include "quant/types.h"

namespace t9::cpu {

// kAmx: the AVX-512 kernels, with quantized matmuls on the AMX-INT8 tile unit (matmul_amx.h).
// kAvx512Groups: the AVX-512 kernels, with quantized matmuls in kAmx's group order computed by
// VNNI (matmul_groups_avx512.cpp and the rows16 decode kernel): kAmx's numbers without tiles.
enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3, kAvx512Groups = 4 };

// Max weight rows per kernel call (the register tile).
inline constexpr int kTileRows = 4;

// Calls fn(std::integral_constant<int, N>{}) with N = n for n in 2..4, else N = 1: turns a
// run-time count of rows (at most 4) into the template parameter of a register-tiled kernel.
template <class Fn>
inline void with_tile_count(int n, Fn&& fn) {
  switch (n) {
    case 4:
      return fn(std::integral_constant<int, 4>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    default:
      return fn(std::integral_constant<int, 1>{});
  }
}

struct UnpackedRow {
  const uint8_t* q;
  const float* ls;
  const float* mn;
};

struct ActRow {
  const int8_t* q;
  const float* d;
  const float* s16;
  // [n_in / 64][16]: d laid out as the AVX-512 kernel's lanes want it per 64-element step (lanes
  // 0..7 d[2s], 8..15 d[2s + 1]), filled once per call so the tile loads it instead of building
  // it for every weight-row group.
  const float* dx16;
};

struct MatmulKernels {
  // Unpacks one weight row of n_in elements (see above). Types: the quantized ones in
  // backend_supports_weight_type.
  void (*unpack)(GgmlType type, const void* row, int64_t n_in, uint8_t* q, float* ls, float* mn);
  // Quantizes one F32 activation row (n_in % 32 == 0).
  void (*quantize_act)(const float* x, int64_t n_in, int8_t* q, float* d, float* s16);
  // out[c * kTileRows + r] = dot(w[r], x[c]) for r < n_w <= kTileRows, c < n_x <= max_cols.
  void (*dot_int)(int n_w, const UnpackedRow* w, bool wide, int n_x, const ActRow* x, int64_t n_in,
                  float* out);
  int max_cols;  // activation rows per dot_int call (the register tile's other side)
  // Converts one F32/F16/BF16 weight row to F32.
  void (*to_f32)(GgmlType type, const void* row, int64_t n_in, float* out);
  // out[r] = dot(w[r], x) in float for r < n_w (n_w <= kTileRows).
  void (*dot_f32)(int n_w, const float* const* w, const float* x, int64_t n_in, float* out);

  // Attention for one task: up to kAttnMaxQ queries of one sequence sharing a KV head
  // (attn_kernels.h).
  void (*attn_task)(const AttnTask& t);

  // Optional fused path for few activation rows (null where the ISA has none): dots weight rows
  // straight from their blocks, bit-identical to unpack + dot_int (so the path choice never
  // changes a result). fused_supported says which (type, n_in) it takes; dot_fused's arguments
  // are dot_int's with n_w raw row pointers, and mn is scratch for n_w * n_in / 16 floats.
  bool (*fused_supported)(GgmlType type, int64_t n_in);
  void (*dot_fused)(GgmlType type, int n_w, const uint8_t* const* w, int n_x, const ActRow* x,
                    int64_t n_in, float* mn, float* out);

  // Optional (null: the portable loop): out[i] = act(g[i]) * (u ? u[i] : 1) over n elements,
  // act = ggml's tanh GELU when gelu, else SiLU.
  void (*glu_row)(bool gelu, const float* g, const float* u, int64_t n, float* out);
};

bool fused_supported_avx512(GgmlType type, int64_t n_in);
void dot_fused_avx512(GgmlType type, int n_w, const uint8_t* const* w, int n_x, const ActRow* x,
                      int64_t n_in, float* mn, float* out);

void act_glu_avx512(bool gelu, const float* g, const float* u, int64_t n, float* out);

const MatmulKernels& kernels_scalar();
const MatmulKernels& kernels_avx2();
const MatmulKernels& kernels_avx512();

// CHECK-fails naming t (defined in a portable file; ISA files call it instead of T9_CHECK).
[[noreturn]] void unsupported_weight_type(GgmlType t);

// True for Q8_0, IQ4_NL, IQ4_XS (signed levels; see above).
bool is_wide_type(GgmlType t);

}  // namespace t9::cpu
