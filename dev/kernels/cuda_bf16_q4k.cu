// Prototype (sessions 43-44): Q4_K weights x bf16 activations on bf16 tensor cores, one canonical
// order shared by a GEMM (many activation rows) and a GEMV (1-8 rows), so that a row's outputs
// are the same bits whatever the batch (the property the int8 kernels of cuda_mma.cu /
// cuda_gemv_slice.cu keep, docs/CUDA.md stage 4).
//
// Why: the int8 path's canonical order costs ~4.5 float operations per output and 32 inputs
// (the per-32 activation scale and the sub-block scale and min applied to each integer sum), so
// its tensor-core GEMM tops out near ~106 TOPS on an H100 (Qwen3-8B prefill ~6k tok/s; the
// 32-way round and the agents' prompt steps are bound by it, docs/PERFORMANCE.md session 43).
// Here the scales go into the weights instead: each weight is dequantized once per block to bf16
// (w = fma(q, bf16(d*sc), -bf16(dmin*m)) in bf16x2, one rounding), and the tensor cores do the
// whole dot in fp32 accumulators. No activation quantization at all.
//
// Canonical order of one output y[t][o] (n_in a multiple of kSlice = 1024):
//   y = 0; for each slice s (1024 inputs, ascending): p = 0;
//     for each k16 step of the slice (ascending): p = mma_bf16_m16n8k16(A(o, k16), B(k16, t), p);
//       (a step's 16 inputs and their mma slots: the fragment layout below)
//     y = y + p   (fp32, round to nearest)
// An mma's output (i, j) depends only on A's row i, B's column j and C(i, j), so a GEMV whose
// warps own (16 weight rows, one slice) and sum the slices in order afterwards gives the GEMM's
// bits. This file checks that (bitwise, every output of 1 and 8 rows against the 2048-row GEMM),
// checks the GEMM against a double oracle over the same bf16 weights, and times both.
//
// Session 44: the weights are repacked at load into a fragment order (kFragBytes below: the same
// bytes, reordered), so a lane's 16-byte load is its A fragments for a 64-input group and its
// activation fragments are one 16-byte load per 32 inputs. The GEMV then streams super-blocks to
// shared memory with bulk copies and dequantizes in registers; the GEMM dequantizes into
// fragment order once per block. Switches (-D): T9_RING (GEMV ring slots, 3), T9_PERSIST
// (persistent GEMV blocks, 1), T9_BULK (bulk copies, else cp.async, 1), T9_STAGE_X_KB
// (activations staged in shared memory up to this size a block, 64).
//
// Build (one line): nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a
//   -o cuda_bf16_q4k dev/kernels/cuda_bf16_q4k.cu; run: cuda_bf16_q4k [copy_GBps]
// Measured in runs 205-209 (the first form, docs/CUDA.md stage 41) and 210-217 (this form,
// stage 42).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace {

constexpr int kQkBytes = 144;  // one Q4_K super-block: f16 d, f16 dmin, 12 scale bytes, 128 codes
constexpr int kSlice = 1024;   // inputs per slice of the canonical order

// ---- the canonical pieces, shared by both kernels ----

// Scale and min of sub-block j (0..7) from the 12 scale bytes (ggml's get_scale_min_k4).
__host__ __device__ inline void scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// ---- the fragment-ordered layout (repacked at load) ----
//
// One 16-row tile T of a Q4_K matrix and one super-block b (256 inputs) take kFragBytes = 2304
// bytes, at ((T * n_sb) + b) * kFragBytes (n_sb = n_in / 256), the same bytes as Q4_K's 16 x 144:
//   [0, 256)     the 16 rows' headers (f16 d, f16 dmin, 12 scale bytes), row r at 16 r;
//   [256, 2304)  the codes, group j (64 inputs) and lane L = 4 g + t at 256 + 16 (32 j + L): the
//                16 bytes that lane L of an mma needs for the group's four k16 steps, words
//                w0 = row g, code bytes 8t..8t+3; w1 = row g, 8t+4..8t+7; w2, w3 = row g + 8 alike,
//                each word's bytes stored as (c0, c2, c1, c3) so that (w >> 4 n) & 0x000F000F is a
//                pair of adjacent inputs, nibble n.
// The k16 steps of group j take its inputs in the order
//   step 0: 8t + {0..3} (t = 0..3), step 1: 8t + {4..7}, step 2: 32 + 8t + {0..3},
//   step 3: 32 + 8t + {4..7}
// (Q4_K's low nibbles are inputs 0..31 of the group, the high nibbles 32..63): in step 0 an mma's
// k slots 2t, 2t + 1 take inputs 8t, 8t + 1 and slots 2t + 8, 2t + 9 take 8t + 2, 8t + 3 (step 1:
// 8t + 4 .. 8t + 7 alike), so a lane's B fragments for steps 0 and 1 are one 16-byte load of its
// activation row, inputs 8t .. 8t + 7.
// The mma sums the same 16 products as in input order, in other slots; what matters for batch
// invariance is only that the GEMV and the GEMM use the same slots, which this layout fixes.
constexpr int kFragBytes = 2304;

// (s, m) of one row's sub-block `sub` as bf16x2 pairs {s, s}, {m, m}: the dequantization rule's
// two factors (d*sc and dmin*m are exact in fp32; one rounding to bf16 each).
__device__ __forceinline__ void sub_scale(uint4 hdr, int sub, __nv_bfloat162& s,
                                          __nv_bfloat162& m) {
  const uint8_t* hb = reinterpret_cast<const uint8_t*>(&hdr);
  const float d = __half2float(*reinterpret_cast<const __half*>(hb));
  const float dmin = __half2float(*reinterpret_cast<const __half*>(hb + 2));
  int sc, mn;
  scale_min(hb + 4, sub, sc, mn);
  s = __bfloat162bfloat162(__float2bfloat16_rn(d * static_cast<float>(sc)));
  m = __bfloat162bfloat162(__float2bfloat16_rn(-dmin * static_cast<float>(mn)));
}

// (a & b) | c in one LOP3 (the compiler splits two immediates into two).
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

// bf16 0x4300 is 128.0 with an ulp of 1: (0x4300 | q) is 128 + q exactly, minus 128 is q; then
// fma(q, s, m) with one rounding. q2: two nibbles at bits 0..3 and 16..19.
__device__ __forceinline__ uint32_t dq2(uint32_t q2, __nv_bfloat162 s, __nv_bfloat162 m) {
  const uint32_t biased = and_or(q2, 0x000F000Fu, 0x43004300u);
  const __nv_bfloat162 k128 = __bfloat162bfloat162(__float2bfloat16_rn(128.0f));
  __nv_bfloat162 v = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), k128);
  v = __hfma2(v, s, m);
  return *reinterpret_cast<uint32_t*>(&v);
}

// A fragments (a[step][0..3], m16n8k16 row-major A) of one lane for the four k16 steps of group
// `grp` of a super-block: codes as laid out above; hg / hg8 the headers of rows g and g + 8.
template <int kGrp>
__device__ __forceinline__ void frag_dequant(uint4 codes, uint4 hg, uint4 hg8,
                                             uint32_t (&a)[4][4]) {
  __nv_bfloat162 s[2][2], m[2][2];  // [row g, g + 8][sub-block 2 grp, 2 grp + 1]
  sub_scale(hg, 2 * kGrp, s[0][0], m[0][0]);
  sub_scale(hg, 2 * kGrp + 1, s[0][1], m[0][1]);
  sub_scale(hg8, 2 * kGrp, s[1][0], m[1][0]);
  sub_scale(hg8, 2 * kGrp + 1, s[1][1], m[1][1]);
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
  for (int step = 0; step < 4; ++step) {
    const int hi = step / 2, wg = step % 2;  // nibble half; word of row g (w0 or w1)
    const uint32_t r0 = w[wg], r8 = w[wg + 2];
    a[step][0] = dq2(r0 >> (4 * hi), s[0][hi], m[0][hi]);      // row g, slots 2t, 2t + 1
    a[step][1] = dq2(r8 >> (4 * hi), s[1][hi], m[1][hi]);      // row g + 8
    a[step][2] = dq2(r0 >> (8 + 4 * hi), s[0][hi], m[0][hi]);  // row g, slots 2t + 8, 2t + 9
    a[step][3] = dq2(r8 >> (8 + 4 * hi), s[1][hi], m[1][hi]);
  }
}
__device__ __forceinline__ void frag_dequant(int grp, uint4 codes, uint4 hg, uint4 hg8,
                                             uint32_t (&a)[4][4]) {
  switch (grp) {
    case 0:
      frag_dequant<0>(codes, hg, hg8, a);
      break;
    case 1:
      frag_dequant<1>(codes, hg, hg8, a);
      break;
    case 2:
      frag_dequant<2>(codes, hg, hg8, a);
      break;
    default:
      frag_dequant<3>(codes, hg, hg8, a);
      break;
  }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n");
}
template <int kPending>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
// Bulk copies (sm_90: the copy engine moves a byte range, completing on an mbarrier).
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra W;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// ---- GEMM: a block owns 128 weight rows (8 tiles) x 64 activation rows, 8 warps of 32 x 32 ----
// Per 64-input k-tile kt (one Q4_K group; one barrier): wait for tile kt + 1's copies, barrier,
// issue tile kt + 3's, dequantize tile kt + 1 into fragment order (thread = tile tid / 32, lane
// tid % 32: its own A fragments, from headers other threads copied, hence after the barrier),
// multiply tile kt (dequantized in the previous iteration). Activation rows are read with one
// 16-byte load a lane and n8 tile per k32 (inputs 8t .. 8t + 7, the layout's slot order).
constexpr int kBM = 128, kBN = 64, kGemmThreads = 256, kRawStages = 3, kXStages = 4;
constexpr int kXStride = 96;  // bf16 a shared row: 192 bytes, rows g and g + 1 on disjoint banks
struct GemmSmem {
  uint4 codes[kRawStages][kBM / 16][32];
  uint4 hdr[kRawStages][kBM / 16][16];
  __nv_bfloat16 x[kXStages][kBN][kXStride];
  uint4 a[2][kBM / 16][4][32];  // dequantized fragments: tile, k16 step, lane
};

// w: the fragment-ordered matrix; x: n_tok rows of n_in bf16; y: n_tok rows of n_out floats.
// n_out a multiple of 128, n_in of 1024 (the prototype's shapes).
__global__ void __launch_bounds__(kGemmThreads, 2)
    gemm_kernel(const uint8_t* __restrict__ w, const __nv_bfloat16* __restrict__ x,
                float* __restrict__ y, int n_in, int n_out, int n_tok) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  GemmSmem& sm = *reinterpret_cast<GemmSmem*>(smem_raw);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, tq = lane % 4;
  const int wm = warp / 2, wn = warp % 2;  // 4 x 2 warps
  const int o0 = blockIdx.x * kBM, t0 = blockIdx.y * kBN;
  const int n_sb = n_in / 256, n_tiles = n_in / 64;
  const uint8_t* w_codes = w + static_cast<int64_t>(o0 / 16 + warp) * n_sb * kFragBytes + 256;
  const uint8_t* w_hdr = w + static_cast<int64_t>(o0 / 16 + (tid % kBM) / 16) * n_sb * kFragBytes;
  const int cx_row = tid / 4;
  const bool x_ok = t0 + cx_row < n_tok;
  const __nv_bfloat16* x_row = x + static_cast<int64_t>(min(t0 + cx_row, n_tok - 1)) * n_in;
  auto issue = [&](int kt) {
    if (kt >= n_tiles) return;
    const int st = kt % kRawStages, sb = kt / 4, grp = kt % 4;
    cp16(&sm.codes[st][warp][lane],
         w_codes + static_cast<int64_t>(sb) * kFragBytes + 16 * (32 * grp + lane));
    if (tid < kBM)
      cp16(&sm.hdr[st][tid / 16][tid % 16],
           w_hdr + static_cast<int64_t>(sb) * kFragBytes + 16 * (tid % 16));
    if (x_ok) {
      const int xs = kt % kXStages, part = tid % 4;
      cp16(&sm.x[xs][cx_row][16 * part], x_row + kt * 64 + 16 * part);
      cp16(&sm.x[xs][cx_row][16 * part + 8], x_row + kt * 64 + 16 * part + 8);
    }
  };
  auto dequant = [&](int kt) {
    if (kt >= n_tiles) return;
    const int st = kt % kRawStages;
    uint32_t a[4][4];
    frag_dequant(kt % 4, sm.codes[st][warp][lane], sm.hdr[st][warp][g], sm.hdr[st][warp][g + 8], a);
#pragma unroll
    for (int step = 0; step < 4; ++step)
      sm.a[kt % 2][warp][step][lane] = make_uint4(a[step][0], a[step][1], a[step][2], a[step][3]);
  };
  if (!x_ok)  // rows past n_tok: zeros once (their outputs are not stored)
    for (int b = 0; b < kXStages; ++b)
      for (int k = 16 * (tid % 4); k < 16 * (tid % 4) + 16; ++k)
        sm.x[b][cx_row][k] = __float2bfloat16_rn(0.0f);
  float p[2][4][4], acc[2][4][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) p[mt][nt][i] = 0.0f, acc[mt][nt][i] = 0.0f;
  issue(0);
  cp_commit();
  issue(1);
  cp_commit();
  issue(2);
  cp_commit();
  cp_wait<2>();
  __syncthreads();
  dequant(0);
  for (int kt = 0; kt < n_tiles; ++kt) {
    cp_wait<1>();     // tile kt + 1's copies (this thread's)
    __syncthreads();  // ... everyone's; tile kt's fragments; iteration kt - 1 done by all
    issue(kt + 3);
    cp_commit();
    dequant(kt + 1);
    const int xs = kt % kXStages, ab = kt % 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the group's low then high sub-block
      uint4 b[4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        b[nt] = *reinterpret_cast<const uint4*>(&sm.x[xs][wn * 32 + 8 * nt + g][32 * h + 8 * tq]);
#pragma unroll
      for (int s2 = 0; s2 < 2; ++s2) {
        const int step = 2 * h + s2;
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const uint4 v = sm.a[ab][2 * wm + mt][step][lane];
          a[mt][0] = v.x, a[mt][1] = v.y, a[mt][2] = v.z, a[mt][3] = v.w;
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
            mma_bf16(p[mt][nt], a[mt], s2 == 0 ? b[nt].x : b[nt].z, s2 == 0 ? b[nt].y : b[nt].w);
      }
    }
    if ((kt + 1) % (kSlice / 64) == 0) {  // a slice ends: y += p
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[mt][nt][i] = __fadd_rn(acc[mt][nt][i], p[mt][nt][i]), p[mt][nt][i] = 0.0f;
    }
  }
  // Accumulator i of (mt, nt): weight row wm*32 + 16mt + g + 8(i/2), activation row wn*32 + 8nt +
  // 2tq + i%2.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int o = o0 + wm * 32 + 16 * mt + g + 8 * (i / 2);
        const int t = t0 + wn * 32 + 8 * nt + 2 * tq + i % 2;
        if (o < n_out && t < n_tok) y[static_cast<int64_t>(t) * n_out + o] = acc[mt][nt][i];
      }
}

// ---- GEMV: 1..8 activation rows; a block owns one 16-row tile, warp s the slice s ----
// A warp copies its slice's 9216 weight bytes (contiguous in the layout) and its activation
// rows to shared memory with cp.async (two commit groups: super-blocks 0-1 with the
// activations, then 2-3), so the bytes in flight hold no registers. Per super-block, lanes 2r
// and 2r + 1 turn row r's header into (s, m) pairs of sub-blocks 0-3 and 4-7 (a per-warp table),
// instead of every lane computing the four pairs of each group; each group then takes one
// 16-byte fragment load, two table loads and two activation loads, and four mma.
#ifndef T9_STAGE_X_KB
#define T9_STAGE_X_KB 64
#endif
constexpr int kMaxSlices = 16;  // n_in up to 16384: one warp a slice
constexpr int kSbPerSlice = kSlice / 256;
constexpr int kXRowU4 = kSlice / 8 + 4;  // uint4 a staged activation row (+64 bytes: rows g, g + 1
                                         // of one LDS.128 phase on disjoint banks)

// The (s, m) pairs {s, s}, {m, m} of sub-blocks 4 half .. 4 half + 3 of one row: the 6-bit scales
// and mins of four sub-blocks at once, one byte each (get_scale_min_k4 within a word).
__device__ __forceinline__ void row_scales4(uint4 hdr, int half, uint2 (&out)[4]) {
  const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(hdr.x & 0xFFFF)));
  const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(hdr.x >> 16)));
  const uint32_t a = hdr.y, b = hdr.z, c = hdr.w;  // scale bytes 0-3, 4-7, 8-11
  const uint32_t sc =
      half == 0 ? (a & 0x3F3F3F3Fu) : ((c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u));
  const uint32_t mn =
      half == 0 ? (b & 0x3F3F3F3Fu) : (((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u));
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // 2^23 + byte, minus 2^23: the byte as a float, exactly
    const float sc_f = __uint_as_float(__byte_perm(sc, 0x4B000000u, 0x7540 + i)) - 8388608.0f;
    const float mn_f = __uint_as_float(__byte_perm(mn, 0x4B000000u, 0x7540 + i)) - 8388608.0f;
    const __nv_bfloat162 s2 = __floats2bfloat162_rn(d * sc_f, d * sc_f);
    const __nv_bfloat162 m2 = __floats2bfloat162_rn(-dmin * mn_f, -dmin * mn_f);
    out[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&s2),
                        *reinterpret_cast<const uint32_t*>(&m2));
  }
}

// frag_dequant's arithmetic with the four (s, m) pairs given: sg = {s, m of sub 2 grp, s, m of
// sub 2 grp + 1} of row g, sg8 of row g + 8.
__device__ __forceinline__ void frag_dequant_scaled(uint4 codes, uint4 sg, uint4 sg8,
                                                    uint32_t (&a)[4][4]) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  const uint32_t sv[2][2] = {{sg.x, sg.z}, {sg8.x, sg8.z}},
                 mv[2][2] = {{sg.y, sg.w}, {sg8.y, sg8.w}};
#pragma unroll
  for (int step = 0; step < 4; ++step) {
    const int hi = step / 2, wg = step % 2;
    const uint32_t r0 = w[wg], r8 = w[wg + 2];
    const __nv_bfloat162 s0 = *reinterpret_cast<const __nv_bfloat162*>(&sv[0][hi]),
                         m0 = *reinterpret_cast<const __nv_bfloat162*>(&mv[0][hi]),
                         s8 = *reinterpret_cast<const __nv_bfloat162*>(&sv[1][hi]),
                         m8 = *reinterpret_cast<const __nv_bfloat162*>(&mv[1][hi]);
    a[step][0] = dq2(r0 >> (4 * hi), s0, m0);
    a[step][1] = dq2(r8 >> (4 * hi), s8, m8);
    a[step][2] = dq2(r0 >> (8 + 4 * hi), s0, m0);
    a[step][3] = dq2(r8 >> (8 + 4 * hi), s8, m8);
  }
}

// kStageX: activation rows staged in shared memory once a block (n_tok x n_in x 2 bytes: small
// n_tok x n_in only); otherwise read through L1.
//
// Persistent blocks: block b takes tiles b, b + gridDim.x, ...; its warp s streams super-blocks
// 4s .. 4s + 3 of each of those tiles through a ring of kRing shared-memory slots, copying
// kRing - 1 super-blocks ahead (one commit group each), so a warp's copies stay in flight while
// it multiplies and while the block sums a tile's slices.
#ifndef T9_RING
#define T9_RING 3
#endif
#ifndef T9_PERSIST
#define T9_PERSIST 1
#endif
#ifndef T9_BULK
#define T9_BULK 1
#endif
constexpr int kRing = T9_RING;
__host__ __device__ constexpr int gemv_smem_bytes(int n_slices, int n_tok_staged) {
  return n_slices * (kRing * kFragBytes + 16 * 8 * 8 + 16 * 8 * 4) +
         n_slices * n_tok_staged * kXRowU4 * 16 + n_slices * kRing * 8;
}

template <bool kStageX>
__global__ void __launch_bounds__(32 * kMaxSlices)
    gemv_kernel(const uint8_t* __restrict__ w, const __nv_bfloat16* __restrict__ x,
                float* __restrict__ y, int n_in, int n_out, int n_tok) {
  extern __shared__ __align__(16) uint8_t gemv_smem[];
  const int lane = threadIdx.x % 32, s = threadIdx.x / 32;  // warp s: slice s
  const int g = lane / 4, tq = lane % 4;
  const int n_sb = n_in / 256, n_slices = n_in / kSlice, n_tiles = n_out / 16;
  uint8_t* ring = gemv_smem + s * kRing * kFragBytes;
  uint2* table = reinterpret_cast<uint2*>(gemv_smem + n_slices * kRing * kFragBytes) + s * 16 * 8;
  float* part = reinterpret_cast<float*>(gemv_smem + n_slices * (kRing * kFragBytes + 1024));
  uint4* xsm = reinterpret_cast<uint4*>(gemv_smem + n_slices * (kRing * kFragBytes + 1024 + 512));
  uint64_t* bars = reinterpret_cast<uint64_t*>(xsm + n_slices * (kStageX ? n_tok : 0) * kXRowU4) +
                   s * kRing;  // T9_BULK: this warp's mbarrier a slot
#if T9_BULK
  if (lane == 0)
    for (int r = 0; r < kRing; ++r) mbar_init(&bars[r]);
  __syncwarp();
#endif
  // Stream position i: super-block (i % 4) of this warp's slice of the block's (i / 4)-th tile.
  const int my_tiles = (n_tiles - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  const int n_pos = 4 * my_tiles;
  // T9_BULK: lane 0 issues one bulk copy a position on the slot's mbarrier (the first also
  // carries the staged activation rows); else every lane its 16-byte cp.async granules.
  auto issue = [&](int i) {
    if (i < n_pos) {
      const int tile = blockIdx.x + (i / 4) * gridDim.x;
      const uint8_t* src =
          w + (static_cast<int64_t>(tile) * n_sb + s * kSbPerSlice + i % 4) * kFragBytes;
      uint8_t* dst = ring + (i % kRing) * kFragBytes;
#if T9_BULK
      if (lane == 0) {
        const bool with_x = kStageX && i == 0;
        // The slot was read through the generic proxy (the previous round): order those reads
        // before the copy engine's writes.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        mbar_expect(&bars[i % kRing], kFragBytes + (with_x ? n_tok * kSlice * 2 : 0));
        bulk_copy(dst, src, kFragBytes, &bars[i % kRing]);
        if (with_x)
          for (int r = 0; r < n_tok; ++r)
            bulk_copy(&xsm[(s * n_tok + r) * kXRowU4],
                      x + static_cast<int64_t>(r) * n_in + s * kSlice, kSlice * 2, &bars[0]);
      }
#else
      for (int u = lane; u < kFragBytes / 16; u += 32) cp16(dst + 16 * u, src + 16 * u);
#endif
    }
#if !T9_BULK
    cp_commit();
#endif
  };
#if !T9_BULK
  if (kStageX)  // every warp stages its own slice of the rows, inside the first commit group
    for (int r = 0; r < n_tok; ++r)
#pragma unroll
      for (int u = 0; u < kSlice / 8 / 32; ++u)
        cp16(&xsm[(s * n_tok + r) * kXRowU4 + lane + 32 * u],
             x + static_cast<int64_t>(r) * n_in + s * kSlice + 8 * (lane + 32 * u));
#endif
#pragma unroll
  for (int i = 0; i < kRing - 1; ++i) issue(i);
  // Lane g feeds activation row g, the mma's column g, which only reaches output column g: rows
  // past n_tok read row n_tok - 1 instead of zeros (their columns are never stored), so the
  // loads below need no branch.
  const int x_row = min(g, n_tok - 1);
  const uint4* x_lane =
      kStageX
          ? xsm + (s * n_tok + x_row) * kXRowU4 + tq  // + (input in slice) / 8
          : reinterpret_cast<const uint4*>(x + static_cast<int64_t>(x_row) * n_in + s * kSlice) +
                tq;
  float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < n_pos; ++i) {
    issue(i + kRing - 1);
#if T9_BULK
    mbar_wait(&bars[i % kRing], (i / kRing) & 1);  // position i landed
#else
    cp_wait<kRing - 1>();  // position i landed (this lane's copies)
    __syncwarp();          // ... every lane's
#endif
    const int q = i % 4;
    const uint8_t* sb = ring + (i % kRing) * kFragBytes;
    uint2 pairs[4];
    row_scales4(*reinterpret_cast<const uint4*>(sb + 16 * (lane / 2)), lane % 2, pairs);
    uint4* trow = reinterpret_cast<uint4*>(table + 8 * (lane / 2) + 4 * (lane % 2));
    trow[0] = make_uint4(pairs[0].x, pairs[0].y, pairs[1].x, pairs[1].y);
    trow[1] = make_uint4(pairs[2].x, pairs[2].y, pairs[3].x, pairs[3].y);
    __syncwarp();
#pragma unroll
    for (int grp = 0; grp < 4; ++grp) {
      const int k0 = q * 256 + 64 * grp;  // input within the slice
      const uint4 codes = *reinterpret_cast<const uint4*>(sb + 256 + 16 * (32 * grp + lane));
      const uint4 sg = *reinterpret_cast<const uint4*>(table + 8 * g + 2 * grp);
      const uint4 sg8 = *reinterpret_cast<const uint4*>(table + 8 * (g + 8) + 2 * grp);
      const uint4 xl = kStageX ? x_lane[k0 / 8] : __ldg(x_lane + k0 / 8);
      const uint4 xh = kStageX ? x_lane[(k0 + 32) / 8] : __ldg(x_lane + (k0 + 32) / 8);
      uint32_t a[4][4];
      frag_dequant_scaled(codes, sg, sg8, a);
      mma_bf16(p, a[0], xl.x, xl.y);
      mma_bf16(p, a[1], xl.z, xl.w);
      mma_bf16(p, a[2], xh.x, xh.y);
      mma_bf16(p, a[3], xh.z, xh.w);
    }
    __syncwarp();  // the slot and the table are read before they are overwritten
    if (q ==
        3) {  // the tile's slice is done: p[i] is weight row g + 8(i/2), activation row 2tq + i%2
#pragma unroll
      for (int e = 0; e < 4; ++e) part[(s * 16 + g + 8 * (e / 2)) * 8 + 2 * tq + e % 2] = p[e];
      p[0] = p[1] = p[2] = p[3] = 0.0f;
      __syncthreads();
      const int o0 = (blockIdx.x + (i / 4) * gridDim.x) * 16;
      for (int e = threadIdx.x; e < 16 * n_tok; e += blockDim.x) {  // output o of row t
        const int t = e / 16, o = e % 16;
        float acc = 0.0f;
        for (int sl = 0; sl < n_slices; ++sl) acc = __fadd_rn(acc, part[(sl * 16 + o) * 8 + t]);
        y[static_cast<int64_t>(t) * n_out + o0 + o] = acc;
      }
      __syncthreads();  // part is read before the next tile writes it
    }
  }
}

// ---- host ----

uint16_t f2bf_rne(float f) {  // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float bf2f(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float h2f(uint16_t h) {
  return __half2float(*reinterpret_cast<const __half*>(&h));
}

// The oracle's weight: the kernel's rule in exact arithmetic, rounded to bf16 once.
float weight_bf16(const uint8_t* row, int k) {
  const uint8_t* sb = row + (k / 256) * kQkBytes;
  const int e = k % 256, grp = e / 64, i = e % 64, j = 2 * grp + (i >= 32);
  uint16_t dh, mh;
  std::memcpy(&dh, sb, 2);
  std::memcpy(&mh, sb + 2, 2);
  int sc, m;
  scale_min(sb + 4, j, sc, m);
  const double s = bf2f(f2bf_rne(h2f(dh) * static_cast<float>(sc)));
  const double mn = bf2f(f2bf_rne(-h2f(mh) * static_cast<float>(m)));
  const uint8_t byte = sb[16 + 32 * grp + (i % 32)];
  const int q = i < 32 ? (byte & 15) : (byte >> 4);
  return bf2f(f2bf_rne(static_cast<float>(q * s + mn)));  // q*s + mn is exact in double
}

// The fragment-ordered layout of a Q4_K matrix (n_out a multiple of 16; see kFragBytes).
std::vector<uint8_t> repack_frag(const std::vector<uint8_t>& q4k, int n_in, int n_out) {
  const int n_sb = n_in / 256;
  const int64_t row_bytes = static_cast<int64_t>(n_sb) * kQkBytes;
  std::vector<uint8_t> out(q4k.size());
  for (int tile = 0; tile < n_out / 16; ++tile)
    for (int b = 0; b < n_sb; ++b) {
      uint8_t* dst = out.data() + (static_cast<int64_t>(tile) * n_sb + b) * kFragBytes;
      auto sb = [&](int r) { return q4k.data() + (16ll * tile + r) * row_bytes + b * kQkBytes; };
      for (int r = 0; r < 16; ++r) std::memcpy(dst + 16 * r, sb(r), 16);
      for (int grp = 0; grp < 4; ++grp)
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          uint8_t* f = dst + 256 + 16 * (32 * grp + lane);
          for (int wi = 0; wi < 4; ++wi) {  // w0, w1: row g; w2, w3: row g + 8
            const uint8_t* c = sb(g + 8 * (wi / 2)) + 16 + 32 * grp + 8 * t + 4 * (wi % 2);
            const uint8_t word[4] = {c[0], c[2], c[1], c[3]};
            std::memcpy(f + 4 * wi, word, 4);
          }
        }
    }
  return out;
}

double time_us(const std::function<void(int)>& call, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  call(0);
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(a));
  for (int r = 0; r < reps; ++r) call(r);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  return 1000.0 * ms / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const double copy_gbps = argc > 1 ? std::atof(argv[1]) : 3000.0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, copy ceiling given %.0f GB/s\n", prop.name, copy_gbps);
  CK(cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(sizeof(GemmSmem))));
  CK(cudaFuncSetAttribute(gemv_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          200 * 1024));
  CK(cudaFuncSetAttribute(gemv_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          200 * 1024));
  std::mt19937 rng(43);
  bool all_ok = true;
  struct Shape {
    int n_in, n_out;
  };
  for (const Shape sh : {Shape{4096, 24576}, Shape{4096, 4096}, Shape{12288, 4096}}) {
    const int n_in = sh.n_in, n_out = sh.n_out, max_tok = 2048;
    const int64_t row_bytes = n_in / 256 * kQkBytes, w_bytes = row_bytes * n_out;
    // Enough copies of the weights that consecutive calls miss the 50 MB L2.
    const int copies = static_cast<int>(std::max<int64_t>(1, (200ll << 20) / w_bytes));
    std::vector<uint8_t> hw(w_bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    for (int64_t o = 0; o < n_out; ++o)
      for (int b = 0; b < n_in / 256; ++b) {
        uint8_t* sb = hw.data() + o * row_bytes + b * kQkBytes;
        const __half d = __float2half(scale(rng)), dm = __float2half(scale(rng));
        std::memcpy(sb, &d, 2);
        std::memcpy(sb + 2, &dm, 2);
        for (int k = 4; k < kQkBytes; ++k) sb[k] = static_cast<uint8_t>(byte(rng));
      }
    std::vector<uint16_t> hx(static_cast<int64_t>(max_tok) * n_in);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : hx) v = f2bf_rne(nd(rng));
    uint8_t* dw;
    __nv_bfloat16* dx;
    float *dy_gemm, *dy_gemv;
    CK(cudaMalloc(&dw, w_bytes * copies));
    const std::vector<uint8_t> hf = repack_frag(hw, n_in, n_out);
    for (int c = 0; c < copies; ++c)
      CK(cudaMemcpy(dw + c * w_bytes, hf.data(), w_bytes, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dx, hx.size() * 2));
    CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dy_gemm, static_cast<int64_t>(max_tok) * n_out * 4));
    CK(cudaMalloc(&dy_gemv, static_cast<int64_t>(8) * n_out * 4));
    auto gemm = [&](int c, int n_tok) {
      const dim3 grid((n_out + kBM - 1) / kBM, (n_tok + kBN - 1) / kBN);
      gemm_kernel<<<grid, kGemmThreads, sizeof(GemmSmem)>>>(dw + (c % copies) * w_bytes, dx,
                                                            dy_gemm, n_in, n_out, n_tok);
    };
    auto gemv = [&](int c, int n_tok) {
      // Activations staged while they take at most T9_STAGE_X_KB of a block.
      const bool stage = static_cast<int64_t>(n_tok) * n_in * 2 <= T9_STAGE_X_KB * 1024;
      const int n_slices = n_in / kSlice;
      const size_t bytes = gemv_smem_bytes(n_slices, stage ? n_tok : 0);
      const dim3 block(32 * n_slices);
      int per_sm = 0;
      if (stage)
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_kernel<true>, block.x,
                                                         bytes));
      else
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_kernel<false>, block.x,
                                                         bytes));
      // T9_PERSIST=0: a block a tile (kRing = 4 then holds a warp's whole slice in flight).
      const dim3 grid(T9_PERSIST ? std::min(n_out / 16, per_sm * prop.multiProcessorCount)
                                 : n_out / 16);
      if (stage)
        gemv_kernel<true>
            <<<grid, block, bytes>>>(dw + (c % copies) * w_bytes, dx, dy_gemv, n_in, n_out, n_tok);
      else
        gemv_kernel<false>
            <<<grid, block, bytes>>>(dw + (c % copies) * w_bytes, dx, dy_gemv, n_in, n_out, n_tok);
    };
    // Bitwise: the GEMM's rows 0..7 at 2048 rows against the GEMV at 1 and at 8 rows.
    CK(cudaMemset(dy_gemm, 0xFF, static_cast<int64_t>(max_tok) * n_out * 4));  // poison (NaN)
    gemm(0, max_tok);
    CK(cudaGetLastError());
    std::vector<float> yg(static_cast<int64_t>(max_tok) * n_out),
        yv(8 * static_cast<int64_t>(n_out));
    CK(cudaMemcpy(yg.data(), dy_gemm, yg.size() * 4, cudaMemcpyDeviceToHost));
    for (int nt : {1, 8}) {
      CK(cudaMemset(dy_gemv, 0xFF, 8ll * n_out * 4));
      gemv(0, nt);
      CK(cudaGetLastError());
      CK(cudaMemcpy(yv.data(), dy_gemv, 8ll * n_out * 4, cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(yv.data(), yg.data(), static_cast<size_t>(nt) * n_out * 4) == 0;
      std::printf("%d -> %d: GEMV at %d row(s) %s the 2048-row GEMM's rows bit for bit\n", n_in,
                  n_out, nt, same ? "equals" : "DIFFERS FROM");
      all_ok &= same;
    }
    // Oracle: 64 outputs of 4 rows (0, 1, 1000, 2047) in double over the bf16 weights. Bound:
    // ~n_in/16 + n_in/1024 fp32 accumulations, each within 2^-23 of the running sum (the tensor
    // cores' internal alignment may drop a few more bits): 2^-12 of sum |w x| leaves that margin.
    double worst = 0.0;
    for (int t : {0, 1, 1000, 2047})
      for (int oi = 0; oi < 64; ++oi) {
        const int o = static_cast<int>((static_cast<int64_t>(oi) * 7919) % n_out);
        double ref = 0.0, mag = 0.0;
        for (int k = 0; k < n_in; ++k) {
          const double wx = static_cast<double>(weight_bf16(hw.data() + o * row_bytes, k)) *
                            bf2f(hx[static_cast<int64_t>(t) * n_in + k]);
          ref += wx, mag += std::fabs(wx);
        }
        worst = std::max(worst, std::fabs(yg[static_cast<int64_t>(t) * n_out + o] - ref) / mag);
      }
    const bool close = worst < std::ldexp(1.0, -12);
    std::printf("%d -> %d: GEMM vs double oracle, worst |err| / sum|w x| = %.3g (%s 2^-12)\n", n_in,
                n_out, worst, close ? "within" : "OVER");
    all_ok &= close;
    // Timing.
    for (int nt : {1, 8}) {
      const double us = time_us([&](int r) { gemv(r, nt); }, 200);
      std::printf("  GEMV %4d rows: %8.2f us  %7.1f GB/s  %5.1f%% of copy\n", nt, us,
                  w_bytes / us / 1e3, 100.0 * w_bytes / us / 1e3 / copy_gbps);
    }
    for (int nt : {32, 64, 128, 512, 2048}) {
      const double us = time_us([&](int r) { gemm(r, nt); }, nt >= 512 ? 20 : 100);
      std::printf("  GEMM %4d rows: %8.2f us  %7.1f TFLOP/s  %7.1f GB/s\n", nt, us,
                  2.0 * n_in * n_out * nt / us / 1e6, w_bytes / us / 1e3);
    }
    CK(cudaFree(dw));
    CK(cudaFree(dx));
    CK(cudaFree(dy_gemm));
    CK(cudaFree(dy_gemv));
  }
  std::printf("%s\n", all_ok ? "OK" : "FAILED");
  return all_ok ? 0 : 1;
}
