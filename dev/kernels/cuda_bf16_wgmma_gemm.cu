// A bf16 prompt GEMM on wgmma in the canonical order, beside cuBLAS: the form of next step
// 0000000000a (docs/CUDA.md) meant to pass 400 TFLOP/s. The served GEMM (cuda_bf16_matmul.cu) runs
// mma.sync at ~200 TFLOP/s where cuBLAS runs 560-800 on an H100; this one keeps its weight layout
// (B16Direct: each lane's 16 bytes of a 16-row tile's k16 step are its A fragment) and its order (a
// chain of 64 k16 steps from zero per 1024-input slice, the slices added in order with __fadd_rn),
// and moves the multiply to wgmma.m64n128k16 with A from registers (mma.sync's fragment layout,
// which cuda_wgmma_bits.cu proved gives mma.sync's bits).
//
// Design (the first form, 148-170 TFLOP/s, loaded the weights from global memory straight into
// registers, waited for its wgmmas to drain and ran __syncthreads every 64-input k-tile):
//   block       128 weight rows x 128 activation rows (a cluster of two blocks along the
//               activation rows, which share their weights), 3 warpgroups: two consumers (64
//               weight rows x 128 activation rows each: 64 chain floats `p` and 64 running sums
//               `acc` a thread, up to 232 registers by setmaxnreg) and one producer warpgroup
//               (40 registers) of which one thread issues every copy;
//   ring        kStages stages of one 64-input k-tile each: the activations (128 rows x 128 bytes,
//               one 2-D TMA copy with the 128-byte swizzle, rows past n_tok filled with zeros) and
//               the weights (8 tiles x 2 KB, each contiguous in B16Direct: 1-D bulk copies, each
//               block of the cluster copying half of them to both blocks' rings by multicast), one
//               full and one empty mbarrier a stage (no __syncthreads in the loop);
//   A           each warp reads its tile's fragments with ld.shared.v4 (512 contiguous bytes a
//               warp, conflict-free) into one of two register buffers used by turns;
//   B           a swizzled K-major descriptor (desc_sw128), 32 bytes further a k16 step;
//   waits       one wgmma group a k-tile, `wgmma.wait_group 1` after each commit (the next
//               k-tile's issue overlaps the previous one's execution), the finished k-tile's stage
//               released to both producers by an mbarrier arrive; at a slice end wait_group 0,
//               acc += p in slice order, and the next chain's first wgmma starts from zero.
// The swizzle changes only where the activations sit in shared memory, not which products the
// tensor core adds or in what order, so the bits stay those of the mma.sync chain.
//
// It prints, for Qwen3-8B shapes at 512 and 2048 rows (then 4096 x 4096 at 40, 200 and 640 rows:
// the tiles the served path would meet past whole clusters), how many outputs differ in bits from
// the mma.sync chain (chain_kernel, a simple reference kernel of the GEMV's form), the worst error
// against a double reference over the same bf16 inputs, and µs / TFLOP/s of wgmma and of cuBLAS
// (bf16 in, fp32 out, cublasGemmEx).
//
// Standalone: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a
//   -o cuda_bf16_wgmma_gemm dev/kernels/cuda_bf16_wgmma_gemm.cu -lcublas
#include <cublas_v2.h>
#include <cuda.h>          // CUtensorMap (the encoder comes from the runtime: no -lcuda)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
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

#include "../../src/backend/cuda/cuda_wgmma.cuh"  // the device helpers the served kernel uses
#include "cuda_wgmma.cuh"

using namespace t9::cuda;  // NOLINT: the served helpers, in a standalone file

constexpr int kSlice = 1024;  // inputs a chain of the canonical order
constexpr int kBM = 128;      // weight rows a block: two consumer warpgroups of 64
constexpr int kBN = 128;      // activation rows a block (wgmma's N)
constexpr int kBK = 64;       // inputs a k-tile (a ring stage): 128 bytes a row, the swizzle width
constexpr int kStages = 6;    // k-tiles in flight
constexpr int kCluster = 2;   // blocks along the activation rows that share each weight k-tile
constexpr int kXTileBytes = kBN * kBK * 2;              // a stage's activations, 16 KB
constexpr int kWTileBytes = kBM * kBK * 2;              // a stage's weights: 8 tiles x 2 KB
constexpr int kStageBytes = kXTileBytes + kWTileBytes;  // both arrive on the stage's full barrier
constexpr int kConsumerWarps = kBM / 16;                // one 16-row weight tile a warp
constexpr int kThreads = 32 * kConsumerWarps + 128;     // + the producer warpgroup
// The ring (1024-byte aligned by hand: the swizzle atoms must be), then 2 kStages mbarriers.
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;
static_assert(kBK * 2 == 128 && kBN % 8 == 0 && kXTileBytes % 1024 == 0);
static_assert(kConsumerWarps % kCluster == 0);

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

// Block (weight rows kBM by .., activation rows kBN bx ..): consumer warp w (0..7) takes the
// 16-row tile 8 by + w, warpgroup w / 4 the 64 rows of its four warps x all kBN activation rows.
// Stage layout: the activations (row r's 128 bytes at 128 r, 16-byte pieces swizzled within each
// 8-row atom), then the weights (tile w's k16 step s at kXTileBytes + 2048 w + 512 s, lane L's
// fragment at + 16 L, as in global memory).
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap x_map, const uint8_t* wf, int n_in,
                      int n_tok, float* y) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t ring = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t full0 = ring + kStages * kStageBytes, empty0 = full0 + 8 * kStages;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int t0 = kBN * blockIdx.x, T0 = kBM / 16 * blockIdx.y;
  const int n_kt = n_in / kBK, steps = n_in / 16;
  const uint32_t rank = kCluster > 1 ? cluster_rank() : 0;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      bar_init(full0 + 8 * s, 1);  // the producer's arrive.expect_tx; the bytes do the rest
      bar_init(empty0 + 8 * s, kConsumerWarps * kCluster);  // every consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // The barriers initialized before any block of the cluster copies or arrives on them.
  if constexpr (kCluster > 1)
    cluster_sync();
  else
    __syncthreads();

  // setmaxnreg: the producer warpgroup gives 128 registers a thread of its 168 to the consumers
  // (384 x 168 = 128 x 40 + 256 x 232: what the block holds, so the consumers' request is met).
  if (warp >= kConsumerWarps) {  // the producer warpgroup: one thread issues every copy
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (warp == kConsumerWarps && lane == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&x_map))
                   : "memory");
      for (int kt = 0, stage = 0, phase = 0; kt < n_kt; ++kt) {
        // The stage free in every block of the cluster (this block's copies land in both).
        bar_wait(empty0 + 8 * stage, phase ^ 1);
        const uint32_t st = ring + stage * kStageBytes, full = full0 + 8 * stage;
        bar_arrive_tx(full, kStageBytes);
        tma_load_2d(st, &x_map, kBK * kt, t0, full);
        for (int w = static_cast<int>(rank); w < kConsumerWarps; w += kCluster) {
          const uint8_t* src = wf + (static_cast<int64_t>(T0 + w) * steps + kBK / 16 * kt) * 512;
          if constexpr (kCluster == 1)
            bulk_load(st + kXTileBytes + 2048 * w, src, 2048, full);
          else
            bulk_multicast(st + kXTileBytes + 2048 * w, src, 2048, full, (1 << kCluster) - 1);
        }
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
    __syncwarp();
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int g = lane / 4, t = lane % 4;
    float p[64], acc[64];  // p: the slice's chain (its first step overwrites it), acc: the sum
#pragma unroll
    for (int i = 0; i < 64; ++i) p[i] = acc[i] = 0.0f;
    // The A fragments in two register buffers used by turns: k-tile kt's wgmmas still read one
    // while k-tile kt + 1's fragments land in the other (wait_group 1 frees it for kt + 2).
    uint32_t a0[4][4], a1[4][4];
    const uint32_t w_off = kXTileBytes + 2048 * warp + 16 * lane;
    int stage = 0;
    uint32_t phase = 0;
    // K-tile i (0..15) of slice `slice`: i is a constant once the slice's loop is unrolled.
    const auto step = [&](int slice, int i, uint32_t(&a)[4][4]) {
      bar_wait(full0 + 8 * stage, phase);
      const uint32_t st = ring + stage * kStageBytes;
      // Every input of the group's wgmmas (A registers, accumulators, descriptors, the
      // accumulate flag) defined before wgmma.fence and pinned there.
      uint64_t desc[4];
      uint32_t accumulate[4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        ld_shared_v4(a[s], st + w_off + 512 * s);
        desc[s] = desc_sw128(st + 32 * s);
        accumulate[s] = s > 0 || i > 0;  // the chain's first step: p = a b, from zero
        pin(a[s][0]), pin(a[s][1]), pin(a[s][2]), pin(a[s][3]), pin(accumulate[s]), pin(desc[s]);
      }
#pragma unroll
      for (int j = 0; j < 64; ++j) pin(p[j]);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int s = 0; s < 4; ++s) wgmma_m64n128(p, a[s], desc[s], accumulate[s]);
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      // The previous k-tile's wgmmas done: its stage (and its A buffer) free again.
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      if ((slice > 0 || i > 0) && lane == 0) {
        const uint32_t empty = empty0 + 8 * (stage == 0 ? kStages - 1 : stage - 1);
        if constexpr (kCluster == 1)
          bar_arrive(empty);
        else
          for (uint32_t b = 0; b < kCluster; ++b) bar_arrive_cluster(empty, b);
      }
      if (++stage == kStages) stage = 0, phase ^= 1;
      if (i == kSlice / kBK - 1) {  // the slice ends: acc += p, in slice order
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int j = 0; j < 64; ++j) pin(p[j]), acc[j] = __fadd_rn(acc[j], p[j]);
      }
    };
#pragma unroll 1
    for (int slice = 0; slice < n_in / kSlice; ++slice)
#pragma unroll
      for (int i = 0; i < kSlice / kBK; i += 2) {
        step(slice, i, a0);
        step(slice, i + 1, a1);
      }
    // m64n128 f32 accumulators: warp w of the warpgroup rows 16 w + g (+ 8); register 4 j + q
    // is column 8 j + 2 t + q % 2 of row g + 8 (q / 2).
    const int n_out = gridDim.y * kBM, T = T0 + warp;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int o = 16 * T + g + 8 * (q / 2), r = t0 + 8 * j + 2 * t + q % 2;
        if (r < n_tok) y[static_cast<int64_t>(r) * n_out + o] = acc[4 * j + q];
      }
  }
  // No block leaves while its peer may still arrive on its barriers.
  if constexpr (kCluster > 1) cluster_sync();
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

void shape(cublasHandle_t h, PFN_cuTensorMapEncodeTiled_v12000 encode, int n_out, int n_in,
           int n_tok, std::mt19937& rng) {
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
  // The activations as a 2-D tensor (inputs fastest, n_tok rows): boxes of kBK x kBN, 128-byte
  // swizzled, rows past n_tok read as zeros (their outputs are not stored).
  CUtensorMap x_map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(n_in), static_cast<cuuint64_t>(n_tok)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(n_in) * 2};
  const cuuint32_t box[2] = {kBK, kBN}, elem_strides[2] = {1, 1};
  if (encode(&x_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dx, dims, strides, box, elem_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
    std::exit(1);
  }
  CK(cudaFuncSetAttribute(wgmma_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          kSmemBytes));
  // Activation tiles along x (the cluster's blocks share their weights; blocks launched together
  // share a weight tile, so each weight byte comes from DRAM about once), weight tiles along y.
  const int x_tiles = (n_tok + kBN - 1) / kBN;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3((x_tiles + kCluster - 1) / kCluster * kCluster, n_out / kBM);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kCluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const auto* wfb = reinterpret_cast<const uint8_t*>(dwf);
  const float ms = time_ms(
      10, [&] { CK(cudaLaunchKernelEx(&cfg, wgmma_gemm_kernel, x_map, wfb, n_in, n_tok, dy)); });
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

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, wgmma m64n%dk16, %d x %d blocks, %d stages, cluster %d\n", prop.name, kBN, kBM,
              kBN, kStages, kCluster);
  PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode),
                                      12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || encode == nullptr) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    return 1;
  }
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  std::mt19937 rng(1);
  for (int n_tok : {512, 2048}) {
    shape(h, encode, 4096, 4096, n_tok, rng);   // q / o projections
    shape(h, encode, 12288, 4096, n_tok, rng);  // gate or up
    shape(h, encode, 4096, 12288, n_tok, rng);  // down
  }
  // The served path's edges, last (a hang here leaves the lines above): a partial tile whose
  // cluster peer is past the rows (40), two tiles the second partial (200), an odd count of
  // tiles, the padding block's box wholly past the rows (640).
  for (int n_tok : {40, 200, 640}) shape(h, encode, 4096, 4096, n_tok, rng);
  cublasDestroy(h);
  return 0;
}
