// Internal to the CUDA backend: the int8 mma.sync helpers shared by the tensor-core matmul
// (cuda_mma.cu) and the few-row tensor-core GEMV (cuda_gemv_mma.cu).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace t9::cuda {

// The accumulators start at the bits of 1.5 * 2^23 (kBiasBits) instead of 0: an integer sum s
// with |s| < 2^22 then reads as the float 1.5 * 2^23 + s, and one subtraction gives float(s)
// exactly (no int-to-float conversion, a quarter-rate instruction). Every sum here is below
// 32 * 128 * 128 = 2^19 in magnitude.
constexpr int kBiasBits = 0x4B400000;
constexpr float kBias = 12582912.0f;  // 1.5 * 2^23
__device__ __forceinline__ float unbias(int c) {
  return __fsub_rn(__int_as_float(c), kBias);
}

__device__ __forceinline__ void mma_k32(int (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(kBiasBits));
}
__device__ __forceinline__ void mma_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%7,%7,%7};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(kBiasBits));
}

// The 32-bit word at shared address p: 4-byte aligned (kA4), or 2-byte aligned (two aligned loads,
// bytes 2..5 of the pair).
template <bool kA4>
__device__ __forceinline__ uint32_t lds32_at(const uint8_t* p) {
  if constexpr (kA4) return *reinterpret_cast<const uint32_t*>(p);
  return __byte_perm(*reinterpret_cast<const uint32_t*>(p - 2),
                     *reinterpret_cast<const uint32_t*>(p + 2), 0x5432);
}

}  // namespace t9::cuda
