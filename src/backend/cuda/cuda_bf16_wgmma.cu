// The prompt GEMM on wgmma (cuda_bf16_wgmma.cuh), grown from dev/kernels/cuda_bf16_wgmma_gemm.cu
// (runs 254-260: 480-576 TFLOP/s on an H100 with the mma.sync chain's bits, where the served
// mma.sync GEMM runs ~200 and cuBLAS 560-800). What the served form adds: the fragment-ordered
// weights as the backend stores them (B16Direct, or a K-quant's 16-row blocks), whose k16 steps
// hold their inputs in the fragment layout's order (quant/frag_decode.h frag_input), so x is copied
// to bf16 in that order (wgmma_x_kernel) and the tensor map's natural order lines each x up with
// its weight; y through a TensorDesc with the bias added as the served GEMM adds it; the
// dependent-launch wait; the cluster as a kernel attribute (Stream launches take no cluster
// argument).
//
// Block: 128 weight rows x 128 activation rows; two consumer warpgroups on wgmma.m64n128k16 (A
// from registers: each warp's 16-row tile in mma.sync's fragment layout, which keeps mma.sync's
// bits; B, the activations, from shared memory by a 128-byte-swizzled descriptor) and a producer
// warpgroup whose one thread issues every copy; setmaxnreg moves the producer's registers to the
// consumers. A ring of kStages 64-input k-tiles, each with a full and an empty mbarrier: the
// activations by one 2-D TMA copy, each weight tile's part of the k-tile (WgTile) by 1-D bulk
// copies multicast to the cluster of two blocks along the activation rows (they share the
// weights). BF16's fragments are multiplied as copied; a K-quant's warp first dequantizes its
// lane's fragments from the raw codes, header and high words (cuda_bf16_formats.cuh, as the
// mma.sync GEMM does: the same bf16 weights). One wgmma group a k-tile, `wait_group 1` after its
// commit (the previous k-tile's stage then goes back to both producers; the next k-tile's
// fragments are loaded while this one's group runs); at each slice's end `wait_group 0`, acc += p
// in slice order (__fadd_rn, from 0 as the served GEMM), and the next chain's first wgmma starts
// from zero.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <cuda.h>          // CUtensorMap (its encoder comes from the runtime: no -lcuda)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>

#include <atomic>

#include "backend/cuda/cuda_bf16_formats.cuh"
#include "backend/cuda/cuda_bf16_wgmma.cuh"
#include "backend/cuda/cuda_stream.cuh"
#include "backend/cuda/cuda_wgmma.cuh"
#include "core/check.h"

namespace t9::cuda {
namespace {

constexpr int kSlice = 1024;  // inputs a chain of the canonical order
constexpr int kBM = kWgmmaRows, kBN = kWgmmaTokRows;
constexpr int kBK = 64;      // inputs a k-tile: 128 bytes a row, the swizzle's width
constexpr int kStages = 6;   // k-tiles in flight
constexpr int kCluster = 2;  // blocks along the activation rows sharing each weight k-tile
constexpr int kXTileBytes = kBN * kBK * 2;           // a stage's activations, 16 KB
constexpr int kConsumerWarps = kBM / 16;             // one 16-row weight tile a warp
constexpr int kThreads = 32 * kConsumerWarps + 128;  // + the producer warpgroup
constexpr int kMaxIn = 12288;  // B16Direct's widest matrix (bf16_frag_shape_ok)
static_assert(kBK * 2 == 128 && kXTileBytes % 1024 == 0 && kConsumerWarps % kCluster == 0);

// A weight tile's part of a stage (one 64-input group, grp, of a 256-input block), as the mma.sync
// GEMM copies it (cuda_bf16_matmul.cu's issue): the group's code chunks, the block's header (its
// scales; copied again with every group), then 512-byte pieces that hold every lane's high words
// (Q6_K: the group pair's; Q5_K: the block's; Q3_K: the pair's low words, then the block's high
// words). BF16 (B16Direct): the group's 2 KB of fragments only.
template <class F>
struct WgTile {
  static constexpr int kCodes = 512 * F::kCodeChunks;
  static constexpr int kHdr = 16 * F::kHdrChunks;
  static constexpr int kHighs = F::kCodesInHighs ? F::kHighCopies : F::kHigh ? 1 : 0;
  static constexpr int kBytes = kCodes + kHdr + 512 * kHighs;
  // A stage: the activations, then the eight tiles' parts; whole KB (the next stage's activations
  // must sit on a 1024-byte swizzle atom).
  static constexpr int kStage = (kXTileBytes + kConsumerWarps * kBytes + 1023) / 1024 * 1024;
  // The ring (aligned to 1024 bytes by hand: the swizzle's atoms must be), then 2 kStages barriers.
  static constexpr int kSmem = 1024 + kStages * kStage + 2 * kStages * 8;
  // Copy k's word of `lane` in the block (F's gemm_high_at) ...
  __device__ static int high_at(int grp, int lane, int k) {
    if constexpr (F::kCodesInHighs)
      return F::gemm_high_at(grp, lane, k);
    else if constexpr (F::kHigh)
      return F::gemm_high_at(grp, lane);
    else
      return 0;  // no high words (kHighs 0)
  }
  // ... inside the 512 bytes copied for it: the 32 lanes' 16-byte pieces (16-byte aligned).
  __device__ static int high_src(int grp, int k) { return high_at(grp, 0, k) & ~15; }
};
static_assert(WgTile<bf16::B16Direct>::kBytes == 2048 && WgTile<bf16::Q4K>::kBytes % 16 == 0 &&
              WgTile<bf16::Q5K>::kBytes % 16 == 0 && WgTile<bf16::Q6K>::kBytes % 16 == 0 &&
              WgTile<bf16::Q3K>::kBytes % 16 == 0 && WgTile<bf16::Q6K>::kSmem <= 227 * 1024);

// ---- x in the fragment layout's input order ----

// Eight outputs a thread: destination inputs c .. c + 7 of a row are k16 step s = (c % 64) / 16's
// positions k0 .. k0 + 7 (k0 = c % 16: 0 or 8), i.e. the inputs 32 (s / 2) + 8 j + 4 (s % 2) +
// 2 (k0 / 8) + e of the 64-input group for j = 0..3, e = 0..1 (frag_input), rounded as
// to_bf16_kernel rounds them.
__global__ void wgmma_x_kernel(TensorDesc x, int n_in, int64_t n_oct, __nv_bfloat16* out) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_oct) return;
  const int64_t per_row = n_in / 8, r = i / per_row;
  const int c = static_cast<int>(8 * (i % per_row));
  const int q = c % 64, s = q / 16, k0 = q % 16;
  const float* src = reinterpret_cast<const float*>(x.row(r)) + (c - q) + 32 * (s / 2) +
                     4 * (s % 2) + 2 * (k0 / 8);
  __nv_bfloat162 v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = __floats2bfloat162_rn(src[8 * j], src[8 * j + 1]);
  *reinterpret_cast<uint4*>(out + r * n_in + c) = *reinterpret_cast<const uint4*>(v);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A K-quant warp's A fragments of group grp from its tile's part of the stage (tile: its shared
// address, base: the same byte as a generic pointer): the codes, high words and header scales the
// mma.sync GEMM reads, then F::dequant.
template <class F>
__device__ __forceinline__ void wgmma_dequant(uint32_t tile, const uint8_t* base, int grp, int lane,
                                              uint32_t (&a)[4][4]) {
  using Tile = WgTile<F>;
  bf16::GroupCodes c{};
#pragma unroll
  for (int cc = 0; cc < F::kCodeChunks; ++cc) {
    uint32_t w[4];
    ld_shared_v4(w, tile + 512 * cc + 16 * lane);
    c.w[4 * cc] = w[0], c.w[4 * cc + 1] = w[1], c.w[4 * cc + 2] = w[2], c.w[4 * cc + 3] = w[3];
  }
  const uint32_t highs = tile + Tile::kCodes + Tile::kHdr;
  const auto high = [&](int k) {
    return ld_shared_v2(highs + 512 * k + (Tile::high_at(grp, lane, k) - Tile::high_src(grp, k)));
  };
  if constexpr (F::kCodesInHighs) {
    uint2 copies[33];  // gemm_codes reads the lane's two copies 32 apart (the GEMM's rows)
    copies[0] = high(0), copies[32] = high(1);
    F::gemm_codes(copies, grp, c);
  } else if constexpr (F::kHigh) {
    F::gemm_highs(high(0), grp, c.h);
  }
  const auto* hdr = reinterpret_cast<const uint4*>(base + Tile::kCodes);
  F::dequant(c, F::header_scales(hdr, lane / 4, lane % 4, grp), a);
}
#endif

// Block (activation rows kBN bx .., weight rows kBM by ..): consumer warp w takes the 16-row tile
// 8 by + w, warpgroup w / 4 its four warps' 64 rows x all kBN activation rows. A stage: the
// activations (row r's 128 bytes at 128 r, 16-byte pieces swizzled within each 8-row atom), then
// tile w's part at kXTileBytes + WgTile<F>::kBytes w (BF16: its k16 step s at + 512 s, lane L's
// fragment at + 16 L, as in global memory).
template <class F>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap x_map, const uint8_t* wf,
                      const float* bias, TensorDesc y, int n_in, int n_tok) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tile = WgTile<F>;
  constexpr int kStage = Tile::kStage;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t ring = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t full0 = ring + kStages * kStage, empty0 = full0 + 8 * kStages;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int t0 = kBN * blockIdx.x, T0 = kBM / 16 * blockIdx.y;
  const int n_kt = n_in / kBK, n_sb = n_in / 256;
  const uint32_t rank = cluster_rank();
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      bar_init(full0 + 8 * s, 1);  // the producer's arrive.expect_tx; the bytes do the rest
      bar_init(empty0 + 8 * s, kConsumerWarps * kCluster);  // every consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cluster_sync();  // every block's barriers initialized before any copy or remote arrival
  pdl_enter();     // x is the predecessor's (wgmma_x_kernel)
  // 384 x 168 registers = 128 x 40 (producer) + 256 x 232 (consumers).
  if (warp >= kConsumerWarps) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (warp == kConsumerWarps && lane == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&x_map))
                   : "memory");
      constexpr uint16_t kAll = (1 << kCluster) - 1;
      for (int kt = 0, stage = 0, phase = 0; kt < n_kt; ++kt) {
        bar_wait(empty0 + 8 * stage, phase ^ 1);  // free in both blocks (the copies land in both)
        const uint32_t st = ring + stage * kStage, full = full0 + 8 * stage;
        bar_arrive_tx(full, kXTileBytes + kConsumerWarps * Tile::kBytes);
        tma_load_2d(st, &x_map, kBK * kt, t0, full);
        const int grp = kt % 4;
        for (int w = static_cast<int>(rank); w < kConsumerWarps; w += kCluster) {
          const uint8_t* blk = wf + (static_cast<int64_t>(T0 + w) * n_sb + kt / 4) * F::kBlockBytes;
          const uint32_t dst = st + kXTileBytes + Tile::kBytes * w;
          if constexpr (Tile::kCodes > 0)
            bulk_multicast(dst, blk + F::kCodesAt + Tile::kCodes * grp, Tile::kCodes, full, kAll);
          if constexpr (Tile::kHdr > 0)
            bulk_multicast(dst + Tile::kCodes, blk, Tile::kHdr, full, kAll);
#pragma unroll
          for (int k = 0; k < Tile::kHighs; ++k)
            bulk_multicast(dst + Tile::kCodes + Tile::kHdr + 512 * k, blk + Tile::high_src(grp, k),
                           512, full, kAll);
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
    // Two A buffers by turns: k-tile kt's wgmmas still read one while kt + 1's land in the other.
    uint32_t a0[4][4], a1[4][4];
    const uint32_t w_off = kXTileBytes + Tile::kBytes * warp;
    int stage = 0;
    uint32_t phase = 0;
    const auto step = [&](int slice, int i, uint32_t(&a)[4][4]) {  // k-tile i of the slice
      bar_wait(full0 + 8 * stage, phase);
      const uint32_t st = ring + stage * kStage;
      if constexpr (F::kDirectA) {
#pragma unroll
        for (int s = 0; s < 4; ++s) ld_shared_v4(a[s], st + w_off + 512 * s + 16 * lane);
      } else {
        wgmma_dequant<F>(st + w_off, smem_raw + (st + w_off - smem_u32(smem_raw)), i % 4, lane, a);
      }
      uint64_t desc[4];
      uint32_t accumulate[4];
#pragma unroll
      for (int s = 0; s < 4; ++s) {
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
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // k-tile i - 1 done
      if ((slice > 0 || i > 0) && lane == 0) {
        const uint32_t empty = empty0 + 8 * (stage == 0 ? kStages - 1 : stage - 1);
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
    const int T = T0 + warp;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int o = 16 * T + g + 8 * (q / 2), r = t0 + 8 * j + 2 * t + q % 2;
        if (r < n_tok)  // as the served GEMM's y_value: the sum, then + bias
          reinterpret_cast<float*>(y.row(r))[o] =
              bias != nullptr ? acc[4 * j + q] + bias[o] : acc[4 * j + q];
      }
  }
  cluster_sync();  // no block leaves while its peer may still arrive on its barriers
#else
  __trap();  // sm_90a only (wgmma, setmaxnreg, multicast): bf16_wgmma_fits keeps other cards off
#endif
}

// Whether this device runs the kernel's sm_90a code: compute capability 9.0 (what sm_90a cubins
// run on), and the loaded kernel is that code, not the sm_90 stub beside it in the fat binary
// (its registers: the stub takes a handful, the GEMM 168).
bool device_runs_sm90a() {
  static const bool yes = [] {
    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major != 9 || minor != 0) return false;
    cudaFuncAttributes fa{};
    CUDA_CHECK(cudaFuncGetAttributes(&fa, wgmma_gemm_kernel<bf16::B16Direct>));
    return fa.numRegs >= 64;
  }();
  return yes;
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                cudaEnableDefault, &found));
    T9_CHECK(found == cudaDriverEntryPointSuccess && fn != nullptr,
             "wgmma GEMM: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

std::atomic<int64_t> g_launches{0};

}  // namespace

int64_t bf16_wgmma_launches() {
  return g_launches.load();
}

bool bf16_wgmma_type(GgmlType type) {
  return type == GgmlType::BF16 || type == GgmlType::Q4_K || type == GgmlType::Q5_K ||
         type == GgmlType::Q6_K || type == GgmlType::Q3_K;
}

bool bf16_wgmma_fits(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_tok, int min_rows) {
  return bf16_wgmma_type(type) && min_rows > 0 && n_tok >= min_rows && n_in % kSlice == 0 &&
         n_in <= kMaxIn && n_out % kBM == 0 && n_out / kBM <= 65535 && device_runs_sm90a();
}

size_t bf16_wgmma_x_bytes(int64_t n_in, int64_t n_tok) {
  return (static_cast<size_t>(n_in * n_tok) * 2 + 255) / 256 * 256;
}

void launch_bf16_wgmma_x(const TensorDesc& x, int64_t n_in, int64_t n_tok, void* xb,
                         Stream& stream) {
  const int64_t n_oct = n_tok * n_in / 8;
  stream.launch(wgmma_x_kernel, grid_1d(n_oct, 256), 256, 0, x, static_cast<int>(n_in), n_oct,
                static_cast<__nv_bfloat16*>(xb));
}

namespace {

template <class F>
void launch_format(const WgmmaGemm& g, const CUtensorMap& map, dim3 grid, Stream& stream) {
  static const bool attr = [] {
    CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm_kernel<F>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, WgTile<F>::kSmem));
    return true;
  }();
  (void)attr;
  stream.launch(wgmma_gemm_kernel<F>, grid, kThreads, WgTile<F>::kSmem, map, g.w, g.bias, g.y,
                static_cast<int>(g.n_in), static_cast<int>(g.n_tok));
}

}  // namespace

void launch_bf16_wgmma(const WgmmaGemm& g, Stream& stream) {
  // The activations as a 2-D tensor (inputs fastest, n_tok rows): boxes of kBK x kBN, 128-byte
  // swizzled; rows past n_tok read as zeros (their outputs are not stored).
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(g.n_in), static_cast<cuuint64_t>(g.n_tok)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(g.n_in) * 2};
  const cuuint32_t box[2] = {kBK, kBN}, unit[2] = {1, 1};
  const CUresult rc = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(g.xb), dims, strides, box, unit,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  T9_CHECK(rc == CUDA_SUCCESS, "wgmma GEMM: cuTensorMapEncodeTiled failed ({})",
           static_cast<int>(rc));
  const int64_t x_tiles = (g.n_tok + kBN - 1) / kBN;
  T9_CHECK(x_tiles <= 0x7ffffffe, "wgmma GEMM: {} rows exceed the launch grid", g.n_tok);
  const dim3 grid(static_cast<unsigned>((x_tiles + kCluster - 1) / kCluster * kCluster),
                  static_cast<unsigned>(g.n_out / kBM));
  switch (g.type) {
    case GgmlType::BF16:
      launch_format<bf16::B16Direct>(g, map, grid, stream);
      break;
    case GgmlType::Q4_K:
      launch_format<bf16::Q4K>(g, map, grid, stream);
      break;
    case GgmlType::Q5_K:
      launch_format<bf16::Q5K>(g, map, grid, stream);
      break;
    case GgmlType::Q6_K:
      launch_format<bf16::Q6K>(g, map, grid, stream);
      break;
    case GgmlType::Q3_K:
      launch_format<bf16::Q3K>(g, map, grid, stream);
      break;
    default:
      T9_CHECK(false, "wgmma GEMM: no kernel for {}", type_name(g.type));
  }
  ++g_launches;
}

}  // namespace t9::cuda
