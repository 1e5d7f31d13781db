// Internal to the CPU backend: the group-order integer matmul, used for every quantized weight
// type by CpuIsa::kAmx (the AMX-INT8 tile unit, Sapphire Rapids and later, when the OS grants the
// tile state) and CpuIsa::kAvx512Groups (the same numbers by VNNI: groups_dot_block, rows16).
// Weight rows are unpacked as for the other ISAs (matmul_kernels.h: codes q, group scales ls and
// offsets mn per 16 elements) and activation rows quantized the same way (int8 per 32 elements with
// a float scale d); what differs is how a (weight row, activation row) pair is summed. With G =
// amx_group(type) (the weight's scale granularity: 16 or 32):
//
//   acc = +0
//   for each G-element group g, in order:
//     acc = fma(float(isum_g), ls_g * d_g, acc)          isum_g = sum of q_w * q_x, exact int32
//     acc = fma(mn_g, s_g, acc)                          narrow types only; s_g = d_g * sum(q_x)
//   y = acc
//
// Tile products give isum_g exactly whatever the tile shape, and every pair runs the same float
// chain, in the 16x16 kernel (lanes = activation rows) and in the few-rows kernel (lanes = weight
// rows) alike: results are bit-identical for any batch size or thread count. They differ from the
// VNNI kernels' (which sum 4-element products in float lanes), so a process uses one or the other.
#pragma once

#include <cstdint>

#include "quant/types.h"

namespace t9::cpu {

inline constexpr int kAmxRows = 16;    // weight rows per tile
inline constexpr int kAmxCols = 16;    // activation rows per tile (many-rows kernel)
inline constexpr int kAmxFewCols = 4;  // the few-rows kernel takes 1..4 activation rows

// Elements per scale group of a quantized weight type: 16 for Q2_K, Q3_K, Q6_K, else 32.
int amx_group(GgmlType type);

// Activation rows packed as the tiles read them, for n_cols columns (16, or 1..4 for the
// few-rows kernel); columns c >= n are zero.
//   b  [n_in / G][G / 4][n_cols * 4] int8: b[g][k][4c + j] = q[c][g * G + 4k + j]
//   dv [n_in / G][n_cols] float: the scale d of the 32-block holding group g
//   sv [n_in / G][n_cols] float: dv * float(sum of the group's q)
//   xs [n_in / G][n_cols] int32: the sum of the group's q (groups_dot_block, wide weights)
struct AmxActs {
  const int8_t* b;
  const float* dv;
  const float* sv;
  const int32_t* xs;
};
void amx_pack_acts(const int8_t* const* q, const float* const* d, int n, int n_cols, int group,
                   int64_t n_in, int8_t* b, float* dv, float* sv, int32_t* xs);

// 16 unpacked weight rows (rows past the matrix end zero-filled):
//   q  [n_in / G][16][G]: group-major, so a group's tile is 16 * G contiguous bytes
//   ls, mn [16][n_in / 16] at s_stride floats (many-rows kernel)
//   ls_t, mn_t [n_in / G][16]: the same scales transposed, one per group (few-rows kernel)
struct AmxWeights {
  const uint8_t* q;
  const float* ls;
  const float* mn;
  int64_t s_stride;
  const float* ls_t;
  const float* mn_t;
};

// A 2x2 block of 16x16 outputs: w[0..1] two 16-row weight groups, x[0..1] two activation
// groups; out[((i * 2 + j) * 16 + m) * 16 + c] = y(row m of w[i], column c of x[j]).
void amx_dot_block(const AmxWeights* w, bool narrow, int group, int64_t n_in, const AmxActs* x,
                   float* out);
// amx_dot_block's numbers with AVX-512 VNNI, no tiles (CpuIsa::kAvx512Groups,
// matmul_groups_avx512.cpp): only tiles (i, j) with i < n_w, j < n_x are written. Wide weights'
// codes must be biased by +128 (stored as unsigned bytes) and x[j].xs filled.
void groups_dot_block(const AmxWeights* w, int n_w, bool narrow, int group, int64_t n_in,
                      const AmxActs* x, int n_x, float* out);
// Writes the first nr weight rows x nc activation columns of one 16x16 tile of amx_dot_block's
// output ([m][c]) transposed: dst[c * dst_stride + m].
void amx_store_transposed(const float* tile, int nr, int nc, float* dst, int64_t dst_stride);
// out[c * 16 + m] for c < n_cols (1..4).
void amx_dot_few(const AmxWeights& w, bool narrow, int group, int64_t n_in, const AmxActs& x,
                 int n_cols, float* out);

// The same numbers for 1..8 activation rows with VNNI, 16 weight rows read straight from their
// blocks (matmul_rows16_avx512.cpp): decode's path where amx_rows16_supported (the types with a
// fused decoder). xq[c]: activation row c's int8 codes; x: their packed dv, sv (b unused);
// out[c * 16 + m]. ahead: bytes the caller reads next (the next 16 rows; empty: none),
// prefetched into L2 while these rows are computed.
struct PrefetchRange {
  const uint8_t* begin = nullptr;
  int64_t n_bytes = 0;
};
bool amx_rows16_supported(GgmlType type, int64_t n_in);
void amx_rows16_dot(GgmlType type, const uint8_t* const* w, int n_cols, const int8_t* const* xq,
                    const AmxActs& x, int64_t n_in, float* out, PrefetchRange ahead);

}  // namespace t9::cpu
