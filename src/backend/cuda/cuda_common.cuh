// Internal to the CUDA backend: error checking, tensor addressing on the device, fp16/bf16 loads,
// warp and block reductions. Included only by src/backend/cuda/*.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/backend.h"
#include "backend/cuda/cuda_stream.cuh"
#include "core/check.h"
#include "core/fast_div.h"

// Every CUDA runtime call and every launch goes through CUDA_CHECK: an error is a broken invariant
// of our own code (bad launch shape, device fault), reported with file and line like T9_CHECK.
#define CUDA_CHECK(expr)                                                               \
  do {                                                                                 \
    const cudaError_t t9_cuda_err_ = (expr);                                           \
    T9_CHECK(t9_cuda_err_ == cudaSuccess, "CUDA error {} ({}) from {}",                \
             cudaGetErrorName(t9_cuda_err_), cudaGetErrorString(t9_cuda_err_), #expr); \
  } while (0)

namespace t9::cuda {

// True when the environment variable `name` is "0": the TEMPO9_CUDA_* switches that turn a
// default path off for A/B measurement. Callers read it once (static).
inline bool env_off(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && std::string_view(e) == "0";
}

// Which staged GEMVs take bulk copies (SliceArgs::bulk_rows, MoeDownArgs::bulk_rows), read
// once. TEMPO9_CUDA_BULK_ROWS=0: none (per-lane cp.async everywhere); TEMPO9_CUDA_BULK_WIDE=0:
// not the wide rows' single buffer; TEMPO9_CUDA_BULK_SHORT=0: not the short rows
// (gemv_short_kernel, moe_down_kernel). The same bits every way.
enum class BulkForm { kTwoBuffers, kWide, kShort };
inline bool bulk_rows_on(BulkForm f) {
  static const bool all = !env_off("TEMPO9_CUDA_BULK_ROWS");
  static const bool wide = !env_off("TEMPO9_CUDA_BULK_WIDE");
  static const bool shrt = !env_off("TEMPO9_CUDA_BULK_SHORT");
  return all && (f == BulkForm::kTwoBuffers || (f == BulkForm::kWide ? wide : shrt));
}

// Streaming multiprocessors of the current device (read once: one device per process).
inline int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

// Blocks to launch for a grid-stride kernel: `needed`, capped at what stays resident on the
// device at once with `smem` bytes of dynamic shared memory per block of `threads`. The residency
// is queried once per kernel, block size and shared memory size, and kept for the last 8 of them
// per kernel: a kernel's shared memory follows its input width, so one model step asks for a
// few sizes in turn (a one-entry cache asked the runtime ~90 times a step on a Qwen3-0.6B
// shape, run 193's trace). The first call raises the kernel's dynamic shared memory limit to
// max_smem.
template <auto kKernel>
int64_t resident_blocks(int threads, int smem, int max_smem, int64_t needed) {
  static const bool attr_set = [max_smem] {
    CUDA_CHECK(
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
    return true;
  }();
  (void)attr_set;
  struct Known {
    int threads = 0, smem = -1, blocks = 1;  // threads 0: an empty entry
  };
  static thread_local std::array<Known, 8> known{};
  static thread_local size_t next = 0;  // the entry the next new size replaces
  int blocks = 0;
  for (const Known& k : known)
    if (k.threads == threads && k.smem == smem) blocks = k.blocks;
  if (blocks == 0) {
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kKernel, threads, smem));
    blocks = std::max(n, 1);
    known[next++ % known.size()] = {threads, smem, blocks};
  }
  return std::min<int64_t>(needed, static_cast<int64_t>(blocks) * sm_count());
}

// Device-side error codes, OR-ed into the backend's error word by kernels that find an index out
// of range (a caller bug the CPU backend would T9_CHECK); sync() turns a non-zero word into a
// T9_CHECK failure.
enum DeviceError : unsigned {
  kErrKvSlot = 1u,     // block table index or pool slot out of range
  kErrGetRowsId = 2u,  // get_rows id out of range
  kErrSeqRows = 4u,    // AttnSeq rows outside the batch
  kErrMoeId = 8u,      // matmul_id expert id out of range
};

// q = e / d, r = e % d for e >= 0, d > 0; in 32 bits when both fit (the common case: ~4x fewer
// instructions than the 64-bit division).
__device__ __forceinline__ void div_mod(int64_t e, int64_t d, int64_t& q, int64_t& r) {
  if ((static_cast<uint64_t>(e) | static_cast<uint64_t>(d)) <= 0xffffffffull) {
    const uint32_t e32 = static_cast<uint32_t>(e), d32 = static_cast<uint32_t>(d);
    q = e32 / d32;
    r = e32 - static_cast<uint32_t>(q) * d32;
  } else {
    q = e / d;
    r = e - q * d;
  }
}

// The activations' float expressions, one definition for every kernel that applies them (the
// GLU, the MoE tail, the gates, the Gated DeltaNet): the CPU backend's formulas, so that fused
// and separate kernels round alike.
__device__ __forceinline__ float silu(float v) {
  return v / (1.0f + expf(-v));
}
__device__ __forceinline__ float sigmoid(float v) {
  return 1.0f / (1.0f + expf(-v));
}
// ggml's GELU tanh approximation (as backend/cpu).
__device__ __forceinline__ float gelu_tanh(float v) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * v * (1.0f + kCoef * v * v)));
}
// A GLU's output element from its gate g and up u: the elementwise GLU's, and the bf16 GEMV's
// that stores it from its gate/up epilogue (cuda_bf16_matmul.cu): the same bits.
__device__ __forceinline__ float glu_value(GluKind kind, float g, float u) {
  return kind == GluKind::kSwiGLU ? silu(g) * u : gelu_tanh(g) * u;
}

// A tensor as kernels see it: base address and byte strides of dims 1..3. Rows (dim 0) are
// contiguous for every op (backend.h).
struct TensorDesc {  // every member initialized (the tape's bytes: cuda_stream.cuh)
  char* base = nullptr;
  int64_t ne0 = 0, ne1 = 0, ne2 = 0, ne3 = 0;
  int64_t nb1 = 0, nb2 = 0, nb3 = 0;

  __device__ __forceinline__ int64_t n_rows() const { return ne1 * ne2 * ne3; }
  // Row r, a flat index over (ne1, ne2, ne3) like cpu::row_ptr. Rows of the first plane (every
  // row of a 2-D tensor) need no division; the others call row_past_plane. Inlined, its two
  // divisions (~70 instructions each) at every site, many of them in unrolled loops, made
  // kernels tens of kB of code (docs/CUDA.md stage 58) that every SM fetches cold at each
  // decode launch. The call takes the fields by value: passing `this` would put the kernel's
  // parameter in a stack frame to take its address.
  __device__ __forceinline__ char* row(int64_t r) const {
    return r < ne1 ? base + r * nb1 : row_past_plane(base, r, ne1, ne2, nb1, nb2, nb3);
  }
  // Rows past the first plane: 32-bit divisions where they fit (div_mod), else 64-bit ones.
  static __device__ __noinline__ char* row_past_plane(char* b, int64_t r, int64_t n1, int64_t n2,
                                                      int64_t s1, int64_t s2, int64_t s3) {
    int64_t i1, i2, i3, rest;
    div_mod(r, n1, rest, i1);
    if (rest < n2) return b + i1 * s1 + rest * s2;
    div_mod(rest, n2, i3, i2);
    return b + i1 * s1 + i2 * s2 + i3 * s3;
  }
  // Row i1 of plane i2, no division: per-token rows of [n_tokens, heads, dim] tensors in loops.
  __device__ __forceinline__ char* row(int64_t i1, int64_t i2) const {
    return base + i1 * nb1 + i2 * nb2;
  }
};

inline char* base_ptr(const Tensor& t) {
  T9_CHECK(t.valid(), "op given an unset tensor");
  return static_cast<char*>(t.buf->device_ptr) + t.offset;
}

inline TensorDesc desc(const Tensor& t) {
  return {base_ptr(t),
          t.ne[0],
          t.ne[1],
          t.ne[2],
          t.ne[3],
          static_cast<int64_t>(t.nb[1]),
          static_cast<int64_t>(t.nb[2]),
          static_cast<int64_t>(t.nb[3])};
}

inline void check_f32_rows(const Tensor& t, const char* what) {
  T9_CHECK(t.type == GgmlType::F32, "{} must be F32, is {}", what, type_name(t.type));
  T9_CHECK(t.nb[0] == 4, "{} rows must be contiguous", what);
}

inline void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  T9_CHECK(a.ne == b.ne, "{}: shape [{},{},{},{}] vs [{},{},{},{}]", what, a.ne[3], a.ne[2],
           a.ne[1], a.ne[0], b.ne[3], b.ne[2], b.ne[1], b.ne[0]);
}

// The norm's weight row (null: none), checked against x's rows.
inline const float* norm_weight(const Tensor& weight, const Tensor& x) {
  if (!weight.valid()) return nullptr;
  check_f32_rows(weight, "rms_norm weight");
  T9_CHECK(weight.ne[0] == x.ne[0], "rms_norm weight has {} elements, rows {}", weight.ne[0],
           x.ne[0]);
  return reinterpret_cast<const float*>(base_ptr(weight));
}

inline unsigned grid_1d(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  T9_CHECK(blocks > 0 && blocks <= 0x7fffffff, "grid of {} blocks", blocks);
  return static_cast<unsigned>(blocks);
}

// ---- device helpers ----

// Programmatic dependent launch (sm_90; Stream launches every kernel with it, cuda_stream.cuh).
// The first statement of every kernel: wait until the previous kernel in the stream has completed
// and its writes are visible (nothing before this may touch global memory, reads or writes), then
// let the next kernel be scheduled. The next one's blocks take only what this grid leaves free
// (the trigger fires once every block of this grid has run it) and hold at their own wait; what
// overlaps is the launch and block setup that otherwise sits between two small kernels.
// Triggering before the wait (the next grid scheduled while this one still waits, and so on down
// the chain, so that GEMVs could start their weights several kernels early) was slower on the
// H200: 35B decode 282 -> 244 tok/s, 8-row ITL 7.9 -> 8.5 ms (run 109; docs/CUDA.md stage 19).
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// pdl_enter's two halves, for a kernel that schedules its successor later than its wait.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A gpu-scope acquire-release fence (fence.acq_rel.gpu): the release / acquire half of a counter
// handshake between blocks (__threadfence() is the sequentially consistent fence.sc.gpu: more than
// it needs).
__device__ __forceinline__ void fence_acq_rel_gpu() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

// Weights are the general exception to "nothing before pdl_enter()" (the attention kernel has its
// own: keys of earlier steps, the step's uploaded tables and positions; cuda_flash_attention.cu):
// no kernel writes them after the upload, so a kernel may start pulling its weights before its
// wait, while the predecessor (a norm, a rounding, attention) still runs and DRAM would
// otherwise sit idle. This asks L2 for the 128-byte lines of [p, p + n_bytes), lane i of n_lanes
// taking lines i, i + n_lanes, ... (the bytes then arrive at L2 latency; a hint, never a fault:
// prefetch does not trap).
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t n_bytes, int lane, int n_lanes) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(n_bytes);
  for (uintptr_t a = (reinterpret_cast<uintptr_t>(p) & ~uintptr_t{127}) + 128u * lane; a < end;
       a += 128u * n_lanes)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
}

// ---- shared-memory PTX ----

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// ldmatrix: lanes 8m .. 8m + 7 give the 16-byte rows of 8x8 b16 matrix m; register m of lane l
// is 32-bit word l % 4 of row l / 4 of matrix m. Volatile: ordered against the block barriers.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x1(uint32_t& r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r)
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ float f16_load(const void* p) {
  return __half2float(*static_cast<const __half*>(p));
}
__device__ __forceinline__ float bf16_load(const void* p) {
  return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
}
__device__ __forceinline__ uint16_t u16_load(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);  // callers pass 2-byte-aligned fields
}
__device__ __forceinline__ float f16_bits(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Rows up to which norms take one warp per row (rms_norm_warp_kernel, rms_norm_gated_kernel):
// both sum kWarpRowMax / 32 values per lane, so their sums of squares are the same bits.
constexpr int kWarpRowMax = 256;
// RMSNorm of a row of at most kPer * 32 elements by one warp (lanes strided, the sum of squares
// in double over the warp's tree): loads the lane's elements into xv and returns
// 1 / sqrt(mean(x^2) + eps); element i is then rms_scaled(xv[c], ...). rms_norm_warp_kernel,
// rms_norm_gated_kernel, qk_norm_rope_kernel and the bf16 GEMV's kNorm staging share both, so
// their bits agree.
template <int kPer>
__device__ __forceinline__ float warp_row_inv_rms(const float* xr, int64_t n, int lane, float eps,
                                                  float (&xv)[kPer]) {
  double ss = 0.0;
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const int64_t i = lane + 32 * c;
    xv[c] = i < n ? xr[i] : 0.0f;
    ss += static_cast<double>(xv[c]) * xv[c];
  }
  ss = warp_sum(ss);
  return static_cast<float>(1.0 / sqrt(ss / static_cast<double>(n) + eps));
}
__device__ __forceinline__ float rms_scaled(float x, float inv, const float* w, int64_t i,
                                            float weight_bias) {
  return x * inv * (w != nullptr ? w[i] + weight_bias : 1.0f);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ uint64_t warp_max(uint64_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// A float's order as an unsigned key (larger float, larger key), -0 folded into +0 as `==` does;
// NaN is the caller's to map (moe_route never ranks one, sampling takes it as -inf).
__device__ __forceinline__ uint32_t float_order_key(float v) {
  const uint32_t b = __float_as_uint(v + 0.0f);  // -0 -> +0
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 values of T. The order is fixed by the block shape, so results are
// deterministic run to run.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace t9::cuda
