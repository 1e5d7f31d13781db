// Does wgmma give mma.sync's bits? The question behind a faster prefill GEMM (docs/CUDA.md, next
// steps: "the GEMM past 200 TFLOP/s"). The bf16 GEMV and GEMM keep a row's outputs batch-invariant
// because both run one chain of mma.sync.m16n8k16 steps per 1024-input slice, from zero, in the
// same order (cuda_bf16_matmul.cu). A wgmma GEMM keeps that only if wgmma.m64nNk16 computes each
// output's k16 step with the same bits as mma.sync.m16n8k16 (the same products, the same adds in
// the same order and precision, the same rounding into the fp32 accumulator). Nothing documents
// that either way, so this measures it:
//
//   A = 64 weight rows x K bf16, B = N activation rows x K bf16 (random, with exponents spread so
//   that the adds' order shows), C = A B^T over K = 1024 inputs (one slice: 64 k16 steps), by
//     mma   4 warps, warp w rows 16 w .. 16 w + 15, n8 tiles one after another, each a chain of
//           64 mma.sync.m16n8k16 from zero (the GEMV's form);
//     wgmma one warpgroup, A from registers (each warp's 16 x 16 fragment, mma's layout), B from
//           shared memory (no swizzle, 8 x 16-byte core matrices), the accumulators chained over
//           the 64 k16 steps from zero, m64nNk16 for N = 8 and 64;
//   and counts outputs whose bits differ, their largest difference in ulps, and each form's worst
//   error against a double reference over the same bf16 inputs (|err| / sum |a b|: ~2^-20 or less
//   says the layouts are right; a wrong descriptor gives errors of order 1).
//
// The B descriptor's two byte offsets (leading: between the core matrices along K; stride:
// between those along N, as the PTX ISA's canonical K-major layout has them) are tried both
// ways round (`desc_swap`): with the layout used here only one of the two agrees with the
// reference, which settles which field is which on this toolkit.
//
// Standalone: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a
//   -o cuda_wgmma_bits dev/kernels/cuda_wgmma_bits.cu && ./cuda_wgmma_bits [seed]
// Prints one line per (N, descriptor form), "same bits: yes|no", then each instruction form's peak
// rate alone (below).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_wgmma.cuh"

constexpr int kM = 64;     // weight rows (one wgmma's m64; four mma warps' m16)
constexpr int kK = 1024;   // inputs: one slice of the canonical order, 64 k16 steps
constexpr int kMaxN = 64;  // activation rows

// The two bf16 of row r, inputs k and k + 1, of a row-major [rows, kK] matrix, as one register.
__device__ __forceinline__ uint32_t pair(const __nv_bfloat16* m, int r, int k) {
  return *reinterpret_cast<const uint32_t*>(m + static_cast<int64_t>(r) * kK + k);
}

// mma.sync's A fragment of rows r0 .. r0 + 15, inputs k0 .. k0 + 15, for lane (g, t).
__device__ __forceinline__ void a_frag(const __nv_bfloat16* a, int r0, int k0, int lane,
                                       uint32_t (&f)[4]) {
  const int g = lane / 4, t = lane % 4;
  f[0] = pair(a, r0 + g, k0 + 2 * t);
  f[1] = pair(a, r0 + g + 8, k0 + 2 * t);
  f[2] = pair(a, r0 + g, k0 + 2 * t + 8);
  f[3] = pair(a, r0 + g + 8, k0 + 2 * t + 8);
}

// ---- mma.sync: the GEMV's chain ----

__global__ void mma_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, int n, float* c) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  for (int n0 = 0; n0 < n; n0 += 8) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < kK; k0 += 16) {
      uint32_t f[4];
      a_frag(a, 16 * w, k0, lane, f);
      const uint32_t b0 = pair(b, n0 + g, k0 + 2 * t), b1 = pair(b, n0 + g, k0 + 2 * t + 8);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]), "r"(b0), "r"(b1));
    }
    const int r = 16 * w + g;
    c[r * n + n0 + 2 * t] = d[0];
    c[r * n + n0 + 2 * t + 1] = d[1];
    c[(r + 8) * n + n0 + 2 * t] = d[2];
    c[(r + 8) * n + n0 + 2 * t + 1] = d[3];
  }
}

// ---- wgmma ----

// One wgmma.m64nNk16 (A in registers, B K-major in shared memory), d += a b.
template <int N>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (N == 8)
    wgmma_m64n8(d, a, desc, 1);
  else
    wgmma_m64n64(d, a, desc, 1);
}

// B's k16 step s in shared memory: core matrix (n-group j, k-half h) of 8 rows x 16 bytes at
// s * N * 32 + j * 256 + h * 128, row i (activation row 8 j + i) at + 16 i. So along K the core
// matrices are 128 bytes apart and along N 256.
template <int N>
__global__ void wgmma_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c,
                             int desc_swap) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, g = lane / 4, t = lane % 4;
  constexpr int kStepBytes = N * 16 * 2;
  for (int e = tid; e < N * kK / 8; e += blockDim.x) {  // 16-byte pieces of B
    const int row = e / (kK / 8), k = (e % (kK / 8)) * 8;
    const int s = k / 16, h = (k % 16) / 8, j = row / 8, i = row % 8;
    *reinterpret_cast<uint4*>(smem + s * kStepBytes + j * 256 + h * 128 + i * 16) =
        *reinterpret_cast<const uint4*>(b + static_cast<int64_t>(row) * kK + k);
  }
  // The tensor cores read what ordinary stores wrote: the proxy fence, then the barrier.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  const uint32_t lead = desc_swap ? 256 : 128, stride = desc_swap ? 128 : 256;
  for (int k0 = 0; k0 < kK; k0 += 16) {
    uint32_t f[4];
    a_frag(a, 16 * w, k0, lane, f);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    wgmma<N>(d, f, smem_desc(smem + (k0 / 16) * kStepBytes, lead, stride));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  // Accumulator layout (m64nN, f32): warp w rows 16 w + g and + 8; register 4 j + q is column
  // 8 j + 2 t + q % 2 of row g + 8 (q / 2), as mma's C for each n8 tile j.
  const int r = 16 * w + g;
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) c[(r + 8 * (q / 2)) * N + 8 * j + 2 * t + q % 2] = d[4 * j + q];
}

// ---- peak rates: each instruction form alone, operands in registers / shared memory ----
//
// The bf16 GEMM (cuda_bf16_matmul.cu) runs ~200 TFLOP/s at 512 rows where cuBLAS runs ~375
// (docs/CUDA.md stage 47). Whether mma.sync itself stops near there on this card (then only
// wgmma goes further) or the GEMM's structure does (then a better mma.sync kernel would) is
// what these two loops say: no loads, only the instruction, enough independent work to cover
// its latency.

constexpr int kPeakChains = 4;  // independent accumulators a warp (mma.sync)

__global__ void peak_mma_kernel(int iters, uint32_t seed, float* out) {
  uint32_t a[4], b[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = seed * (i + 1) + threadIdx.x;  // opaque to the compiler
  b[0] = seed ^ threadIdx.x, b[1] = seed + 7u;
  float d[kPeakChains][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int c = 0; c < kPeakChains; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kPeakChains; ++c) sum += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if (sum == 1.2345f) out[0] = sum;  // keeps the loop alive
}

// One warpgroup a block, wgmma.m64n64k16 chained on one accumulator set (as a GEMM main loop
// chains its k-steps), a commit group every four, waited for once at the end.
__global__ void peak_wgmma_kernel(int iters, uint32_t seed, float* out) {
  __shared__ __align__(128) uint8_t b[64 * 16 * 2 + 4096];
  for (int i = threadIdx.x; i < static_cast<int>(sizeof(b)) / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(b)[i] = seed * i;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  uint32_t a[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = seed * (i + 1) + threadIdx.x;
  float d[32] = {};
  const uint64_t desc = smem_desc(b, 128, 256);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 4; ++k) wgmma<64>(d, a, desc);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) sum += d[i];
  if (sum == 1.2345f) out[0] = sum;
}

// TFLOP/s of `kernel` on `blocks` blocks of `threads`, `flop` per block and iteration.
template <class Kernel>
double peak(Kernel kernel, int blocks, int threads, double flop, float* scratch) {
  const int iters = 4096;
  const float ms = time_ms(1, [&] {
    kernel<<<blocks, threads>>>(iters, 3u, scratch);
    CK(cudaGetLastError());
  });
  return flop * blocks * iters / (ms * 1e-3) / 1e12;
}

// ---- host ----

float bf16_to_float(__nv_bfloat16 v) {
  uint16_t u;
  std::memcpy(&u, &v, 2);
  const uint32_t w = static_cast<uint32_t>(u) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

// Distance in ulps between two finite floats of the same sign (else a large number).
int64_t ulps(float x, float y) {
  int32_t a, b;
  std::memcpy(&a, &x, 4);
  std::memcpy(&b, &y, 4);
  if ((a < 0) != (b < 0)) return x == y ? 0 : INT32_MAX;
  return std::llabs(static_cast<int64_t>(a) - b);
}

struct Compare {
  int differ = 0;
  int64_t max_ulps = 0;
  double worst_mma = 0, worst_wg = 0;  // |err| / sum |a b| against the double reference
};

template <int N>
Compare run(const __nv_bfloat16* da, const __nv_bfloat16* db, const std::vector<float>& fa,
            const std::vector<float>& fb, int desc_swap) {
  float *dm, *dw;
  CK(cudaMalloc(&dm, kM * N * 4));
  CK(cudaMalloc(&dw, kM * N * 4));
  CK(cudaMemset(dw, 0xff, kM * N * 4));  // poisoned: an output not written is a NaN
  mma_kernel<<<1, 128>>>(da, db, N, dm);
  CK(cudaGetLastError());
  // + 4 KB: a descriptor read the wrong way round stays inside the block's shared memory.
  const int smem = N * kK * 2 + 4096;
  CK(cudaFuncSetAttribute(wgmma_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  wgmma_kernel<N><<<1, 128, smem>>>(da, db, dw, desc_swap);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> m(kM * N), w(kM * N);
  CK(cudaMemcpy(m.data(), dm, kM * N * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(w.data(), dw, kM * N * 4, cudaMemcpyDeviceToHost));
  Compare r;
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < kK; ++k) {
        const double p = static_cast<double>(fa[i * kK + k]) * fb[j * kK + k];
        ref += p;
        mag += std::fabs(p);
      }
      const float x = m[i * N + j], y = w[i * N + j];
      r.worst_mma = std::fmax(r.worst_mma, std::fabs(x - ref) / mag);
      r.worst_wg = std::isfinite(y) ? std::fmax(r.worst_wg, std::fabs(y - ref) / mag) : INFINITY;
      if (std::memcmp(&x, &y, 4) != 0) {
        ++r.differ;
        r.max_ulps = std::max(r.max_ulps, ulps(x, y));
      }
    }
  CK(cudaFree(dm));
  CK(cudaFree(dw));
  return r;
}

int main(int argc, char** argv) {
  const unsigned seed = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 1u;
  std::mt19937 rng(seed);
  // Mantissas uniform, exponents over 2^-8 .. 2^8 and both signs: sums whose order shows.
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-8, 8), sign(0, 1);
  const auto draw = [&] {
    const float v = std::ldexp(mant(rng), ex(rng));
    return __float2bfloat16_rn(sign(rng) != 0 ? -v : v);
  };
  std::vector<__nv_bfloat16> ha(kM * kK), hb(kMaxN * kK);
  for (auto& v : ha) v = draw();
  for (auto& v : hb) v = draw();
  std::vector<float> fa(ha.size()), fb(hb.size());
  for (size_t i = 0; i < ha.size(); ++i) fa[i] = bf16_to_float(ha[i]);
  for (size_t i = 0; i < hb.size(); ++i) fb[i] = bf16_to_float(hb[i]);
  __nv_bfloat16 *da, *db;
  CK(cudaMalloc(&da, ha.size() * 2));
  CK(cudaMalloc(&db, hb.size() * 2));
  CK(cudaMemcpy(da, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, seed %u, K %d (64 k16 steps from zero)\n", prop.name, seed, kK);
  bool same = true, any_right = false;
  const auto report = [&](int n, int swap, const Compare& r) {
    const bool right = r.worst_wg < 1e-5;  // the layouts agree with the reference
    std::printf(
        "N %3d, descriptor %s: wgmma vs mma: %d of %d outputs differ (max %lld ulps); "
        "worst |err|/sum|ab|: mma %.3g, wgmma %.3g%s\n",
        n, swap ? "lead 256 / stride 128" : "lead 128 / stride 256", r.differ, kM * n,
        static_cast<long long>(r.max_ulps), r.worst_mma, r.worst_wg,
        right ? "" : "  <- this descriptor form is not the layout");
    if (right) {
      any_right = true;
      same = same && r.differ == 0;
    }
  };
  for (int swap = 0; swap < 2; ++swap) {
    report(8, swap, run<8>(da, db, fa, fb, swap));
    report(64, swap, run<64>(da, db, fa, fb, swap));
  }
  std::printf("same bits: %s\n", !any_right ? "unknown (no descriptor form matched the reference)"
                                 : same     ? "yes"
                                            : "no");
  float* scratch;
  CK(cudaMalloc(&scratch, 64));
  const int sms = prop.multiProcessorCount;
  for (int per_sm : {1, 2, 4}) {
    // mma.sync: 4 warps a block, each kPeakChains m16n8k16 (4096 FLOP each) an iteration.
    const double mma = peak(peak_mma_kernel, sms * per_sm, 128, 4.0 * kPeakChains * 4096, scratch);
    // wgmma: one warpgroup a block, four m64n64k16 (131072 FLOP each) an iteration.
    const double wg = peak(peak_wgmma_kernel, sms * per_sm, 128, 4.0 * 131072, scratch);
    std::printf(
        "peak, %d blocks of 128 threads an SM: mma.sync m16n8k16 %.0f TFLOP/s, wgmma "
        "m64n64k16 %.0f TFLOP/s\n",
        per_sm, mma, wg);
  }
  CK(cudaFree(scratch));
  CK(cudaFree(da));
  CK(cudaFree(db));
  return 0;
}
