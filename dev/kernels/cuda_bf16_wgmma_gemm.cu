// A bf16 prompt GEMM on wgmma in the canonical order, beside cuBLAS: the first form of next step
// 0000000000a (docs/CUDA.md). The served GEMM (cuda_bf16_matmul.cu) runs mma.sync at ~200 TFLOP/s
// where cuBLAS runs ~375; this one keeps its weight layout (B16Direct: each lane's 16 bytes of a
// 16-row tile's k16 step are its A fragment) and its order (a chain of 64 k16 steps from zero per
// 1024-input slice, the slices added in order), and moves the multiply to wgmma.m64nNk16 with A
// from registers (each warp of a warpgroup its tile's fragment, mma.sync's layout) and the
// activations from shared memory (8-row x 16-byte core matrices, no swizzle).
//
// It prints, for Qwen3-8B shapes at 512 and 2048 rows: how many outputs differ in bits from the
// mma.sync chain (a simple reference kernel of the GEMV's form), the worst error against a double
// reference over the same bf16 inputs, and µs / TFLOP/s of wgmma and of cuBLAS (bf16 in, fp32
// out, cublasGemmEx). dev/kernels/cuda_wgmma_bits.cu answers the bits question alone; this says
// what a wgmma GEMM of this simple shape (no warp specialization, no TMA, a wait per k-tile)
// reaches.
//
// Standalone: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a
//   -o cuda_bf16_wgmma_gemm dev/kernels/cuda_bf16_wgmma_gemm.cu -lcublas; run it with the
//   descriptor form cuda_wgmma_bits found right (0: leading offset along K, the default; 1: along
//   N).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_wgmma.cuh"

constexpr int kSlice = 1024;            // inputs a chain of the canonical order
constexpr int kBM = 128;                // weight rows a block: two warpgroups of 64
constexpr int kBN = 64;                 // activation rows a block (wgmma's N)
constexpr int kStages = 4;              // activation k-tiles (64 inputs) in flight
constexpr int kXTileBytes = kBN * 128;  // one k-tile of the block's rows, bf16

// ---- the weight layout (B16Direct's): tile T (16 rows), k16 step s, lane L = 4 g + t: four
// words, word j = A register j: rows g + 8 (j % 2), inputs 16 s + 2 t + 8 (j / 2) and + 1. ----

void pack_frag(const std::vector<uint16_t>& w, int n_out, int n_in, std::vector<uint32_t>& out) {
  out.assign(static_cast<size_t>(n_out) * n_in / 2, 0);
  const auto at = [&](int r, int k) {
    return static_cast<uint32_t>(w[static_cast<size_t>(r) * n_in + k]) |
           static_cast<uint32_t>(w[static_cast<size_t>(r) * n_in + k + 1]) << 16;
  };
  const int steps = n_in / 16;
  for (int T = 0; T < n_out / 16; ++T)
    for (int s = 0; s < steps; ++s)
      for (int L = 0; L < 32; ++L)
        for (int j = 0; j < 4; ++j) {
          const int g = L / 4, t = L % 4;
          out[((static_cast<size_t>(T) * steps + s) * 32 + L) * 4 + j] =
              at(16 * T + g + 8 * (j % 2), 16 * s + 2 * t + 8 * (j / 2));
        }
}

// ---- the reference: the GEMV's chain, one warp a 16 x 8 output tile ----

__global__ void chain_kernel(const uint4* wf, const __nv_bfloat16* x, int n_in, int n_tok,
                             float* y) {
  const int lane = threadIdx.x % 32, T = blockIdx.x, n0 = 8 * blockIdx.y;
  const int g = lane / 4, t = lane % 4, steps = n_in / 16;
  const int row = min(n0 + g, n_tok - 1);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int s0 = 0; s0 < steps; s0 += kSlice / 16) {
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s = s0; s < s0 + kSlice / 16; ++s) {
      const uint4 a = wf[(static_cast<int64_t>(T) * steps + s) * 32 + lane];
      const __nv_bfloat16* xr = x + static_cast<int64_t>(row) * n_in + 16 * s + 2 * t;
      const uint32_t b0 = *reinterpret_cast<const uint32_t*>(xr);
      const uint32_t b1 = *reinterpret_cast<const uint32_t*>(xr + 8);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(p[0]), "+f"(p[1]), "+f"(p[2]), "+f"(p[3])
          : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
    }
    for (int i = 0; i < 4; ++i) acc[i] = __fadd_rn(acc[i], p[i]);
  }
  const int n_out = gridDim.x * 16;
  for (int i = 0; i < 4; ++i) {
    const int o = 16 * T + g + 8 * (i / 2), r = n0 + 2 * t + i % 2;
    if (r < n_tok) y[static_cast<int64_t>(r) * n_out + o] = acc[i];
  }
}

// ---- the wgmma GEMM ----

// Pins a register's value in place across the asm statements around it: the compiler may not
// move its definition past them (a move into a wgmma's A registers sunk past wgmma.fence
// serializes the wgmmas: ptxas C7513).
__device__ __forceinline__ void pin(uint32_t& r) {
  asm volatile("" : "+r"(r)::"memory");
}
__device__ __forceinline__ void pin(float& r) {
  asm volatile("" : "+f"(r)::"memory");
}

// d (32 floats: m64n64 f32) = a (this warp's 16 x 16 fragment) x B (64 rows x 16 inputs)
// + (accumulate ? d : 0).
__device__ __forceinline__ void wgmma_64(float (&d)[32], const uint4& a, uint64_t desc,
                                         uint32_t accumulate) {
  const uint32_t r[4] = {a.x, a.y, a.z, a.w};
  wgmma_m64n64(d, r, desc, accumulate);
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src));
}

// Block (weight rows 128 bx .. + 127, activation rows 64 by .. + 63): warpgroup q takes rows
// 64 q .. + 63, warp w of it the tile 8 bx + 4 q + w. A k-tile's activations in shared memory:
// 16-byte piece h (inputs 8 h .. 8 h + 7 of the 64) of row r at (h * 64 + r) * 16, so a k16
// step's core matrices are 128 bytes apart along N (8 rows) and 1024 along K.
// desc_swap: the descriptor's two byte offsets the other way round (cuda_wgmma_bits.cu says
// which form this toolkit and card take).
__global__ void __launch_bounds__(256, 1)
    wgmma_gemm_kernel(const uint4* wf, const __nv_bfloat16* x, int n_in, int n_tok, float* y,
                      int desc_swap) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int T = kBM / 16 * blockIdx.x + warp, t0 = kBN * blockIdx.y;
  const int n_kt = n_in / 64, steps = n_in / 16;
  const uint4* wt = wf + static_cast<int64_t>(T) * steps * 32 + lane;
  // Thread tid copies pieces tid and tid + 256 of each k-tile, piece e being 16-byte piece
  // e % 8 of row e / 8 (eight threads read a row's 128 bytes together).
  const auto issue = [&](int kt) {
    if (kt < n_kt)
#pragma unroll
      for (int e = tid; e < kBN * 8; e += 256) {
        const int r = e / 8, h = e % 8;
        const __nv_bfloat16* src =
            x + static_cast<int64_t>(min(t0 + r, n_tok - 1)) * n_in + 64 * kt + 8 * h;
        cp_async16(smem + (kt % kStages) * kXTileBytes + (h * kBN + r) * 16, src);
      }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  float p[32], acc[32];  // p: the slice's chain (its first step overwrites it), acc: the sum
#pragma unroll
  for (int i = 0; i < 32; ++i) p[i] = acc[i] = 0.0f;
  // The A fragments in two register buffers used by turns (k-tile kt reads buf[kt % 2] while the
  // next one's loads land in the other): a copy from one into the other would be placed by the
  // compiler after the commit, while the wgmmas still read it, and serialize them (ptxas C7513).
  uint4 buf0[4], buf1[4];
#pragma unroll
  for (int s = 0; s < 4; ++s) buf0[s] = wt[s * 32];
  const auto step = [&](int kt, uint4(&a)[4], uint4(&next)[4]) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");  // k-tile kt - 1 read
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2) : "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    issue(kt + kStages - 1);  // into k-tile kt - 1's stage
    if (kt + 1 < n_kt)
#pragma unroll
      for (int s = 0; s < 4; ++s) next[s] = wt[(4 * (kt + 1) + s) * 32];
    // Every input of the stage's wgmmas (A registers, accumulators, descriptors, the accumulate
    // flag) defined before wgmma.fence and pinned there: an input defined between two wgmmas of a
    // stage serializes them (ptxas C7513).
    const uint8_t* st = smem + (kt % kStages) * kXTileBytes;
    const bool slice_start = kt % (kSlice / 64) == 0;  // the chain starts from zero: p = a b
    uint64_t desc[4];
    uint32_t accumulate[4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      desc[s] =
          smem_desc(st + s * 2 * kBN * 16, desc_swap ? 128 : kBN * 16, desc_swap ? kBN * 16 : 128);
      accumulate[s] = s > 0 || !slice_start;
      pin(a[s].x), pin(a[s].y), pin(a[s].z), pin(a[s].w), pin(accumulate[s]);
      asm volatile("" : "+l"(desc[s])::"memory");
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(p[i]);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_64(p, a[s], desc[s], accumulate[s]);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if ((kt + 1) % (kSlice / 64) == 0) {  // a slice ends: acc += p, in slice order
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
      for (int i = 0; i < 32; ++i) acc[i] = __fadd_rn(acc[i], p[i]);
    }
  };
  for (int kt = 0; kt < n_kt; kt += 2) {  // n_kt is even (n_in: whole slices)
    step(kt, buf0, buf1);
    step(kt + 1, buf1, buf0);
  }
  // m64n64 f32 accumulators: warp w of the warpgroup rows 16 w + g (+ 8); register 4 j + q is
  // column 8 j + 2 t + q % 2 of row g + 8 (q / 2).
  const int n_out = gridDim.x * kBM;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int o = 16 * T + g + 8 * (q / 2), r = t0 + 8 * j + 2 * t + q % 2;
      if (r < n_tok) y[static_cast<int64_t>(r) * n_out + o] = acc[4 * j + q];
    }
}

// ---- host ----

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even (finite inputs)
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void shape(cublasHandle_t h, int n_out, int n_in, int n_tok, int desc_swap, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> w(static_cast<size_t>(n_out) * n_in), x(static_cast<size_t>(n_tok) * n_in);
  for (auto& v : w) v = to_bf16(nd(rng) * 0.02f);
  for (auto& v : x) v = to_bf16(nd(rng));
  std::vector<uint32_t> wf;
  pack_frag(w, n_out, n_in, wf);
  uint4* dwf;
  uint16_t *dw, *dx;
  float *dy_ref, *dy, *dy_blas;
  const size_t y_bytes = static_cast<size_t>(n_tok) * n_out * 4;
  CK(cudaMalloc(&dwf, wf.size() * 4));
  CK(cudaMalloc(&dw, w.size() * 2));
  CK(cudaMalloc(&dx, x.size() * 2));
  CK(cudaMalloc(&dy_ref, y_bytes));
  CK(cudaMalloc(&dy, y_bytes));
  CK(cudaMalloc(&dy_blas, y_bytes));
  CK(cudaMemcpy(dwf, wf.data(), wf.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(dy, 0xff, y_bytes));  // poisoned: an output not written is a NaN
  const auto* xb = reinterpret_cast<const __nv_bfloat16*>(dx);
  chain_kernel<<<dim3(n_out / 16, (n_tok + 7) / 8), 32>>>(dwf, xb, n_in, n_tok, dy_ref);
  CK(cudaGetLastError());
  const int smem = kStages * kXTileBytes;
  CK(cudaFuncSetAttribute(wgmma_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(n_out / kBM, (n_tok + kBN - 1) / kBN);
  const float ms = time_ms(
      10, [&] { wgmma_gemm_kernel<<<grid, 256, smem>>>(dwf, xb, n_in, n_tok, dy, desc_swap); });
  CK(cudaGetLastError());
  // cuBLAS: y^T (n_out x n_tok, column-major) = W (row-major n_out x n_in, i.e. column-major
  // n_in x n_out, transposed) x X^T (column-major n_in x n_tok).
  const float one = 1.0f, zero = 0.0f;
  const float ms_blas = time_ms(10, [&] {
    if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_tok, n_in, &one, dw, CUDA_R_16BF, n_in,
                     dx, CUDA_R_16BF, n_in, &zero, dy_blas, CUDA_R_32F, n_out, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "cublasGemmEx failed\n");
      std::exit(1);
    }
  });
  CK(cudaDeviceSynchronize());
  std::vector<float> y_ref(static_cast<size_t>(n_tok) * n_out), y(y_ref.size());
  CK(cudaMemcpy(y_ref.data(), dy_ref, y_bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(y.data(), dy, y_bytes, cudaMemcpyDeviceToHost));
  int64_t differ = 0;
  for (size_t i = 0; i < y.size(); ++i) differ += std::memcmp(&y[i], &y_ref[i], 4) != 0;
  // The double reference on a sample of outputs (every 389th): |err| / sum |w x|.
  double worst = 0;
  for (size_t i = 0; i < y.size(); i += 389) {
    const int r = static_cast<int>(i / n_out), o = static_cast<int>(i % n_out);
    double ref = 0, mag = 0;
    for (int k = 0; k < n_in; ++k) {
      const double v = static_cast<double>(from_bf16(w[static_cast<size_t>(o) * n_in + k])) *
                       from_bf16(x[static_cast<size_t>(r) * n_in + k]);
      ref += v;
      mag += std::fabs(v);
    }
    worst = std::isfinite(y[i]) ? std::max(worst, std::fabs(y[i] - ref) / mag) : INFINITY;
  }
  const double flop = 2.0 * n_out * n_in * n_tok;
  std::printf(
      "%5d x %5d, %4d rows: wgmma %8.1f us %6.1f TFLOP/s | cuBLAS %8.1f us %6.1f TFLOP/s "
      "| bits != chain: %lld of %zu | worst |err|/sum|wx| %.3g\n",
      n_in, n_out, n_tok, ms * 1e3, flop / (ms * 1e-3) / 1e12, ms_blas * 1e3,
      flop / (ms_blas * 1e-3) / 1e12, static_cast<long long>(differ), y.size(), worst);
  CK(cudaFree(dwf));
  CK(cudaFree(dw));
  CK(cudaFree(dx));
  CK(cudaFree(dy_ref));
  CK(cudaFree(dy));
  CK(cudaFree(dy_blas));
}

int main(int argc, char** argv) {
  const int desc_swap = argc > 1 ? std::atoi(argv[1]) : 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, descriptor form %d\n", prop.name, desc_swap);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  std::mt19937 rng(1);
  for (int n_tok : {512, 2048}) {
    shape(h, 4096, 4096, n_tok, desc_swap, rng);   // q / o projections
    shape(h, 12288, 4096, n_tok, desc_swap, rng);  // gate or up
    shape(h, 4096, 12288, n_tok, desc_swap, rng);  // down
  }
  cublasDestroy(h);
  return 0;
}
