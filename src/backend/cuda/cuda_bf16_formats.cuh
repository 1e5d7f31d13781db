// The fragment-ordered formats of the bf16 tensor-core matmul (cuda_bf16_matmul.cu; layouts:
// quant/frag_layout.h): how a lane turns its bytes of one 64-input group into the A fragments of
// four m16n8k16 steps. Which bits are which code is quant/frag_decode.h (the same functions, run
// on the host by tests/unit/quant/frag_layout_test.cpp); here the scales and the bf16 arithmetic,
// each weight rounded once as q4k_bf16_weight / q6k_bf16_weight say.
//
// A format F gives the kernels:
//   kBlockBytes, kCodesAt   a 16-row x 256-input block, where its code words start;
//   kCodeChunks             a lane's 16-byte code chunks of one group (Q8_0: 2, BF16: 4); chunk
//                           c of group j and lane L at kCodesAt + 16 (32 (kCodeChunks j + c) + L);
//   kRing                   the GEMV's ring slots a warp (its shared memory: BF16's blocks are
//                           8 KB, so two slots, to hold twelve slices);
//   kGemmBlocks             GEMM blocks an SM (the launch bounds; BF16's codes take 48 KB);
//   kDirectA                the GEMM multiplies the copied codes as they are (no dequantization,
//                           no fragment buffer: B16Direct);
//   kBlockScale             the fragments are exact codes and each 32-input block's two mma go
//                           into their own accumulators, added to the chain times the row's d
//                           (Q8_0); else the scales are inside the bf16 weights;
//   kHdrChunks              the 16-byte chunks at the block's start the GEMM copies for scales;
//   kHigh                   whether a group also has high words (Q6_K, Q5_K: gemv_highs,
//                           gemm_high_at and gemm_highs say where and how);
//   kCodesInHighs           the code words come with the high words, not in chunks a group
//                           (Q3_K: kCodeChunks 0; gemv_codes, and the GEMM's kHighCopies 8-byte
//                           copies a group, gemm_high_at(grp, lane, k), gemm_codes);
//   Scales                  a lane's scales of one group;
//   build_table             the GEMV's per-super-block table of scales (kTableBytes), one warp;
//   table_scales            a lane's Scales from that table;
//   header_scales           the same values from the header chunks (the GEMM);
//   dequant                 the lane's A fragments a[step][register] of the group.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "quant/frag_decode.h"
#include "quant/frag_layout.h"

namespace t9::cuda::bf16 {

__device__ __forceinline__ __nv_bfloat162 as_bf162(uint32_t v) {
  return *reinterpret_cast<const __nv_bfloat162*>(&v);
}
__device__ __forceinline__ uint32_t as_u32(__nv_bfloat162 v) {
  return *reinterpret_cast<const uint32_t*>(&v);
}
// {bf16(v), bf16(v)}, rounded to nearest even.
__device__ __forceinline__ uint32_t splat_bf16(float v) {
  return as_u32(__floats2bfloat162_rn(v, v));
}

// A lane's words of one 64-input group: its code words (Q4_K, Q6_K: w0..w3; Q8_0: W[0..7];
// BF16: the four steps' A registers) and, for Q6_K, its two high words (H(g, j), H(g + 8, j)).
struct GroupCodes {
  uint32_t w[16];
  uint32_t h[2];
};

struct Q4K {
  static constexpr bool kCodesInHighs = false;
  static constexpr int kHighCopies = 1;
  static constexpr int kRing = 3;
  static constexpr int kGemmBlocks = 2;
  static constexpr bool kDirectA = false;
  static constexpr int kBlockBytes = kQ4KFragBlockBytes;
  static constexpr int kCodesAt = kQ4KFragCodesAt;
  static constexpr int kCodeChunks = 1;
  static constexpr bool kBlockScale = false;
  static constexpr int kHdrChunks = 16;  // the 16 rows' headers
  static constexpr bool kHigh = false;
  static constexpr int kTableBytes = 16 * 8 * 8;
  // {s, s} and {m, m} (bf16 pairs) of rows g, g + 8 ([0], [1]) x the group's low and high
  // 32-input sub-blocks (steps 0-1, 2-3).
  struct Scales {
    uint32_t s[2][2], m[2][2];
  };

  // (s, m) pairs of sub-blocks 4 half + first .. + kCount - 1 of one row from its 16-byte
  // header: the 6-bit scales and mins of four sub-blocks at once, one byte each
  // (unpack_k_scale_min within a word), then s = bf16(d sc), m = bf16(-dmin m) (both products
  // exact in fp32).
  template <int kCount>
  __device__ static void row_scales(uint4 hdr, int half, int first, uint2 (&out)[kCount]) {
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(hdr.x & 0xFFFF)));
    const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(hdr.x >> 16)));
    const uint32_t a = hdr.y, b = hdr.z, c = hdr.w;  // scale bytes 0-3, 4-7, 8-11
    const uint32_t sc =
        half == 0 ? (a & 0x3F3F3F3Fu) : ((c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u));
    const uint32_t mn =
        half == 0 ? (b & 0x3F3F3F3Fu) : (((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u));
#pragma unroll
    for (int i = 0; i < kCount; ++i) {  // 2^23 + byte, minus 2^23: the byte as a float, exactly
      const unsigned sel = 0x7540u + static_cast<unsigned>(first + i);
      const float sc_f = __uint_as_float(__byte_perm(sc, 0x4B000000u, sel)) - 8388608.0f;
      const float mn_f = __uint_as_float(__byte_perm(mn, 0x4B000000u, sel)) - 8388608.0f;
      out[i] = make_uint2(splat_bf16(d * sc_f), splat_bf16(-dmin * mn_f));
    }
  }

  // [16 rows][8 sub-blocks] of (s, m): lanes 2r and 2r + 1 take row r's sub-blocks 0-3 and 4-7.
  __device__ static void build_table(const uint8_t* blk, uint32_t* table, int lane) {
    uint2 pairs[4];
    row_scales<4>(*reinterpret_cast<const uint4*>(blk + 16 * (lane / 2)), lane % 2, 0, pairs);
    uint4* row = reinterpret_cast<uint4*>(table + 16 * (lane / 2) + 8 * (lane % 2));
    row[0] = make_uint4(pairs[0].x, pairs[0].y, pairs[1].x, pairs[1].y);
    row[1] = make_uint4(pairs[2].x, pairs[2].y, pairs[3].x, pairs[3].y);
  }
  __device__ static Scales table_scales(const uint32_t* table, int g, int /*t*/, int grp) {
    const uint4 a = *reinterpret_cast<const uint4*>(table + 16 * g + 4 * grp);
    const uint4 b = *reinterpret_cast<const uint4*>(table + 16 * (g + 8) + 4 * grp);
    return {{{a.x, a.z}, {b.x, b.z}}, {{a.y, a.w}, {b.y, b.w}}};
  }
  __device__ static Scales header_scales(const uint4* hdr, int g, int /*t*/, int grp) {
    uint2 p[2], p8[2];
    row_scales<2>(hdr[g], grp / 2, 2 * (grp % 2), p);
    row_scales<2>(hdr[g + 8], grp / 2, 2 * (grp % 2), p8);
    return {{{p[0].x, p[1].x}, {p8[0].x, p8[1].x}}, {{p[0].y, p[1].y}, {p8[0].y, p8[1].y}}};
  }
  // biased(step, slot): the register's pair as bf16 128 + q, exactly (frag_decode.h); minus 128
  // is q; then fma(q, s, m) with one rounding.
  template <class Biased>
  __device__ static void dequant_biased(const Scales& sc, uint32_t (&a)[4][4], Biased biased) {
    const __nv_bfloat162 k128 = __bfloat162bfloat162(__float2bfloat16_rn(128.0f));
#pragma unroll
    for (int step = 0; step < 4; ++step)
#pragma unroll
      for (int slot = 0; slot < 4; ++slot) {
        const int r = slot % 2, sub = step / 2;
        const __nv_bfloat162 q = __hsub2(as_bf162(biased(step, slot)), k128);
        a[step][slot] = as_u32(__hfma2(q, as_bf162(sc.s[r][sub]), as_bf162(sc.m[r][sub])));
      }
  }
  __device__ static void dequant(const GroupCodes& c, const Scales& sc, uint32_t (&a)[4][4]) {
    dequant_biased(sc, a, [&](int step, int slot) { return q4k_frag_biased(c.w, step, slot); });
  }
};

struct Q6K {
  static constexpr bool kCodesInHighs = false;
  static constexpr int kHighCopies = 1;
  static constexpr int kRing = 3;
  static constexpr int kGemmBlocks = 2;
  static constexpr bool kDirectA = false;
  static constexpr int kBlockBytes = kQ6KFragBlockBytes;
  static constexpr int kCodesAt = kQ6KFragNibblesAt;
  static constexpr int kCodeChunks = 1;
  static constexpr bool kBlockScale = false;
  static constexpr int kHdrChunks = 18;  // the 16 rows' scales, then their 16 d's (2 chunks)
  static constexpr bool kHigh = true;
  // A row of the table: 16 scales and 4 words of padding, so that the 8 rows g of one load land on
  // 8 different bank quads (20 g mod 32): its 32-bit loads do not conflict.
  static constexpr int kTableRowWords = 20;
  static constexpr int kTableBytes = 16 * kTableRowWords * 4;
  // {s, s} of rows g, g + 8 x steps 0-1, 2-3 (each a different 16-input scale: q6k_frag_scale).
  struct Scales {
    uint32_t s[2][2];
  };

  // [16 rows][16 scales (+ padding)] of bf16(d x scale): lanes 2r and 2r + 1 take row r's scales
  // 0-7, 8-15.
  __device__ static void build_table(const uint8_t* blk, uint32_t* table, int lane) {
    const int r = lane / 2, half = lane % 2;
    const float d = __half2float(
        __ushort_as_half(*reinterpret_cast<const uint16_t*>(blk + kQ6KFragDAt + 2 * r)));
    const uint2 sc = *reinterpret_cast<const uint2*>(blk + 16 * r + 8 * half);
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {  // d x scale is exact in fp32 (11 x 8 significant bits)
      const uint32_t word = k < 4 ? sc.x : sc.y;
      const int scale = static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (k % 4))));
      v[k] = splat_bf16(d * static_cast<float>(scale));
    }
    uint4* row = reinterpret_cast<uint4*>(table + kTableRowWords * r + 8 * half);
    row[0] = make_uint4(v[0], v[1], v[2], v[3]);
    row[1] = make_uint4(v[4], v[5], v[6], v[7]);
  }
  __device__ static Scales table_scales(const uint32_t* table, int g, int t, int grp) {
    Scales s;
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        s.s[r][h] = table[kTableRowWords * (g + 8 * r) + q6k_frag_scale(grp, 2 * h, t)];
    return s;
  }
  __device__ static Scales header_scales(const uint4* hdr, int g, int t, int grp) {
    const uint16_t* d = reinterpret_cast<const uint16_t*>(hdr + 16);
    Scales s;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int8_t* sc = reinterpret_cast<const int8_t*>(hdr + g + 8 * r);
      const float dr = __half2float(__ushort_as_half(d[g + 8 * r]));
#pragma unroll
      for (int h = 0; h < 2; ++h)
        s.s[r][h] = splat_bf16(dr * static_cast<float>(sc[q6k_frag_scale(grp, 2 * h, t)]));
    }
    return s;
  }
  // The lane's high words of group grp: the GEMV loads one 16-byte chunk a group pair (high
  // keeps it between groups), the GEMM copies the group's 8 bytes (at gemm_high_at).
  __device__ static void gemv_highs(const uint8_t* sb, int grp, int lane, uint4& high,
                                    uint32_t (&h)[2]) {
    if (grp % 2 == 0)
      high = *reinterpret_cast<const uint4*>(sb + kQ6KFragHighsAt + 16 * (32 * (grp / 2) + lane));
    h[0] = grp % 2 == 0 ? high.x : high.z;
    h[1] = grp % 2 == 0 ? high.y : high.w;
  }
  __device__ static int gemm_high_at(int grp, int lane) {
    return kQ6KFragHighsAt + 16 * (32 * (grp / 2) + lane) + 8 * (grp % 2);
  }
  __device__ static void gemm_highs(uint2 hw, int /*grp*/, uint32_t (&h)[2]) {
    h[0] = hw.x, h[1] = hw.y;
  }
  // biased(step, slot): the register's pair as bf16 128 + code, exactly (frag_decode.h); minus
  // `zero` (128 + the code's zero point: 160 for Q6_K, 132 for Q3_K) is the signed code, exactly;
  // then times s, one rounding of the exact product.
  template <class Biased>
  __device__ static void dequant_signed(const Scales& sc, float zero, uint32_t (&a)[4][4],
                                        Biased biased) {
    const __nv_bfloat162 k = __bfloat162bfloat162(__float2bfloat16_rn(zero));
#pragma unroll
    for (int step = 0; step < 4; ++step)
#pragma unroll
      for (int slot = 0; slot < 4; ++slot) {
        const __nv_bfloat162 q = __hsub2(as_bf162(biased(step, slot)), k);
        a[step][slot] = as_u32(__hmul2(q, as_bf162(sc.s[slot % 2][step / 2])));
      }
  }
  __device__ static void dequant(const GroupCodes& c, const Scales& sc, uint32_t (&a)[4][4]) {
    dequant_signed(sc, 160.0f, a,
                   [&](int step, int slot) { return q6k_frag_biased(c.w, c.h, step, slot); });
  }
};

// Q5_K: Q4_K's header, scales and arithmetic, the code 5 bits (the low nibbles as Q4_K's codes,
// the high bit from the lane's high words: frag_layout.h). Opt-in until a device runs it
// (CudaBackendConfig::bf16_q5_k).
struct Q5K : Q4K {
  static constexpr int kBlockBytes = kQ5KFragBlockBytes;
  static constexpr int kCodesAt = kQ5KFragCodesAt;
  static constexpr bool kHigh = true;
  // The GEMV loads the lane's four high words once a super-block; the GEMM copies the group
  // pair's two.
  __device__ static void gemv_highs(const uint8_t* sb, int grp, int lane, uint4& high,
                                    uint32_t (&h)[2]) {
    if (grp == 0) high = *reinterpret_cast<const uint4*>(sb + kQ5KFragHighsAt + 16 * lane);
    q5k_group_highs(grp < 2 ? high.x : high.z, grp < 2 ? high.y : high.w, grp, h);
  }
  __device__ static int gemm_high_at(int grp, int lane) {
    return kQ5KFragHighsAt + 16 * lane + 8 * (grp / 2);
  }
  __device__ static void gemm_highs(uint2 hw, int grp, uint32_t (&h)[2]) {
    q5k_group_highs(hw.x, hw.y, grp, h);
  }
  __device__ static void dequant(const GroupCodes& c, const Scales& sc, uint32_t (&a)[4][4]) {
    dequant_biased(sc, a,
                   [&](int step, int slot) { return q5k_frag_biased(c.w, c.h, step, slot); });
  }
};

// Q8_0: the codes are exact in bf16 and d stays out of the weights: each 32-input block's two mma
// start from zero and their sum is added to the chain as fma(d, sum, chain) (kBlockScale), so the
// weights are GGUF's own and only x is rounded. A lane's scales are its rows' d of the group's
// two blocks.
struct Q80 {
  static constexpr bool kCodesInHighs = false;
  static constexpr int kHighCopies = 1;
  static constexpr int kRing = 3;
  static constexpr int kGemmBlocks = 2;
  static constexpr bool kDirectA = false;
  static constexpr int kBlockBytes = kQ80FragBlockBytes;
  static constexpr int kCodesAt = kQ80FragCodesAt;
  static constexpr int kCodeChunks = 2;
  static constexpr bool kBlockScale = true;
  static constexpr int kHdrChunks = 16;  // the 16 rows' eight d's
  static constexpr bool kHigh = false;
  static constexpr int kTableBytes = 16 * 8 * 4;  // [16 rows][8 blocks] of d as float
  // d of rows g, g + 8 ([0], [1]) x the group's blocks (steps 0-1, 2-3).
  struct Scales {
    float d[2][2];
  };

  // Lanes 2r and 2r + 1 take row r's blocks 0-3 and 4-7.
  __device__ static void build_table(const uint8_t* blk, uint32_t* table, int lane) {
    const uint2 h = *reinterpret_cast<const uint2*>(blk + 8 * lane);  // row lane / 2's 16 bytes
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&h.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&h.y));
    *reinterpret_cast<float4*>(table + 4 * lane) = make_float4(a.x, a.y, b.x, b.y);
  }
  __device__ static Scales table_scales(const uint32_t* table, int g, int /*t*/, int grp) {
    const float2 lo = *reinterpret_cast<const float2*>(table + 8 * g + 2 * grp);
    const float2 hi = *reinterpret_cast<const float2*>(table + 8 * (g + 8) + 2 * grp);
    return {{{lo.x, lo.y}, {hi.x, hi.y}}};
  }
  __device__ static Scales header_scales(const uint4* hdr, int g, int /*t*/, int grp) {
    const float2 lo = __half22float2(reinterpret_cast<const __half2*>(hdr + g)[grp]);
    const float2 hi = __half22float2(reinterpret_cast<const __half2*>(hdr + g + 8)[grp]);
    return {{{lo.x, lo.y}, {hi.x, hi.y}}};
  }
  // Each code as a float exactly (frag_decode.h: one PRMT, one FADD), a pair to bf16 (exact: 8
  // significant bits at most).
  __device__ static void dequant(const GroupCodes& c, const Scales& /*sc*/, uint32_t (&a)[4][4]) {
#pragma unroll
    for (int step = 0; step < 4; ++step)
#pragma unroll
      for (int slot = 0; slot < 4; ++slot)
        a[step][slot] = as_u32(__floats2bfloat162_rn(q80_frag_code(c.w, step, slot, 0),
                                                     q80_frag_code(c.w, step, slot, 1)));
  }
};

// Q3_K: Q6_K's scales (one a 16-input sub-block, bf16(d x sc): sc the 6-bit signed scale of
// GGUF's packing, unpacked per super-block into the same table) and arithmetic ((128 + code) -
// 132 exact, times s, one rounding), the 3-bit code from two areas of the layout (frag_layout.h):
// a lane's low-bit words of a group pair and its high-bit words of the super-block, 12 bytes a
// group (kCodeChunks 0: no chunk a group). The GEMV loads the pair's 16 bytes of low bits on even
// groups and the 16 of high bits on group 0 (gemv_codes); the GEMM copies the group's 8 bytes of
// each (kHighCopies). On by default since run 254 (CudaBackendConfig::bf16_q3_k).
struct Q3K : Q6K {
  static constexpr int kBlockBytes = kQ3KFragBlockBytes;
  static constexpr int kCodesAt = kQ3KFragLowsAt;
  static constexpr int kCodeChunks = 0;
  static constexpr int kHdrChunks = 14;  // the 16 rows' 12 scale bytes, then their d's
  static constexpr bool kCodesInHighs = true;
  static constexpr int kHighCopies = 2;

  // Scale j (0..15) of a row from its 12 bytes (three words), minus 32: the low 4 bits in the
  // nibbles of bytes 0..7, the high 2 bits in byte 8 + j % 4 at bits 2 (j / 4) (unpack_q3_k_scale).
  __device__ static int row_scale(uint32_t w0, uint32_t w1, uint32_t w2, int j) {
    const uint32_t lo_word = j % 8 < 4 ? w0 : w1;
    const int lo = static_cast<int>((lo_word >> (8 * (j % 4) + 4 * (j / 8))) & 0xF);
    const int hi = static_cast<int>((w2 >> (8 * (j % 4) + 2 * (j / 4))) & 3);
    return (lo | hi << 4) - 32;
  }
  // [16 rows][16 scales (+ padding)] of bf16(d x sc): lanes 2r and 2r + 1 take row r's scales
  // 0-7, 8-15 (Q6_K's table).
  __device__ static void build_table(const uint8_t* blk, uint32_t* table, int lane) {
    const int r = lane / 2, half = lane % 2;
    const float d = __half2float(
        __ushort_as_half(*reinterpret_cast<const uint16_t*>(blk + kQ3KFragDAt + 2 * r)));
    const uint32_t* w = reinterpret_cast<const uint32_t*>(blk + 12 * r);
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)  // d x sc is exact in fp32 (11 x 6 significant bits)
      v[k] = splat_bf16(d * static_cast<float>(row_scale(w0, w1, w2, 8 * half + k)));
    uint4* row = reinterpret_cast<uint4*>(table + kTableRowWords * r + 8 * half);
    row[0] = make_uint4(v[0], v[1], v[2], v[3]);
    row[1] = make_uint4(v[4], v[5], v[6], v[7]);
  }
  __device__ static Scales header_scales(const uint4* hdr, int g, int t, int grp) {
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(hdr);
    Scales s;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      const uint32_t* w = reinterpret_cast<const uint32_t*>(bytes + 12 * row);
      const float dr = __half2float(
          __ushort_as_half(*reinterpret_cast<const uint16_t*>(bytes + kQ3KFragDAt + 2 * row)));
#pragma unroll
      for (int h = 0; h < 2; ++h)
        s.s[r][h] = splat_bf16(
            dr * static_cast<float>(row_scale(w[0], w[1], w[2], q6k_frag_scale(grp, 2 * h, t))));
    }
    return s;
  }
  // The GEMV: lo holds the lane's low-bit words of the group pair (loaded on even groups), hi its
  // high-bit words of the super-block (loaded on group 0); c gets the group's two of each.
  __device__ static void gemv_codes(const uint8_t* sb, int grp, int lane, uint4& lo, uint4& hi,
                                    GroupCodes& c) {
    if (grp % 2 == 0)
      lo = *reinterpret_cast<const uint4*>(sb + kQ3KFragLowsAt + 16 * (32 * (grp / 2) + lane));
    if (grp == 0) hi = *reinterpret_cast<const uint4*>(sb + kQ3KFragHighsAt + 16 * lane);
    c.w[0] = grp % 2 == 0 ? lo.x : lo.z;
    c.w[1] = grp % 2 == 0 ? lo.y : lo.w;
    q5k_group_highs(grp < 2 ? hi.x : hi.z, grp < 2 ? hi.y : hi.w, grp, c.h);
  }
  // The GEMM's two 8-byte copies of group grp: k = 0 its low-bit words, k = 1 its pair's high ones.
  __device__ static int gemm_high_at(int grp, int lane, int k) {
    return k == 0 ? kQ3KFragLowsAt + 16 * (32 * (grp / 2) + lane) + 8 * (grp % 2)
                  : kQ3KFragHighsAt + 16 * lane + 8 * (grp / 2);
  }
  // copies[0], copies[32]: the lane's two copies (the GEMM's shared rows of 32 lanes).
  __device__ static void gemm_codes(const uint2* copies, int grp, GroupCodes& c) {
    c.w[0] = copies[0].x, c.w[1] = copies[0].y;
    q5k_group_highs(copies[32].x, copies[32].y, grp, c.h);
  }
  __device__ static void dequant(const GroupCodes& c, const Scales& sc, uint32_t (&a)[4][4]) {
    dequant_signed(sc, 132.0f, a,
                   [&](int step, int slot) { return q3k_frag_biased(c.w, c.h, step, slot); });
  }
};

// BF16: the weights are bf16 already; the layout stores each lane's A registers as they are
// (frag_layout.h), so the products of bf16 weights and bf16 x are exact and only the fp32 chain
// rounds. No scales, no header.
struct B16 {
  static constexpr bool kCodesInHighs = false;
  static constexpr int kHighCopies = 1;
  static constexpr int kBlockBytes = kBf16FragBlockBytes;
  static constexpr int kCodesAt = 0;
  static constexpr int kCodeChunks = 4;
  static constexpr int kRing = 2;
  static constexpr int kGemmBlocks = 1;
  static constexpr bool kDirectA = false;
  static constexpr bool kBlockScale = false;
  static constexpr int kHdrChunks = 0;
  static constexpr bool kHigh = false;
  static constexpr int kTableBytes = 0;
  struct Scales {};

  __device__ static void build_table(const uint8_t* /*blk*/, uint32_t* /*table*/, int /*lane*/) {}
  __device__ static Scales table_scales(const uint32_t* /*table*/, int /*g*/, int /*t*/,
                                        int /*grp*/) {
    return {};
  }
  __device__ static Scales header_scales(const uint4* /*hdr*/, int /*g*/, int /*t*/, int /*grp*/) {
    return {};
  }
  __device__ static void dequant(const GroupCodes& c, const Scales& /*sc*/, uint32_t (&a)[4][4]) {
#pragma unroll
    for (int step = 0; step < 4; ++step)
#pragma unroll
      for (int slot = 0; slot < 4; ++slot) a[step][slot] = c.w[bf16_frag_word(step, slot)];
  }
};

// BF16's GEMM reading its fragments where they were copied (the default; TEMPO9_CUDA_BF16_DIRECT=0
// keeps B16's; the GEMV is B16's): no fragment buffer, four stages of codes, two blocks an SM.
struct B16Direct : B16 {
  static constexpr int kGemmBlocks = 2;
  static constexpr bool kDirectA = true;
};

}  // namespace t9::cuda::bf16
