// The floor of a decode step's kernel chain on this GPU: what one more launch costs in a CUDA
// graph, with and without programmatic dependent launch (PDL), by the launch's shape and by what
// it does between its wait and its end. A decode step of ours is ~530 (Qwen3-8B) to ~700
// (Qwen3.5-35B) such launches in one graph (docs/CUDA.md, stage 20): the per-launch floor times
// that count is what no kernel-level tuning can remove; a persistent kernel would replace it by
// its grid barriers.
//
// Each case builds a graph of N launches of one kernel (each reading what the previous one wrote
// where the case moves data, so the chain is truly dependent), replays it R times, and prints
// the median µs per launch (cudaEvent around one replay, divided by N).
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -o cuda_chain_floor \
//     dev/kernels/cuda_chain_floor.cu            # then run it on the device: cuda_chain_floor
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

__device__ __forceinline__ void wait_then_trigger() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// kWork 0: nothing after the wait. 1: each thread copies 4 floats from `in` to `out` (the grid
// moves blocks * threads * 16 bytes: an elementwise op). 2: the block sums its 4 floats per
// thread through shared memory (a block reduction, two barriers), then writes them scaled (a
// norm-like row op).
template <int kWork>
__global__ void link_kernel(const float4* __restrict__ in, float4* __restrict__ out) {
  wait_then_trigger();
  if constexpr (kWork == 0) return;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v = in[i];
  if constexpr (kWork == 2) {
    __shared__ float part[32];
    float s = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float k = rsqrtf(s + 1.0f);
    v = make_float4(v.x * k, v.y * k, v.z * k, v.w * k);
  }
  out[i] = v;
}

// The copy of kWork 1 with `smem` bytes of dynamic shared memory staged through (as the GEMVs
// and the attention kernel hold 64-200 KB): whether a chain that alternates shared-memory sizes
// pays for the SMs' carveout changes.
__global__ void smem_link_kernel(const float4* __restrict__ in, float4* __restrict__ out) {
  extern __shared__ float4 buf[];
  wait_then_trigger();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = in[i];
  __syncthreads();
  out[i] = buf[(threadIdx.x + 1) % blockDim.x];
}

// The copy with a 1 KB parameter block (our SliceArgs with four parts is ~0.7 KB).
struct BigArgs {
  const float4* in;
  float4* out;
  int pad[252];
};
__global__ void big_args_kernel(BigArgs a) {
  wait_then_trigger();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  a.out[i] = a.in[i];
}

struct Case {
  const char* name;
  void (*kernel)(const float4*, float4*);
  int blocks, threads;
};

// Median µs per launch of a graph of n launches, enqueue(i) putting launch i on stream s (20
// timed replays; the first three replays, which upload the graph, are not counted).
float replay_us(cudaStream_t s, int n, const std::function<void(int)>& enqueue) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) enqueue(i);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 23; ++r) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float t = 0;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms[ms.size() / 2] * 1000.0f / n;
}

// A launch of `blocks` x `threads` on s, with programmatic dependent launch when pdl (the
// attribute must outlive the launches: pass one per config).
cudaLaunchConfig_t launch_config(int blocks, int threads, cudaStream_t s, bool pdl,
                                 cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 500;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; %d launches per graph, median of 20 replays\n", prop.name,
              prop.multiProcessorCount, n);
  const int sms = prop.multiProcessorCount;
  float4 *a, *b;
  const size_t bytes = size_t{16} * 1024 * 8 * 256;  // up to 8 x sms blocks of 256 threads
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 0, bytes));
  CK(cudaMemset(b, 0, bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Case cases[] = {
      {"empty, 1 block x 32", link_kernel<0>, 1, 32},
      {"empty, 132 blocks x 256", link_kernel<0>, sms, 256},
      {"copy 16 KB, 4 blocks x 256 (an elementwise op on a 4096 row)", link_kernel<1>, 4, 256},
      {"copy 1 MB, 256 blocks x 256", link_kernel<1>, 256, 256},
      {"block sum + scale, 1 block x 256 (a one-block norm's shape)", link_kernel<2>, 1, 256},
      {"block sum + scale, 16 blocks x 256 (the k-block norm's shape)", link_kernel<2>, 16, 256},
      {"block sum + scale, 1056 blocks x 256 (8 per SM)", link_kernel<2>, 8 * sms, 256},
  };
  std::printf("%-66s %10s %10s\n", "case", "no PDL us", "PDL us");
  for (const Case& c : cases) {
    float us[2];
    for (const bool pdl : {false, true}) {
      cudaLaunchAttribute attr{};
      const cudaLaunchConfig_t cfg = launch_config(c.blocks, c.threads, s, pdl, &attr);
      us[pdl] = replay_us(s, n, [&](int i) {
        CK(cudaLaunchKernelEx(&cfg, c.kernel, static_cast<const float4*>(i % 2 ? b : a),
                              i % 2 ? a : b));
      });
    }
    std::printf("%-66s %10.2f %10.2f\n", c.name, us[0], us[1]);
  }
  // Chains of two alternating launches (PDL on): per launch.
  const int big = 100 << 10;
  CK(cudaFuncSetAttribute(smem_link_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
  const auto pair_us = [&](const char* name, auto first, auto second) {
    cudaLaunchAttribute attr{};
    const cudaLaunchConfig_t cfg = launch_config(4, 256, s, true, &attr);
    const float us = replay_us(s, n, [&](int i) {
      if (i % 2)
        second(cfg, b, a);
      else
        first(cfg, a, b);
    });
    std::printf("%-66s %21.2f\n", name, us);
  };
  const auto plain = [](cudaLaunchConfig_t cfg, const float4* in, float4* out) {
    CK(cudaLaunchKernelEx(&cfg, link_kernel<1>, in, out));
  };
  const auto smem_k = [&](int bytes) {
    return [bytes](cudaLaunchConfig_t cfg, const float4* in, float4* out) {
      cfg.dynamicSmemBytes = bytes;
      CK(cudaLaunchKernelEx(&cfg, smem_link_kernel, in, out));
    };
  };
  const auto big_k = [](cudaLaunchConfig_t cfg, const float4* in, float4* out) {
    BigArgs ba{};
    ba.in = in;
    ba.out = out;
    CK(cudaLaunchKernelEx(&cfg, big_args_kernel, ba));
  };
  pair_us("copy 16 KB, then the same (baseline)", plain, plain);
  pair_us("copy 16 KB, then the same staged through 4 KB shared", plain, smem_k(4096));
  pair_us("copy 16 KB, then the same with 100 KB dynamic shared", plain, smem_k(big));
  pair_us("both with 100 KB dynamic shared", smem_k(big), smem_k(big));
  pair_us("copy 16 KB, then the same with 1 KB of parameters", plain, big_k);
  return 0;
}
