// The bf16 tensor-core matmul of fragment-ordered Q4_K, Q5_K, Q6_K, Q3_K, Q8_0 and BF16 weights
// (cuda_bf16_matmul.cu; layouts: quant/frag_layout.h; prototype and measurements:
// dev/kernels/cuda_bf16_q4k.cu, docs/CUDA.md stages 42-44). CudaBackend::upload_matmul_weights
// repacks a matrix it accepts (Buffer::layout kFrag) when CudaBackendConfig::bf16_matmul is on;
// every matmul of that matrix then runs here, whatever its row count, so its rows stay
// batch-invariant bit for bit:
//   x rounded to bf16 (round to nearest even), and per output y = sum over 1024-input slices
//   (ascending) of the slice's chain in fp32, + bias. Q4_K, Q5_K, Q6_K: each weight dequantized to
//   bf16 (q4k_bf16_weight's, q5k_bf16_weight's or q6k_bf16_weight's rule), the chain 64 m16n8k16
//   mma (k16 steps in the layout's slot order). Q8_0: the codes exact in bf16, the chain over the
//   slice's 32-input blocks c = fma(d, s, c), s the block's two mma from zero: GGUF's weights, only
//   x rounded. BF16: the weights as they are, the chain of 64 mma as Q4_K's.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"

namespace t9::cuda {

class Stream;
struct Scratch;

// Matrices the kernels take: Q4_K, Q5_K, Q6_K, Q8_0 or BF16, frag_shape_ok, and n_in a multiple of
// 1024 (whole slices) up to 16384 (a GEMV block holds one warp a slice; Q8_0 up to 14336 and BF16
// up to 12288: their rings).
bool bf16_frag_shape_ok(GgmlType type, int64_t n_in, int64_t n_out);

// One matrix of a launch: y = x @ w^T (+ bias; bias may be unset), w of layout kFrag.
struct Bf16Out {
  const Tensor* w;
  const Tensor* bias;
  const Tensor* y;
};
// Whether a GEMM call (n_tok > 32) of n_in inputs, whose matrices take n_blocks blocks of 128
// weight rows, runs by slices: one block a 1024-input slice and output tile, then a launch adding
// the slices' partials in ascending order (the whole-row GEMM's order: the same bits). Taken when
// whole-row blocks would fill under half of the device's SMs (2 a block).
bool bf16_gemm_by_slices(int64_t n_in, int64_t n_blocks, int64_t n_tok);
constexpr int kBf16GemmRows = 128;  // weight rows a GEMM block

// Up to kBf16MaxFused matrices of one type and n_in times the same x in one launch (the caller
// checked each: check_matmul). x: F32 rows, rounded to bf16 by the GEMV itself (rows that fit its
// shared memory) or by a launch into `scratch`. n_tok <= 32: the GEMV; else the GEMM. w_early:
// every w is a model weight (never written after its upload), so the GEMV may start copying it
// before its dependent-launch wait.
constexpr int kBf16MaxFused = 4;
// glu (optional, bf16_glu_fits): outs are {gate, up}, and the GEMV stores glu(gate, up) into the
// gate's y in its epilogue (a block computes gate tile k, holds it, then up tile k; the same
// bits as the GLU op over the two outputs); the up's y is not written. wgmma: which GEMMs run on
// wgmma (cuda_bf16_wgmma.cuh; the same bits) where every matrix of the launch fits it.
struct WgmmaUse {
  int min_rows = 0;        // CudaBackendConfig::bf16_wgmma_rows; 0: never
  bool quantized = false;  // CudaBackendConfig::bf16_wgmma_quant: the K-quants too, not only BF16
};
void launch_bf16_matmul(std::span<const Bf16Out> outs, const Tensor& x, bool w_early,
                        Scratch& scratch, Stream& stream, const GluKind* glu = nullptr,
                        WgmmaUse wgmma = {});
// The wgmma GEMM's launches in this process (tests: that the path was taken).
int64_t bf16_wgmma_launches();
// Two groups of matrices over the same x in one launch, each group one type and at most
// kBf16MaxFused matrices, as launch_bf16_matmul would run each (the same bits): the GEMV of 1-8
// rows with x staged, for a Q4_K or Q5_K group beside a Q6_K one (a K-quant file's q/k beside its
// Q6_K v). bf16_pair_fits says whether the pair launch takes them (the backend asks only with
// CudaBackendConfig::bf16_pairs on).
bool bf16_pair_fits(std::span<const Bf16Out> a, std::span<const Bf16Out> b, const Tensor& x);
void launch_bf16_matmul_pair(std::span<const Bf16Out> a, std::span<const Bf16Out> b,
                             const Tensor& x, bool w_early, Stream& stream);
// Whether a launch over rows x can take the GLU epilogue: the GEMV's rows (1 to 32), and the
// gate and up of one type and shape.
bool bf16_glu_fits(const Tensor& gate_w, const Tensor& up_w, const Tensor& x);

}  // namespace t9::cuda
