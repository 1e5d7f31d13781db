// Backend::moe_down for decode-sized calls (contract in cuda_moe_gemv.cuh): the tail of a MoE
// block after its gate/up projections in two launches instead of five (GLU, matmul_id, GLU,
// matmul, moe_combine_shared). A decode step is a chain of latency-bound kernels, each costing a
// few microseconds whatever its bytes (docs/CUDA.md stages 19-21), and this chain runs once per
// MoE layer (40 times a step on Qwen3.5-35B-A3B).
//
//   1. moe_glu_codes_kernel: silu(gate) * up for every routed pair's row and every shared row,
//      rounded to int8 codes per 32 elements (quantize_value: the codes the separate GLU's
//      DerivedCache hands the down projection). The floats are not stored: nothing reads them.
//   2. moe_down_kernel: grid (blocks of output rows, token). A row group of kSplit warps owns
//      kRows = 32 / kLanes output rows; each of its warps stages those rows of its share of the
//      token's experts (and of the shared expert) into shared memory at once, then computes each
//      term's dot in the canonical order (short_row_dot: gemv_short_kernel's arithmetic, the
//      composed route's one-row GEMV), and the group's first warp adds them as moe_combine /
//      moe_combine_shared do: o = w_0 y_0, then o = fma(w_j, y_j, o) in rank order, then
//      o + so * sigmoid(gate). So `out` is the composed ops' bits
//      (tests/ops/cuda_moe_down_test.cpp EqualsTheComposedOps).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_moe_gemv.cuh"
#include "backend/cuda/cuda_units.cuh"

namespace t9::cuda {
namespace {

constexpr int kGluThreads = 256;
constexpr int kDownWarps = 4;
constexpr int kMaxDownSmem = 200 << 10;

// One GLU's rows: n elements of gate and up (contiguous) and where their codes go.
struct GluCodes {
  const float* gate;
  const float* up;
  int64_t n;  // a multiple of 32: every warp holds whole 32-element blocks
  int8_t* xq;
  ActBlock* xb;
};

// Blocks [0, routed_blocks) take the routed rows, the rest the shared ones. silu(g) * u is the
// elementwise kernel's SwiGLU expression, so the codes are the separate GLU's bits.
__global__ void __launch_bounds__(kGluThreads)
    moe_glu_codes_kernel(GluCodes routed, GluCodes shared, int64_t routed_blocks) {
  pdl_enter();
  const bool sh = blockIdx.x >= routed_blocks;  // field by field: no local copy of a part
  const int64_t e =
      (static_cast<int64_t>(blockIdx.x) - (sh ? routed_blocks : 0)) * kGluThreads + threadIdx.x;
  if (e >= (sh ? shared.n : routed.n)) return;  // whole warps (n % 32 == 0)
  const float y = silu((sh ? shared.gate : routed.gate)[e]) * (sh ? shared.up : routed.up)[e];
  quantize_value(y, threadIdx.x % 32, (sh ? shared.xq : routed.xq) + (e & ~int64_t{31}),
                 (sh ? shared.xb : routed.xb) + e / 32);
}

// The down projections' operands. Term j < k of token t is expert ids[t k + j] (rows of
// row_bytes, expert_bytes apart) times codes row t k + j; term k (ws non-null) is the shared
// expert times codes row t of sq / sb.
struct MoeDownArgs {
  const uint8_t* w;
  int64_t row_bytes, expert_bytes, n_expert;
  const uint8_t* ws;  // null: no shared expert
  int64_t s_row_bytes;
  int64_t n_out, n_in, s_in, k;  // n_in, s_in: multiples of 64 (16-byte ActBlock runs)
  const int8_t* xq;
  const ActBlock* xb;
  const int8_t* sq;
  const ActBlock* sb;
  const int32_t* ids;  // [n, k]
  const float* wts;    // [n, k]
  const float* sgate;  // [n, gate_cols]
  int64_t gate_cols;   // 1 or n_out
  float* out;          // [n, n_out]
  int64_t slot;        // shared bytes per staged weight run (kRows rows + skew)
  bool shared_early;   // ws is uploaded weights: staged before the dependent-launch wait
  bool bulk_rows;      // each run by one bulk copy (lane 0) on the warp's mbarrier (SliceArgs')
  unsigned* err;
};

// Shared memory of a block: the token's codes and ActBlocks of every term (routed codes k n_in,
// their ActBlocks, the shared codes, theirs: the four contiguous runs of the scratch), then each
// warp's weight runs (terms x slot), then each warp's mbarrier (MoeDownArgs::bulk_rows).
struct DownSmem {
  int64_t rq, rb, sq, sb;  // byte offsets of the four runs
  int64_t x_bytes;         // their total, a multiple of 16
  __host__ __device__ DownSmem(int64_t k, int64_t n_in, int64_t s_in) {
    rq = 0;
    rb = rq + k * n_in;
    sq = rb + k * n_in / 32 * static_cast<int64_t>(sizeof(ActBlock));
    sb = sq + s_in;
    x_bytes = sb + s_in / 32 * static_cast<int64_t>(sizeof(ActBlock));
  }
};

// `bytes` (a multiple of 16, both ends 16-byte aligned) from src into dst by the whole block.
__device__ __forceinline__ void stage_block(const void* src, int64_t bytes, uint8_t* dst) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    cp_async16(dst + 16 * i, s + 16 * i);
}

// Rows of a weight matrix (`bytes` from src) into buf by one warp, from the 16-byte boundary
// below (gemv_short_kernel's staging: the data sits `skew` bytes in): per-lane cp.async, or with
// bar one bulk copy by lane 0 whose bytes bar's phase then waits for (its arrival is the
// caller's, mbar_arrive). Returns the skew.
__device__ __forceinline__ int stage_rows(const uint8_t* src, int64_t bytes, uint8_t* buf, int lane,
                                          uint64_t* bar) {
  const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
  const int64_t n16 = (skew + bytes + 15) / 16;
  if (bar != nullptr) {
    if (lane == 0) {
      mbar_expect_tx(bar, static_cast<unsigned>(16 * n16));
      bulk_copy(buf, src - skew, static_cast<unsigned>(16 * n16), bar);
    }
    return skew;
  }
  for (int64_t i = lane; i < n16; i += 32) cp_async16(buf + 16 * i, src - skew + 16 * i);
  return skew;
}

// One round trip for the ids and weights (lane r holds rank r's), one for everything staged:
// the first form, which read each term's ids and codes as it came to it, paid an L2 round trip
// per term and lost to the composed ops at 8 tokens (run 137).
//
// kSplit term groups: the block has kDownWarps row groups of kSplit warps each, and warp s of a
// row group stages and multiplies only the terms q with q % kSplit == s (term k: the shared
// expert), each into its own slot; the dots go through shared memory to warp 0 of the group,
// which adds them in rank order as the one-warp form does (the same operations on the same
// values: the same bits). With kSplit 1 a warp owns all of its rows' terms one after another:
// ncu (run 189) measured that form at 9.9 us for 10 MB on the 35B's shape, ~2,700 instructions
// per warp at 5.3 cycles each with 7.7 warps per SM: a chain of dependent instructions (each
// term's 16-step ordered sum), not the weights' arrival (run 188 staged them ~5 us earlier and
// the kernel still ended ~8.5 us after its wait).
template <GgmlType T, int kLanes, int kSplit>
__global__ void __launch_bounds__(32 * kDownWarps * kSplit) moe_down_kernel(MoeDownArgs a) {
  constexpr int kRows = 32 / kLanes;
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int rg = warp % kDownWarps, sg = warp / kDownWarps;  // row group, term group
  const int g = lane / kLanes, j = lane % kLanes;
  const int64_t t = blockIdx.y;
  const int64_t o = (static_cast<int64_t>(blockIdx.x) * kDownWarps + rg) * kRows;
  const int64_t rows = o < a.n_out ? min64(kRows, a.n_out - o) : 0;  // 0: an idle warp
  const bool shared = a.ws != nullptr, row_ok = g < rows;
  const int k = static_cast<int>(a.k), terms = k + (shared ? 1 : 0);
  const int slots = (terms + kSplit - 1) / kSplit;  // a warp's term q sits in slot q / kSplit
  const DownSmem L(a.k, a.n_in, a.s_in);
  uint8_t* bufs = smem + L.x_bytes + static_cast<int64_t>(warp) * slots * a.slot;
  const bool mine_shared = shared && k % kSplit == sg;
  uint8_t* s_buf = bufs + k / kSplit * a.slot;
  uint64_t* bar = nullptr;  // bulk copies: this warp's mbarrier, one phase
  if (a.bulk_rows && rows > 0) {
    bar =
        reinterpret_cast<uint64_t*>(smem + L.x_bytes + kDownWarps * kSplit * slots * a.slot) + warp;
    if (lane == 0) mbar_init(bar);
    __syncwarp();
  }
  int s_skew = 0;
  if (mine_shared && a.shared_early && rows > 0)
    s_skew = stage_rows(a.ws + o * a.s_row_bytes, rows * a.s_row_bytes, s_buf, lane, bar);
  pdl_enter();  // ids, weights, codes and the gate are the predecessors' outputs
  const int32_t my_id = lane < k ? a.ids[t * k + lane] : 0;
  const float my_w = lane < k ? a.wts[t * k + lane] : 0.0f;
  const float gv =
      shared && row_ok ? a.sgate[t * a.gate_cols + (a.gate_cols == 1 ? 0 : o + g)] : 0.0f;
  stage_block(a.xq + t * k * a.n_in, L.rb - L.rq, smem + L.rq);
  stage_block(a.xb + t * k * (a.n_in / 32), L.sq - L.rb, smem + L.rb);
  if (shared) {
    stage_block(a.sq + t * a.s_in, L.sb - L.sq, smem + L.sq);
    stage_block(a.sb + t * (a.s_in / 32), L.x_bytes - L.sb, smem + L.sb);
    if (mine_shared && !a.shared_early && rows > 0)
      s_skew = stage_rows(a.ws + o * a.s_row_bytes, rows * a.s_row_bytes, s_buf, lane, bar);
  }
  // Every routed run in flight at once. A bad id stages nothing: its term is left out and
  // flagged, as the composed route's select_pair leaves its pair.
  for (int r = sg; r < k; r += kSplit) {
    const int32_t e = __shfl_sync(0xffffffffu, my_id, r);
    if (e < 0 || e >= a.n_expert) {
      if (lane == 0 && rows > 0) atomicOr(a.err, kErrMoeId);
      continue;
    }
    if (rows > 0)
      stage_rows(a.w + e * a.expert_bytes + o * a.row_bytes, rows * a.row_bytes,
                 bufs + r / kSplit * a.slot, lane, bar);
  }
  if (bar != nullptr && lane == 0) mbar_arrive(bar);  // every run's bytes declared
  cp_async_commit();
  cp_async_wait_0();
  __syncthreads();  // the codes were staged by the whole block
  if (kSplit == 1 && rows == 0) return;
  if (bar != nullptr) mbar_wait(bar, 0);
  const auto* xq = reinterpret_cast<const int8_t*>(smem + L.rq);
  const auto* xb = reinterpret_cast<const ActBlock*>(smem + L.rb);
  const int n_units = static_cast<int>(a.n_in / Unit<T>::kElems);
  // Term r's dot for this lane group's row (0 for a left-out term: short_row_dot of no row).
  const auto routed_dot = [&](int r) {
    const int32_t e = __shfl_sync(0xffffffffu, my_id, r);
    const bool ok = row_ok && e >= 0 && e < a.n_expert;
    const uint8_t* src = a.w + (ok ? e : 0) * a.expert_bytes + o * a.row_bytes;
    const int skew = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
    return short_row_dot<T, kLanes>(
        ok ? bufs + r / kSplit * a.slot + skew + g * a.row_bytes : nullptr, xq + r * a.n_in,
        xb + r * (a.n_in / 32), n_units, lane);
  };
  const auto shared_dot = [&] {
    return short_row_dot<T, kLanes>(row_ok ? s_buf + s_skew + g * a.s_row_bytes : nullptr,
                                    reinterpret_cast<const int8_t*>(smem + L.sq),
                                    reinterpret_cast<const ActBlock*>(smem + L.sb),
                                    static_cast<int>(a.s_in / Unit<T>::kElems), lane);
  };
  float acc = 0.0f;
  if constexpr (kSplit == 1) {
    // Two terms at a time: their dots are independent (only acc is a chain), so the second's
    // loads and dp4a issue under the first's sum.
#pragma unroll 2
    for (int r = 0; r < k; ++r) {  // moe_combine's routed_sum, in rank order
      const float wr = __shfl_sync(0xffffffffu, my_w, r);
      const float y = routed_dot(r);
      acc = r == 0 ? __fmul_rn(wr, y) : __fmaf_rn(wr, y, acc);
    }
    // moe_combine_shared: m = so * sigmoid(gate), then the routed sum + m
    if (shared) acc = __fadd_rn(acc, __fmul_rn(shared_dot(), sigmoid(gv)));
  } else {
    // ys[rg][row][term]: the dots, after the bars (16-byte aligned).
    float* ys = reinterpret_cast<float*>(smem + L.x_bytes + kDownWarps * kSplit * slots * a.slot +
                                         (kDownWarps * kSplit * 8 + 15) / 16 * 16);
    float* my_ys = ys + (rg * kRows + g) * terms;
    if (rows > 0) {
      for (int r = sg; r < k; r += kSplit) {
        const float y = routed_dot(r);
        if (j == 0) my_ys[r] = y;
      }
      if (mine_shared) {
        const float so = shared_dot();
        if (j == 0) my_ys[k] = so;
      }
    }
    __syncthreads();  // every term's dot in ys
    if (sg != 0 || rows == 0) return;
    for (int r = 0; r < k; ++r) {  // as above, from ys
      const float wr = __shfl_sync(0xffffffffu, my_w, r);
      acc = r == 0 ? __fmul_rn(wr, my_ys[r]) : __fmaf_rn(wr, my_ys[r], acc);
    }
    if (shared) acc = __fadd_rn(acc, __fmul_rn(my_ys[k], sigmoid(gv)));
  }
  if (j == 0 && row_ok) a.out[t * a.n_out + o + g] = acc;
}

bool contiguous_f32(const Tensor& t) {
  return t.valid() && t.type == GgmlType::F32 && t.is_contiguous();
}

// Tokens up to which the call is fused (TEMPO9_CUDA_MOE_DOWN_TOKENS, read once). A warp owns its
// rows' terms one after another, so the kernel wins while its grid (256 blocks per token on the
// 35B) is about one wave and the saved launches dominate: 35B single decode 333 -> 344 tok/s
// (run 138), but at 7-8 tokens (3-4 waves) the composed route's by-pair GEMVs were faster: 8
// agents' ITL 7.3 -> 7.5 ms (runs 137-138).
int64_t fused_tokens() {
  static const int64_t n = [] {
    const char* e = std::getenv("TEMPO9_CUDA_MOE_DOWN_TOKENS");
    return e != nullptr ? std::atoll(e) : int64_t{2};
  }();
  return n;
}

// The kernel's shape checks; anything else goes to the composed ops (which report bad shapes).
bool takes(const Backend::MoeDown& m) {
  static const bool off = env_off("TEMPO9_CUDA_FUSE_MOE_DOWN");
  const Tensor& w = m.down_exps;
  if (off || !w.valid() || w.ne[3] != 1 || m.ids.type != GgmlType::I32 || !m.ids.is_contiguous() ||
      m.ids.ne[2] != 1 || m.ids.ne[3] != 1)
    return false;
  const int64_t k = m.ids.ne[0], n = m.ids.ne[1], f = w.ne[0], d = w.ne[1];
  const bool shared = m.down_shexp.valid();
  // k <= 32: a lane per rank. n_in % 64: the ActBlock runs are whole 16-byte granules.
  if (k < 1 || k + 1 > kMoeDownTerms || k > 32 || n < 1 || n > fused_tokens() || f % 64 != 0 ||
      w.nb[1] != static_cast<size_t>(row_bytes(w.type, f)))
    return false;
  for (const Tensor* t : {&m.eg, &m.eu})
    if (!contiguous_f32(*t) || t->ne[0] != f || t->ne[1] != k || t->ne[2] != n || t->ne[3] != 1)
      return false;
  if (!contiguous_f32(m.wts) || m.wts.ne[0] != k || m.wts.n_rows() != n || !contiguous_f32(m.out) ||
      m.out.ne[0] != d || m.out.n_rows() != n)
    return false;
  if (!shared) return true;
  const Tensor& ws = m.down_shexp;
  const int64_t fs = ws.ne[0];
  if (ws.type != w.type || ws.ne[1] != d || ws.ne[2] != 1 || ws.ne[3] != 1 || fs % 64 != 0 ||
      ws.nb[1] != static_cast<size_t>(row_bytes(ws.type, fs)) ||
      reinterpret_cast<uintptr_t>(base_ptr(ws)) % 2 != 0)
    return false;
  for (const Tensor* t : {&m.sg, &m.su})
    if (!contiguous_f32(*t) || t->ne[0] != fs || t->n_rows() != n) return false;
  return contiguous_f32(m.sgate) && m.sgate.n_rows() == n &&
         (m.sgate.ne[0] == 1 || m.sgate.ne[0] == d);
}

template <GgmlType T>
bool run(const Backend::MoeDown& m, Scratch& scratch, unsigned* err, Stream& stream,
         bool shared_early, int split) {
  using U = Unit<T>;
  const Tensor& w = m.down_exps;
  const bool shared = m.down_shexp.valid();
  const int64_t k = m.ids.ne[0], n = m.ids.ne[1], f = w.ne[0], d = w.ne[1];
  const int64_t fs = shared ? m.down_shexp.ne[0] : 0;
  const int64_t units = f / U::kElems, s_units = fs / U::kElems;
  if (f % U::kElems != 0 || fs % U::kElems != 0 || std::max(units, s_units) > 16) return false;
  const auto go = [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    constexpr int kRows = 32 / kLanes;
    MoeDownArgs a{};
    a.w = reinterpret_cast<const uint8_t*>(base_ptr(w));
    a.row_bytes = static_cast<int64_t>(w.nb[1]);
    a.expert_bytes = static_cast<int64_t>(w.nb[2]);
    a.n_expert = w.ne[2];
    a.ws = shared ? reinterpret_cast<const uint8_t*>(base_ptr(m.down_shexp)) : nullptr;
    a.s_row_bytes = shared ? static_cast<int64_t>(m.down_shexp.nb[1]) : 0;
    a.n_out = d, a.n_in = f, a.s_in = fs, a.k = k;
    // Shared bytes per staged run: kRows rows plus up to 15 bytes of skew, rounded to 16.
    a.slot = (kRows * std::max(a.row_bytes, a.s_row_bytes) + 15 + 16) & ~int64_t{15};
    // The term groups' layout (moe_down_kernel): codes, each warp's slots, the warps' mbarriers,
    // then with kSplit > 1 the dots (16-byte aligned).
    const int64_t terms = k + (shared ? 1 : 0), warps = kDownWarps * split;
    const int64_t slots = (terms + split - 1) / split;
    int64_t smem = DownSmem(k, f, fs).x_bytes + warps * slots * a.slot +
                   (warps * int64_t{sizeof(uint64_t)} + 15) / 16 * 16;
    if (split > 1) smem += kDownWarps * kRows * terms * int64_t{sizeof(float)};
    if (smem > kMaxDownSmem) return false;  // before anything is enqueued

    // Codes: the routed rows, then the shared rows (256-byte aligned parts).
    const int64_t pairs = n * k;
    const auto align = [](int64_t b) { return (b + 255) / 256 * 256; };
    const int64_t rq = align(pairs * f), rb = align(pairs * f / 32 * 8);
    const int64_t sq = align(n * fs), sb = n * fs / 32 * 8;
    auto* base =
        static_cast<uint8_t*>(scratch.reserve(static_cast<size_t>(rq + rb + sq + sb), stream));
    const GluCodes routed{reinterpret_cast<const float*>(base_ptr(m.eg)),
                          reinterpret_cast<const float*>(base_ptr(m.eu)), pairs * f,
                          reinterpret_cast<int8_t*>(base), reinterpret_cast<ActBlock*>(base + rq)};
    const GluCodes sh{shared ? reinterpret_cast<const float*>(base_ptr(m.sg)) : nullptr,
                      shared ? reinterpret_cast<const float*>(base_ptr(m.su)) : nullptr, n * fs,
                      reinterpret_cast<int8_t*>(base + rq + rb),
                      reinterpret_cast<ActBlock*>(base + rq + rb + sq)};
    const int64_t routed_blocks = (routed.n + kGluThreads - 1) / kGluThreads;
    const int64_t shared_blocks = (sh.n + kGluThreads - 1) / kGluThreads;
    stream.launch(moe_glu_codes_kernel, dim3(static_cast<unsigned>(routed_blocks + shared_blocks)),
                  kGluThreads, 0, routed, sh, routed_blocks);

    a.xq = routed.xq, a.xb = routed.xb, a.sq = sh.xq, a.sb = sh.xb;
    a.ids = reinterpret_cast<const int32_t*>(base_ptr(m.ids));
    a.wts = reinterpret_cast<const float*>(base_ptr(m.wts));
    a.sgate = shared ? reinterpret_cast<const float*>(base_ptr(m.sgate)) : nullptr;
    a.gate_cols = shared ? m.sgate.ne[0] : 1;
    a.out = reinterpret_cast<float*>(base_ptr(m.out));
    a.shared_early = shared && shared_early;
    a.bulk_rows = bulk_rows_on(BulkForm::kShort);
    a.err = err;
    const int64_t row_blocks = (d + kDownWarps * kRows - 1) / (kDownWarps * kRows);
    const auto launch = [&](auto split_c) {
      constexpr int kSplit = decltype(split_c)::value;
      constexpr auto kernel = moe_down_kernel<T, kLanes, kSplit>;
      static const bool attr = [] {
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        kMaxDownSmem));
        return true;
      }();
      (void)attr;
      stream.launch(kernel, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(n)),
                    kDownWarps * kSplit * 32, static_cast<size_t>(smem), a);
    };
    switch (split) {
      case 1:
        launch(std::integral_constant<int, 1>{});
        break;
      case 2:
        launch(std::integral_constant<int, 2>{});
        break;
      case 4:
        launch(std::integral_constant<int, 4>{});
        break;
      default:
        launch(std::integral_constant<int, 3>{});
    }
    return true;
  };
  // As gemv_short_kernel's choice (try_short): 16 lanes for rows of 9..16 units, else 8.
  if (std::max(units, s_units) > 8) return go(std::integral_constant<int, 16>{});
  return go(std::integral_constant<int, 8>{});
}

}  // namespace

bool launch_moe_glu_codes(const Backend::MoeDown& m, Scratch& scratch, Stream& stream,
                          RoundedX& codes) {
  const int64_t f = m.eg.ne[0], k = m.eg.ne[1], n = m.eg.ne[2], pairs = n * k;
  if (f % 32 != 0 || m.eg.ne[3] != 1 || !m.down_shexp.valid() || m.sg.ne[0] != f) return false;
  for (const Tensor* t : {&m.eg, &m.eu})
    if (!contiguous_f32(*t) || t->ne != m.eg.ne) return false;
  for (const Tensor* t : {&m.sg, &m.su})
    if (!contiguous_f32(*t) || t->ne[0] != f || t->n_rows() != n) return false;
  // Codes of every row (the pairs', then the tokens'), then their ActBlocks in the same order.
  const int64_t rows = pairs + n;
  const int64_t qb = (rows * f + 255) / 256 * 256;
  auto* base =
      static_cast<uint8_t*>(scratch.reserve(static_cast<size_t>(qb + rows * f / 32 * 8), stream));
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* xb = reinterpret_cast<ActBlock*>(base + qb);
  const GluCodes routed{reinterpret_cast<const float*>(base_ptr(m.eg)),
                        reinterpret_cast<const float*>(base_ptr(m.eu)), pairs * f, xq, xb};
  const GluCodes sh{reinterpret_cast<const float*>(base_ptr(m.sg)),
                    reinterpret_cast<const float*>(base_ptr(m.su)), n * f, xq + pairs * f,
                    xb + pairs * f / 32};
  const int64_t routed_blocks = (routed.n + kGluThreads - 1) / kGluThreads;
  const int64_t shared_blocks = (sh.n + kGluThreads - 1) / kGluThreads;
  stream.launch(moe_glu_codes_kernel, dim3(static_cast<unsigned>(routed_blocks + shared_blocks)),
                kGluThreads, 0, routed, sh, routed_blocks);
  codes = RoundedX{xq, xb};
  return true;
}

bool launch_moe_down(const Backend::MoeDown& m, Scratch& scratch, unsigned* err, Stream& stream,
                     bool shared_early, int split) {
  T9_CHECK(split >= 1 && split <= 4, "moe_down: split {} (1-4)", split);
  if (!takes(m)) return false;
  bool done = false;
  const bool typed = with_sliced_type(m.down_exps, [&](auto t) {
    done = run<decltype(t)::value>(m, scratch, err, stream, shared_early, split);
  });
  return typed && done;
}

}  // namespace t9::cuda
