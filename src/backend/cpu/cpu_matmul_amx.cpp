// CPU matmul driver for the group order of matmul_amx.h: CpuIsa::kAmx (tile kernels) and
// CpuIsa::kAvx512Groups (the same numbers with VNNI, matmul_groups_avx512.cpp). Activation rows,
// already quantized by matmul_int, are packed once per call into tile layout in groups of 16
// (or, for the few-row decode kernels, as one group of up to 8). Threads own chunks of
// 16-weight-row groups; each group is unpacked once per block of activation groups and
// multiplied against the whole block (decode: read straight from the weights by the rows16
// kernel where it can).
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"
#include "backend/cpu/matmul_amx.h"
#include "backend/cpu/steal_ranges.h"

namespace t9 {

int cpu::amx_group(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q6_K:
      return 16;
    default:
      return 32;
  }
}

namespace {

using cpu::kAmxCols;
using cpu::kAmxRows;

// Weight rows up to this long get the next group prefetched on decode (cpu::PrefetchRange).
constexpr int64_t kShortRowBytes = 2048;

// Without tiles, up to this many activation rows take the rows16 kernel (see matmul_amx), more
// groups_dot_block's 16-column group (the figures below: rows16 then ran 4 columns a call). Zen 4
// VM, `matmul_bench avx512-groups tok=8 cold T 1t`, CPU ms per 1536 x 8960 call, groups block vs
// two rows16 calls: Q4_K 2.68 vs 2.0, Q8_0 3.42 vs 2.41, Q6_K 3.8 vs 2.9, Q4_1 3.0 vs 2.05 (16
// rows: ~2.7 vs ~4 for Q4_K).
constexpr int kRows16MaxCols = 8;

constexpr size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

// One packed activation group: tile bytes, then the dv and sv floats and the xs sums.
struct PackedLayout {
  int64_t n_in, n_g;
  int n_cols;
  size_t bytes() const { return align64(static_cast<size_t>(n_in * n_cols)) + floats() * 12; }
  size_t floats() const { return static_cast<size_t>(n_g * n_cols); }
  cpu::AmxActs at(uint8_t* base, int64_t i) const {
    uint8_t* p = base + static_cast<size_t>(i) * bytes();
    auto* dv = reinterpret_cast<float*>(p + align64(static_cast<size_t>(n_in * n_cols)));
    return {reinterpret_cast<int8_t*>(p), dv, dv + floats(),
            reinterpret_cast<int32_t*>(dv + 2 * floats())};
  }
};

// A thread's unpacked 16-row weight group (matmul_amx.h, AmxWeights) in its scratch, plus one
// row of natural-order codes that unpack writes before they are spread over the groups.
struct WeightScratch {
  int64_t n_in, n_g;
  int group;
  static constexpr size_t kFloatBlocks = 4;  // ls, mn, ls_t, mn_t
  size_t float_block() const { return align64(static_cast<size_t>(kAmxRows * n_in / 16) * 4); }
  size_t codes() const { return align64(static_cast<size_t>(kAmxRows * n_in)); }
  size_t bytes() const {
    return codes() + kFloatBlocks * float_block() + align64(static_cast<size_t>(n_in));
  }
  cpu::AmxWeights view(uint8_t* base) const {
    auto* f = reinterpret_cast<float*>(base + codes());
    const size_t nf = float_block() / 4;
    return {base, f, f + nf, n_in / 16, f + 2 * nf, f + 3 * nf};
  }
  uint8_t* row(uint8_t* base) const { return base + codes() + kFloatBlocks * float_block(); }
};

// Unpacks weight rows o0 .. o0 + nr - 1 into w (rows past nr zero-filled); with `transpose`
// also the per-group scales in [n_g][16] order for the few-rows kernel; with `bias` the codes of
// signed (wide) types +128, as unsigned bytes for groups_dot_block.
void unpack_group(const cpu::MatmulKernels& k, const Tensor& t, int64_t o0, int nr,
                  const WeightScratch& ws, const cpu::AmxWeights& w, uint8_t* row, bool transpose,
                  bool bias) {
  const int64_t n_in = ws.n_in, n_s = n_in / 16;
  const int group = ws.group;
  auto* q = const_cast<uint8_t*>(w.q);
  auto* ls = const_cast<float*>(w.ls);
  auto* mn = const_cast<float*>(w.mn);
  for (int r = 0; r < kAmxRows; ++r) {
    if (r < nr) {
      k.unpack(t.type, cpu::row_ptr(t, o0 + r), n_in, row, ls + r * n_s, mn + r * n_s);
    } else {
      std::memset(row, 0, static_cast<size_t>(n_in));
      std::fill_n(ls + r * n_s, n_s, 0.0f);
      std::fill_n(mn + r * n_s, n_s, 0.0f);
    }
    if (bias)
      for (int64_t i = 0; i < n_in; ++i) row[i] ^= 0x80;
    if (group == 32)  // fixed-size copies become single vector moves
      for (int64_t g = 0; g < ws.n_g; ++g)
        std::memcpy(q + (g * kAmxRows + r) * 32, row + g * 32, 32);
    else
      for (int64_t g = 0; g < ws.n_g; ++g)
        std::memcpy(q + (g * kAmxRows + r) * 16, row + g * 16, 16);
  }
  if (!transpose) return;
  const int gs = group / 16;
  auto* ls_t = const_cast<float*>(w.ls_t);
  auto* mn_t = const_cast<float*>(w.mn_t);
  for (int64_t g = 0; g < ws.n_g; ++g) {
    for (int r = 0; r < kAmxRows; ++r) {
      ls_t[g * kAmxRows + r] = ls[r * n_s + g * gs];
      mn_t[g * kAmxRows + r] = mn[r * n_s + g * gs];
    }
  }
}

}  // namespace

void CpuBackend::matmul_amx(const Tensor& w, const int8_t* xq, const float* xd, int64_t n_tok,
                            const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  const int group = cpu::amx_group(w.type);
  const bool narrow = !cpu::is_wide_type(w.type);
  const bool tiles = isa_ == cpu::CpuIsa::kAmx;
  // Few rows take the rows16 kernel where it has the type's decoder (with tiles: up to 4 rows,
  // then the tile kernels; without: up to kRows16MaxCols). Other types: the tile kernel with 1..4
  // columns, or without tiles a partial 16-column group through groups_dot_block (same numbers
  // either way).
  const bool rows16 = cpu::amx_rows16_supported(w.type, n_in);
  const bool few = tiles ? n_tok <= cpu::kAmxFewCols : rows16 && n_tok <= kRows16MaxCols;
  const bool bias = !tiles && !narrow;
  // Activations are packed in groups of 16 columns, or as one group of all the rows for the
  // few-rows kernels.
  const PackedLayout pl{n_in, n_in / group, few ? static_cast<int>(n_tok) : kAmxCols};
  const int64_t n_xg = few ? 1 : (n_tok + kAmxCols - 1) / kAmxCols;
  amx_act_scratch_.resize(static_cast<size_t>(n_xg) * pl.bytes() + 64);
  uint8_t* packed = amx_act_scratch_.data();
  pool_.parallel_for(n_xg, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t xg = g0; xg < g1; ++xg) {
      const int64_t t0 = xg * pl.n_cols;
      const int n = static_cast<int>(std::min<int64_t>(pl.n_cols, n_tok - t0));
      const int8_t* q[kAmxCols];
      const float* d[kAmxCols];
      for (int c = 0; c < n; ++c) {
        q[c] = xq + (t0 + c) * n_in;
        d[c] = xd + (t0 + c) * (n_in / 32);
      }
      const cpu::AmxActs a = pl.at(packed, xg);
      cpu::amx_pack_acts(q, d, n, pl.n_cols, group, n_in, const_cast<int8_t*>(a.b),
                         const_cast<float*>(a.dv), const_cast<float*>(a.sv),
                         const_cast<int32_t*>(a.xs));
    }
  });

  if (few) return matmul_amx_decode(w, pl.at(packed, 0), xq, pl.n_cols, y);
  const cpu::MatmulKernels& k = *kernels_;
  const WeightScratch ws{n_in, n_in / group, group};
  const int64_t n_wg = (n_out + kAmxRows - 1) / kAmxRows;
  // Threads take chunks of weight-group pairs (the tile kernel's 2x2 blocks).
  const int64_t n_pairs = (n_wg + 1) / 2;
  const int64_t n_chunks = cpu::n_chunks_for(n_pairs, pool_.n_threads());
  // Activation groups per block: each weight pair is unpacked once per block, so blocks are
  // large (4 MiB of packed rows, from L2/L3). Qwen2.5-1.5B prefill of 883 tokens, 1 thread, dev
  // VM (2 MiB L2 per core): 1 MiB blocks 77 tok/s, 3 MiB 83, 8 MiB 81-87.
  const int64_t block = std::max<int64_t>(2, (4 << 20) / static_cast<int64_t>(pl.bytes()));
  const int64_t max_width = (n_pairs + n_chunks - 1) / n_chunks * 2 * kAmxRows;
  const size_t stage_bytes = static_cast<size_t>(std::min(block, n_xg) * kAmxCols * max_width) * 4;
  pool_.run_chunks(n_chunks, [&](int64_t chunk, int t) {
    int64_t p0, p1;
    cpu::split(n_pairs, chunk, n_chunks, &p0, &p1);
    const int64_t wg0 = 2 * p0, wg1 = std::min(n_wg, 2 * p1);
    if (wg0 >= wg1) return;
    uint8_t* s = thread_scratch(t, 2 * ws.bytes() + stage_bytes).data();
    const cpu::AmxWeights wv[2] = {ws.view(s), ws.view(s + ws.bytes())};
    auto* stage = reinterpret_cast<float*>(s + 2 * ws.bytes());
    const int64_t c_begin = wg0 * kAmxRows, width = std::min(n_out, wg1 * kAmxRows) - c_begin;
    alignas(64) float out[4 * kAmxRows * kAmxCols];
    for (int64_t xb = 0; xb < n_xg; xb += block) {
      const int64_t xe = std::min(n_xg, xb + block), tb = xb * kAmxCols;
      const int64_t te = std::min(n_tok, xe * kAmxCols);
      for (int64_t wg = wg0; wg < wg1; wg += 2) {
        // A lone last group (or activation group) runs as both halves of the block; the
        // duplicate results are dropped.
        const int n_w = static_cast<int>(std::min<int64_t>(2, wg1 - wg));
        int nr[2];
        for (int i = 0; i < n_w; ++i) {
          nr[i] = static_cast<int>(std::min<int64_t>(kAmxRows, n_out - (wg + i) * kAmxRows));
          unpack_group(k, w, (wg + i) * kAmxRows, nr[i], ws, wv[i], ws.row(s), false, bias);
        }
        const cpu::AmxWeights wp[2] = {wv[0], wv[n_w - 1]};
        for (int64_t xg = xb; xg < xe; xg += 2) {
          const int n_x = static_cast<int>(std::min<int64_t>(2, xe - xg));
          const cpu::AmxActs xp[2] = {pl.at(packed, xg), pl.at(packed, xg + n_x - 1)};
          if (tiles)
            cpu::amx_dot_block(wp, narrow, group, n_in, xp, out);
          else
            cpu::groups_dot_block(wp, n_w, narrow, group, n_in, xp, n_x, out);
          for (int i = 0; i < n_w; ++i) {
            for (int j = 0; j < n_x; ++j) {
              const float* o = out + (i * 2 + j) * kAmxRows * kAmxCols;
              const int64_t t0 = (xg + j) * kAmxCols, col = (wg + i) * kAmxRows - c_begin;
              const int nc = static_cast<int>(std::min<int64_t>(kAmxCols, n_tok - t0));
              cpu::amx_store_transposed(o, nr[i], nc, stage + (t0 - tb) * width + col, width);
            }
          }
        }
      }
      for (int64_t tok = tb; tok < te; ++tok)
        std::memcpy(cpu::f32_row(y, tok) + c_begin, stage + (tok - tb) * width,
                    static_cast<size_t>(width) * 4);
    }
  });
}

void CpuBackend::matmul_amx_decode(const Tensor& w, const cpu::AmxActs& a, const int8_t* xq,
                                   int n_cols, const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  const int64_t n_wg = (n_out + kAmxRows - 1) / kAmxRows;
  const int group = cpu::amx_group(w.type);
  const WeightScratch ws{n_in, n_in / group, group};
  const bool narrow = !cpu::is_wide_type(w.type);
  const bool rows16 = cpu::amx_rows16_supported(w.type, n_in);
  const cpu::MatmulKernels& k = *kernels_;
  const uint8_t* w_base = cpu::base_ptr(w);
  const int64_t row_b = static_cast<int64_t>(w.nb[1]);
  const int8_t* xr[kRows16MaxCols];
  for (int c = 0; c < n_cols; ++c) xr[c] = xq + c * n_in;
  // Each thread streams one contiguous run of 16-row groups, taking the others' last groups when
  // its own are done: 2 threads, Q4_K 1536 x 8960 from DRAM 16.7 -> 19.3 GB/s against chunks
  // claimed in turn (dev/kernels/README.md, "Decode from DRAM").
  const int n_thr = pool_.n_threads();
  cpu::StealRanges ranges(n_wg, n_thr, std::max<int64_t>(1, n_wg / (16 * n_thr)));
  pool_.run_chunks(n_thr, [&](int64_t owner, int t) {
    uint8_t* s = thread_scratch(t, ws.bytes()).data();
    const cpu::AmxWeights wv = ws.view(s);
    alignas(64) float out[kRows16MaxCols * kAmxRows];
    int64_t wg0, wg1;
    while (ranges.next(static_cast<int>(owner), &wg0, &wg1)) {
      for (int64_t wg = wg0; wg < wg1; ++wg) {
        const int64_t o0 = wg * kAmxRows;
        const int nr = static_cast<int>(std::min<int64_t>(kAmxRows, n_out - o0));
        if (rows16) {
          // Rows past the end repeat the first (results dropped). w is 2-D (checked by matmul).
          const uint8_t* rows[kAmxRows];
          const uint8_t* first = w_base + o0 * row_b;
          for (int r = 0; r < kAmxRows; ++r) rows[r] = first + (r < nr ? r : 0) * row_b;
          // Short rows: the next group's rows (contiguous after these; usually this thread's
          // next) are prefetched while these compute (see rows16_tile).
          const int64_t next_rows = std::min<int64_t>(kAmxRows, n_out - o0 - nr);
          const cpu::PrefetchRange ahead{
              first + nr * row_b, wg + 1 < n_wg && row_b <= kShortRowBytes ? next_rows * row_b : 0};
          cpu::amx_rows16_dot(w.type, rows, n_cols, xr, a, n_in, out, ahead);
        } else {  // tiles, 1..4 columns
          unpack_group(k, w, o0, nr, ws, wv, ws.row(s), true, false);
          cpu::amx_dot_few(wv, narrow, group, n_in, a, n_cols, out);
        }
        for (int c = 0; c < n_cols; ++c)
          std::memcpy(cpu::f32_row(y, c) + o0, out + c * kAmxRows, static_cast<size_t>(nr) * 4);
      }
    }
  });
}

}  // namespace t9
