// The decode row's attention by whole chunks (CudaBackendConfig::attn_row_chunk): a split call
// whose tiles hold at most 16 (row, q head) slots (one decode row of a GQA group, or two to four
// prefill rows at G = 4; head_dim 128 / 256, no soft-capping, no cohorts) runs one block of 16
// warps per (row tile, KV head, 128-key chunk), each block writing its chunk's partial for the
// combine kernel, with the plain form's bits. With CudaBackendConfig::attn_row_chunk_one the
// unsplit calls over one chunk (contexts up to 128 keys) run here too, as a split call of one
// chunk whose block folds its own partial (kFold below).
//
// Why (ncu run 298, the 35B's decode row over ~515 keys, cuda_flash_attention.cu's row-warp
// form): each of the ten live blocks' four warps ran ~4,200 instructions at 6.7 cycles each, one
// warp per scheduler, for ~20 us: four 32-key tiles walked one after another, each a chain of
// S, a max exchange, the probabilities' exchange and O, then the row's q rows normed and rotated
// by the same four warps in turn. Only the running softmax is serial, and it is cheap:
//   - S of every key tile of the chunk is independent of the running max: warp w computes the
//     scores of key n-tile w (keys 8w .. 8w + 7 of the chunk), all 16 at once;
//   - the running max after tile t is the max of the tile maxima up to t (fmaxf: exact, any
//     order), so every warp knows its tile's max and its probabilities exp(s - m_t) right after
//     one exchange of the n-tiles' maxima;
//   - O's tile-by-tile chain (scale by corr_t, then P_t V_t by mma in the plain form's k-step
//     order) runs per 16-dim slice of the head on its own warp, over the chunk's tiles in order;
//     l's chain likewise (its sums in the plain form's order: a thread's keys n-tile by n-tile,
//     then its quad).
// Every value is then the plain form's: the same products, the same roundings in the same order
// (cuda_flash_attention.cu's header has the rules). The whole chunk's K and V are staged at once
// (one L2 / HBM round trip instead of two), keys of earlier steps before the dependent-launch
// wait, and FlashPrep's rows (q slots, the new k and v) are normed and rotated one warp each, in
// parallel.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include "backend/cuda/cuda_flash_row.cuh"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_flash_fold.cuh"
#include "backend/cuda/cuda_flash_mma.cuh"
#include "backend/cuda/cuda_flash_tiles.cuh"

namespace t9::cuda {
namespace {

constexpr int kWarps = 16, kThreads = 32 * kWarps;
constexpr int kRowSlots = 16;  // (query row, q head) slots a block serves: one mma row block
static_assert(kChunkKeys / 8 == kWarps, "one 8-key n-tile of the chunk per warp");

template <int HD>
struct RowChunkShape {
  static constexpr int kTileKeys = HD == 256 ? 32 : 64;  // the plain form's tiles: its bits
  static constexpr int kTiles = kChunkKeys / kTileKeys;
  static constexpr int kStride = HD + 8;            // halves per staged row (+16 B: banks)
  static constexpr int kPStride = kChunkKeys + 8;   // floats per row of probabilities
  static constexpr int kQ = kRowSlots * kStride;    // halves
  static constexpr int kKV = kChunkKeys * kStride;  // halves, one of K and V
  static constexpr int kHalvesBytes = 2 * (kQ + 2 * kKV);
  static constexpr int kPBytes = kRowSlots * kPStride * 4;
  static constexpr int kMaxBytes = kWarps * kRowSlots * 4;  // the n-tiles' row maxima
  static constexpr int kBytes = kHalvesBytes + kPBytes + kMaxBytes + kChunkKeys * 8;
  static_assert(kHalvesBytes % 16 == 0 && kPBytes % 16 == 0 && kMaxBytes % 16 == 0);
};

// Block (row tile x, KV head y, chunk z): chunk z's partial [acc (head_dim, part_pos order), m,
// l] of each of its slots to part[((row * n_head + head) * n_chunks + z) * part_stride(head_dim)],
// as flash_attention_kernel<HD, true, false, *> writes it; with FlashArgs::counters the row's
// last block folds them into out (below) and the call launches no combine. kFold (a.counters
// set) is a template flag: the fold's registers (fold_row_warp: 103-125 a thread against 60-72
// without) would otherwise fill an SM's register file beside the successor's early blocks.
template <int HD, bool kFold>
__global__ void __launch_bounds__(kThreads, 1)
    flash_row_chunk_kernel(FlashArgs a, int64_t n_rows, int n_chunks, float* __restrict__ part) {
  // No pdl_enter() here: the tile's bookkeeping and the keys of earlier steps come before the
  // wait, as in flash_attention_kernel.
  using Lay = RowChunkShape<HD>;
  constexpr int S = Lay::kStride, kPS = Lay::kPStride, kTileKeys = Lay::kTileKeys;
  constexpr int kKS = HD / 16;            // 16-dim k-steps of Q K^T
  constexpr int kSegs = HD / 8;           // 16-byte segments per K/V row
  constexpr int kTileNK = kTileKeys / 8;  // 8-key n-tiles (warps of S) per tile
  constexpr int kNTw = 2;                 // O's 8-dim n-tiles per warp
  constexpr int kOWarps = HD / 8 / kNTw;  // warps with a slice of O: 16 at 256, 8 at 128
  static_assert(kOWarps <= kWarps);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* const sq = reinterpret_cast<__half*>(smem_raw);
  __half* const sk = sq + Lay::kQ;
  __half* const sv = sk + Lay::kKV;
  float* const s_p = reinterpret_cast<float*>(smem_raw + Lay::kHalvesBytes);      // [slot][key]
  float* const s_nmax = s_p + kRowSlots * kPS;                                    // [warp][slot]
  int64_t* const sofs = reinterpret_cast<int64_t*>(s_nmax + kWarps * kRowSlots);  // [key]

  const int G = a.group.d;
  const int kvh = blockIdx.y, c = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  __shared__ int s_qrow[kRowSlots], s_pos[kRowSlots];
  RowTile tile;
  if (!find_tile(a.seqs, a.n_seqs, a.tile_rows, n_rows, blockIdx.x, tile, a.err)) return;
  const AttnSeq s = a.seqs[tile.seq];
  const int pos_first = s.n_past + tile.row0;
  const int key_hi = pos_first + tile.n_rows - 1;
  const int key_lo = a.window > 0 ? max(0, pos_first - a.window + 1) : 0;
  if (key_hi / kChunkKeys >= n_chunks) atomicOr(a.err, kErrSeqRows);  // max_ctx too small
  if (c < key_lo / kChunkKeys || c > key_hi / kChunkKeys) return;
  const FlashPrep& pp = a.prep;
  const bool prep = pp.q_from.base != nullptr;
  if (prep && s.n_q != 1) {  // FlashPrep serves decode rows only (the launcher's condition)
    atomicOr(a.err, kErrSeqRows);
    return;
  }
  const int n_tile_rows = tile.n_rows, table_off = s.block_table_offset;
  // Keys before old_end were written by earlier steps (this launch's predecessors write only
  // the rows' own positions), so they may load before the wait.
  const int old_end = s.n_past;
  const bool store_new = prep && c == s.n_past / kChunkKeys;  // this block stores k and v first
  const int new_qrow = s.q_begin;
  if (tid < n_tile_rows) {
    s_qrow[tid] = s.q_begin + tile.row0 + tid;
    s_pos[tid] = pos_first + tid;
  }
  // The chunk's tiles the plain form walks (absolute tile indices, inclusive).
  const int k0 = c * kChunkKeys;
  const int t_begin = max(key_lo / kTileKeys, c * Lay::kTiles);
  const int t_end = min(key_hi / kTileKeys, c * Lay::kTiles + Lay::kTiles - 1);

  // Key k0 + tid's byte offset in the pools, -1 outside the rows' range or behind a bad table
  // entry (flagged): flash_attention_kernel's key_offsets for the whole chunk.
  if (tid < kChunkKeys) sofs[tid] = key_offset(a, table_off, key_lo, key_hi, k0 + tid);
  // FlashPrep, before the wait: the norm weights (model weights) and RoPE's (cos, sin) per pair
  // at the row's position (the step's uploaded positions).
  __shared__ float s_prep[kWarps][HD];  // a warp's head row (norm_rope_row)
  __shared__ float s_wq[HD], s_wk[HD];
  __shared__ float2 s_cs[HD / 2];
  if (prep) {
    for (int i = tid; i < HD; i += kThreads) {
      s_wq[i] = pp.norm != 0 ? pp.wq[i] : 0.0f;
      s_wk[i] = pp.norm != 0 ? pp.wk[i] : 0.0f;
    }
    const int32_t position = pp.positions[new_qrow];
    for (int kk = tid; kk < pp.rc.n_rot / 2; kk += kThreads) {
      const RopePair rp = rope_pair(pp.rc, kk, position);
      s_cs[kk] = make_float2(rp.c, rp.s);
    }
  }
  __syncthreads();  // sofs, s_qrow / s_pos, the prep's tables

  // Thread tid moves 16-byte segment tid % kSegs of keys tid / kSegs + j kStep, of K, then of
  // V, in two commit groups. The first call (late false) takes the keys of earlier steps and the
  // zero rows, the second this step's keys (written by the predecessors or by store_new_kv).
  constexpr int kStep = kThreads / kSegs;
  const int seg = tid % kSegs, key0 = tid / kSegs;
  const char* const k_base = a.k_cache + kvh * a.nb1 + seg * 16;
  const char* const v_base = a.v_cache + kvh * a.nb1 + seg * 16;
  const auto issue_rows = [&](bool late, const char* base, __half* dst) {
#pragma unroll
    for (int j = key0; j < kChunkKeys; j += kStep) {
      const int64_t off = sofs[j];
      if ((off >= 0 && k0 + j >= old_end) == late)
        cp_async16_zfill(dst + j * S + seg * 8, off >= 0 ? base + off : base, off >= 0);
    }
    cp_commit();
  };
  const auto issue = [&](bool late) {
    issue_rows(late, k_base, sk);
    issue_rows(late, v_base, sv);
  };
  const bool early = a.early_keys != 0;
  if (early) issue(false);
  pdl_enter();
  if (!early) issue(false);

  // FlashPrep: the row's rotated k and its v into the pools, by the two warps after the q slots'
  // (warps 0 and 1 when the slots take all 16), before the loads of this step's keys.
  const int n_valid = n_tile_rows * G;
  const int kv_warp = n_valid < kWarps - 1 ? n_valid : 0;
  if (store_new && (warp == kv_warp || warp == kv_warp + 1)) {
    int64_t slot;
    if (!pool_slot(a, table_off, old_end, slot)) {
      if (lane == 0) atomicOr(a.err, kErrKvSlot);
    } else {
      const float* src;
      if (warp == kv_warp) {  // k: normed and rotated as qk_norm_rope_kernel does
        norm_rope_row(reinterpret_cast<const float*>(pp.k.row(kvh, new_qrow)), HD, s_wk,
                      pp.norm != 0, pp.eps, pp.weight_bias, pp.rc, 0, s_prep[warp], lane, s_cs);
        src = s_prep[warp];
      } else {
        src = reinterpret_cast<const float*>(pp.v.row(kvh, new_qrow));
      }
      __half* dst = reinterpret_cast<__half*>(
          const_cast<char*>(warp == kv_warp ? a.k_cache : a.v_cache) + slot * a.nb2 + kvh * a.nb1);
      for (int i = lane; i < HD; i += 32) dst[i] = __float2half_rn(src[i]);
    }
  }
  if (store_new) __syncthreads();  // the new rows are in the pools before their loads (uniform)
  issue(true);

  // Stage Q (f16), a slot a warp; slots past the tile's rows are zeros.
  if (prep) {  // normed and rotated first (norm_rope_row: qk_norm_rope_kernel's bits)
    const int sl = warp;
    __half* dst = sq + sl * S;
    if (sl < n_valid) {
      const int sg = a.group.div(sl), qr = s_qrow[sg];
      norm_rope_row(reinterpret_cast<const float*>(pp.q_from.row(kvh * G + sl - sg * G, qr)), HD,
                    s_wq, pp.norm != 0, pp.eps, pp.weight_bias, pp.rc, 0, s_prep[warp], lane, s_cs);
      for (int i = 2 * lane; i < HD; i += 64)
        *reinterpret_cast<uint32_t*>(dst + i) = pack_f16(s_prep[warp][i], s_prep[warp][i + 1]);
    } else {
      for (int i = 8 * lane; i < HD; i += 256) *reinterpret_cast<uint4*>(dst + i) = uint4{};
    }
  } else {
    for (int r = tid; r < kRowSlots * kSegs; r += kThreads) {
      const int sl = r / kSegs, d0 = (r % kSegs) * 8;
      const float* qr = nullptr;
      if (sl < n_valid) {
        const int sg = a.group.div(sl);
        qr = reinterpret_cast<const float*>(a.q.row(kvh * G + sl - sg * G, s_qrow[sg])) + d0;
      }
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)  // scalar loads: q rows may be views at any 4-byte offset
        v[j] = qr != nullptr ? qr[j] : 0.0f;
      *reinterpret_cast<uint4*>(sq + sl * S + d0) = make_uint4(
          pack_f16(v[0], v[1]), pack_f16(v[2], v[3]), pack_f16(v[4], v[5]), pack_f16(v[6], v[7]));
    }
  }

  // This thread's two fragment rows (slots lane / 4 and + 8): position, window start and output
  // row (-1: no such slot).
  int my_pos[2], my_lo[2], my_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int sl = lane / 4 + 8 * h;
    my_row[h] = -1;
    my_pos[h] = -1;
    my_lo[h] = 0;
    if (sl < n_valid) {
      const int sg = a.group.div(sl);
      my_pos[h] = s_pos[sg];
      my_lo[h] = a.window > 0 ? max(0, my_pos[h] - a.window + 1) : 0;
      my_row[h] = s_qrow[sg] * a.n_head + kvh * G + sl - sg * G;
    }
  }

  cp_wait<1>();     // K has landed (both groups; V's second may still be in flight)
  __syncthreads();  // and Q is staged
  // S for key n-tile `warp`: the plain form's mma chain over the same k-steps, then scaled and
  // masked as there; its row maxima to s_nmax.
  const int t_w = (k0 + 8 * warp) / kTileKeys;  // the tile of this warp's keys
  const bool s_live = t_w >= t_begin && t_w <= t_end;
  float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (s_live) {
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks) {
      uint32_t qa[4], kb[2];
      ldmatrix_x4(qa, sq + (lane % 16) * S + ks * 16 + (lane / 16) * 8);
      ldmatrix_x2(kb, sk + (8 * warp + lane % 8) * S + ks * 16 + 8 * ((lane / 8) % 2));
      mma_f16(sc, qa, kb[0], kb[1]);
    }
  }
  float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int h = i / 2;
    const int kp = k0 + 8 * warp + 2 * (lane % 4) + i % 2;
    float v = __fmul_rn(sc[i], a.scale);
    if (kp > my_pos[h] || kp < my_lo[h]) v = -INFINITY;
    sc[i] = v;
    tmax[h] = fmaxf(tmax[h], v);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
    tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
    if (lane % 4 == 0) s_nmax[warp * kRowSlots + lane / 4 + 8 * h] = tmax[h];
  }
  __syncthreads();
  // The tile's max per row: its n-tiles' (fmaxf: exact, any order).
  const auto tile_max = [&](int t, int h) {
    const int w0 = (t - c * Lay::kTiles) * kTileNK;
    float tm = -INFINITY;
#pragma unroll
    for (int w = 0; w < kTileNK; ++w)
      tm = fmaxf(tm, s_nmax[(w0 + w) * kRowSlots + lane / 4 + 8 * h]);
    return tm;
  };
  if (s_live) {  // p = exp(s - m_t), m_t the running max after this warp's tile
    float m[2] = {-INFINITY, -INFINITY};
    for (int t = t_begin; t <= t_w; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) m[h] = fmaxf(m[h], tile_max(t, h));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_arg = m[h] == -INFINITY ? 0.0f : m[h];  // (the plain form's, branch-free)
      *reinterpret_cast<float2*>(s_p + (lane / 4 + 8 * h) * kPS + 8 * warp + 2 * (lane % 4)) =
          make_float2(expf(__fsub_rn(sc[2 * h], m_arg)), expf(__fsub_rn(sc[2 * h + 1], m_arg)));
    }
  }
  // O's n-tiles nt0, nt0 + 1 and the row sums, tile by tile in the plain form's order, then
  // the chunk's partial.
  const auto chunk_out = [&](int nt0) {
    float acc[kNTw][4];
#pragma unroll
    for (int n = 0; n < kNTw; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    for (int t = t_begin; t <= t_end; ++t) {
      const int tk0 = (t - c * Lay::kTiles) * kTileKeys;  // the tile's first key in the chunk
      float corr[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float mn = fmaxf(m[h], tile_max(t, h));
        corr[h] = expf(mn == -INFINITY ? 0.0f : __fsub_rn(m[h], mn));
        m[h] = mn;
      }
      float pf[kTileNK][4];
      float tsum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int n = 0; n < kTileNK; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 v = *reinterpret_cast<const float2*>(s_p + (lane / 4 + 8 * h) * kPS + tk0 +
                                                            n * 8 + 2 * (lane % 4));
          pf[n][2 * h] = v.x;
          pf[n][2 * h + 1] = v.y;
          tsum[h] = __fadd_rn(__fadd_rn(tsum[h], v.x), v.y);
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tsum[h] = __fadd_rn(tsum[h], __shfl_xor_sync(0xffffffffu, tsum[h], 1));
        tsum[h] = __fadd_rn(tsum[h], __shfl_xor_sync(0xffffffffu, tsum[h], 2));
        l[h] = __fadd_rn(__fmul_rn(l[h], corr[h]), tsum[h]);
      }
      if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {  // x 1 changes no bit
#pragma unroll
        for (int n = 0; n < kNTw; ++n) {
          acc[n][0] = __fmul_rn(acc[n][0], corr[0]);
          acc[n][1] = __fmul_rn(acc[n][1], corr[0]);
          acc[n][2] = __fmul_rn(acc[n][2], corr[1]);
          acc[n][3] = __fmul_rn(acc[n][3], corr[1]);
        }
      }
#pragma unroll
      for (int j = 0; j < kTileNK / 2; ++j) {  // 16 keys per k-step
        const uint32_t pa[4] = {pack_f16(pf[2 * j][0], pf[2 * j][1]),
                                pack_f16(pf[2 * j][2], pf[2 * j][3]),
                                pack_f16(pf[2 * j + 1][0], pf[2 * j + 1][1]),
                                pack_f16(pf[2 * j + 1][2], pf[2 * j + 1][3])};
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, sv + (tk0 + j * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * S +
                                  (nt0 / 2) * 16 + 8 * (lane / 16));
        mma_f16(acc[0], pa, vb[0], vb[1]);
        mma_f16(acc[1], pa, vb[2], vb[3]);
      }
    }
    // The partial, as the plain form stores it: one float4 per two n-tiles (part_pos), m and l by
    // warp 0.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (my_row[h] < 0) continue;
      float* pr = part + (static_cast<int64_t>(my_row[h]) * n_chunks + c) * part_stride(HD);
      *reinterpret_cast<float4*>(pr + nt0 * 8 + 4 * (lane % 4)) =
          make_float4(acc[0][2 * h], acc[0][2 * h + 1], acc[1][2 * h], acc[1][2 * h + 1]);
      if (lane % 4 == 0 && warp == 0) {
        pr[HD] = m[h];
        pr[HD + 1] = l[h];
      }
    }
  };
  // With the fold (FlashArgs::counters, CudaBackendConfig::attn_fold_rows): the block that
  // counts a row's last chunk folds the row's partials (fold_finished_rows: the combine
  // kernel's bits) instead of the combine launch. Unlike flash_attention_kernel's fold, the
  // successor is still scheduled at the wait: its blocks then pull their weights during this
  // launch, as behind the combine kernel (the late trigger is the first suspect of that fold's
  // 4-10% loss, docs/CUDA.md stages 40 and 63).
  cp_wait<0>();     // V has landed
  __syncthreads();  // and every probability is in s_p
  if (warp < kOWarps) chunk_out(warp * kNTw);
  if constexpr (kFold)
    fold_finished_rows<HD, kRowSlots, kWarps>(part, a,
                                              {c, kvh, n_chunks, n_tile_rows, s_qrow, s_pos});
}

template <int HD>
void launch_row_chunk(const FlashArgs& a, int64_t n_rows, int n_chunks, float* part, dim3 grid,
                      Stream& stream) {
  constexpr int kSmem = RowChunkShape<HD>::kBytes;
  static const bool attr_set = [] {
    for (const auto kernel : {flash_row_chunk_kernel<HD, false>, flash_row_chunk_kernel<HD, true>})
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)attr_set;
  stream.launch(
      a.counters != nullptr ? flash_row_chunk_kernel<HD, true> : flash_row_chunk_kernel<HD, false>,
      grid, kThreads, kSmem, a, n_rows, n_chunks, part);
}

}  // namespace

bool row_chunk_fits(int head_dim, int64_t n_rows, int group) {
  return (head_dim == 128 || head_dim == 256) && n_rows * group <= kRowSlots;
}

void flash_row_chunk(const FlashArgs& a, int64_t n_rows, int n_chunks, float* part, dim3 grid,
                     Stream& stream) {
  T9_CHECK(row_chunk_fits(a.head_dim, n_rows, a.group.d) && a.softcap <= 0.0f,
           "flash_row_chunk: head_dim {}, {} rows of {} heads", a.head_dim, n_rows, a.group.d);
  if (a.head_dim == 256)
    launch_row_chunk<256>(a, n_rows, n_chunks, part, grid, stream);
  else
    launch_row_chunk<128>(a, n_rows, n_chunks, part, grid, stream);
}

}  // namespace t9::cuda
