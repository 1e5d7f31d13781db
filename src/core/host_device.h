// T9_HD: a function both the host compiler and nvcc compile — __host__ __device__ and inlined
// under nvcc, plain inline elsewhere — for the small pure functions the CUDA kernels share with
// host code that tests them (quant/frag_decode.h, quant/unit_words.h).
#pragma once

#if defined(__CUDACC__)
#define T9_HD __host__ __device__ __forceinline__
#else
#define T9_HD inline
#endif
