// CPU matmul driver: quantizes activation rows once, then for each group of kTileRows weight rows
// unpacks them once per block of activation rows and runs the ISA kernel over that block. Threads
// own disjoint groups of weight rows (output columns); reductions are never split.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"
#include "core/log.h"

namespace t9 {
namespace {

using cpu::kTileRows;
using cpu::n_chunks_for;
using cpu::split;
constexpr int kMaxCols = 4;  // >= every ISA's MatmulKernels::max_cols

// Activation rows per block: keeps a block of quantized rows (~256 KiB) in L2 while a group of
// weight rows is streamed against it.
int64_t act_block_rows(int64_t n_in) {
  return std::max<int64_t>(1, (256 * 1024) / n_in);
}

struct ActLayout {
  int64_t n_in;
  int8_t* q;
  float* d;
  float* s16;
  float* dx16;
  cpu::ActRow row(int64_t t) const {
    return {q + t * n_in, d + t * (n_in / 32), s16 + t * (n_in / 16), dx16 + t * (n_in / 64 * 16)};
  }
};

// Copies one tile row of nr outputs; a fixed-size copy for whole tiles (std::copy of a run-time
// length became a memcpy call per tile, 6% of a prefill).
inline void store_outputs(const float* out, int nr, float* y) {
  if (nr == kTileRows) {
    std::memcpy(y, out, sizeof(float) * kTileRows);
    return;
  }
  for (int r = 0; r < nr; ++r) y[r] = out[r];
}

}  // namespace

void CpuBackend::matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  cpu::check_f32_rows(x, "matmul x");
  cpu::check_f32_rows(y, "matmul y");
  T9_CHECK(backend_supports_weight_type(w.type), "matmul: weight type {}", type_name(w.type));
  T9_CHECK(w.ne[2] == 1 && w.ne[3] == 1, "matmul: weights must be 2-D");
  T9_CHECK(w.nb[1] == row_bytes(w.type, n_in), "matmul: weight rows must be packed");
  T9_CHECK(x.ne[0] == n_in, "matmul: x rows have {} elements, weights {}", x.ne[0], n_in);
  T9_CHECK(y.ne[0] == n_out && y.n_rows() == x.n_rows(), "matmul: y must be [{}, {}]", x.n_rows(),
           n_out);
  if (bias.valid()) {
    cpu::check_f32_rows(bias, "matmul bias");
    T9_CHECK(bias.n_elements() == n_out, "matmul: bias has {} elements", bias.n_elements());
  }
  if (traits(w.type).quantized) {
    T9_CHECK(n_in % 32 == 0, "matmul: n_in {} not a multiple of 32", n_in);
    matmul_int(w, x, y);
  } else {
    matmul_float(w, x, y);
  }
  if (bias.valid()) add(y, reshape(bias, n_out), y);
}

void CpuBackend::matmul_int(const Tensor& w, const Tensor& x, const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const size_t q_bytes = static_cast<size_t>(n_tok * n_in);
  const int64_t n_floats = n_tok * (n_in / 32 + n_in / 16 + n_in / 64 * 16);
  act_scratch_.resize(q_bytes + static_cast<size_t>(n_floats) * 4 + 64);
  uint8_t* base = act_scratch_.data();
  auto* d = reinterpret_cast<float*>(base + (q_bytes + 3) / 4 * 4);
  float* s16 = d + n_tok * (n_in / 32);
  const ActLayout act{n_in, reinterpret_cast<int8_t*>(base), d, s16, s16 + n_tok * (n_in / 16)};
  const cpu::MatmulKernels& k = *kernels_;
  T9_CHECK(k.max_cols >= 1 && k.max_cols <= kMaxCols, "kernel tile of {} columns", k.max_cols);
  pool_.parallel_for(n_tok, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const cpu::ActRow r = act.row(t);
      k.quantize_act(cpu::f32_row(x, t), n_in, const_cast<int8_t*>(r.q), const_cast<float*>(r.d),
                     const_cast<float*>(r.s16));
      auto* lanes = const_cast<float*>(r.dx16);
      for (int64_t s = 0; s < n_in / 64; ++s)
        for (int l = 0; l < 16; ++l) lanes[s * 16 + l] = r.d[2 * s + l / 8];
    }
  });

  if (isa_ == cpu::CpuIsa::kAmx || isa_ == cpu::CpuIsa::kAvx512Groups) {
    matmul_amx(w, act.q, act.d, n_tok, y);
    return;
  }
  if (n_tok <= k.max_cols && k.dot_fused != nullptr && k.fused_supported(w.type, n_in)) {
    matmul_fused(w, act.row(0), n_tok, y);
    return;
  }
  const bool wide = cpu::is_wide_type(w.type);
  const int64_t n_groups = (n_out + kTileRows - 1) / kTileRows;
  const size_t per_row = static_cast<size_t>(n_in + n_in / 4 + n_in / 4);  // q, ls, mn bytes
  const int64_t block = act_block_rows(n_in);
  const int64_t n_chunks = n_chunks_for(n_groups, pool_.n_threads());
  // Outputs of one activation block are staged per chunk ([block rows][chunk columns], compact)
  // and copied to y a row at a time: writing 4 floats into rows of y n_out floats apart missed
  // the caches and the TLB on nearly every tile (7-11% of a prefill).
  const int64_t max_width = (n_groups + n_chunks - 1) / n_chunks * kTileRows;
  const size_t unpacked_bytes = (per_row * kTileRows + 63) / 64 * 64;
  const size_t stage_bytes = static_cast<size_t>(std::min(block, n_tok) * max_width) * 4;
  pool_.run_chunks(n_chunks, [&](int64_t chunk, int t) {
    int64_t g0, g1;
    split(n_groups, chunk, n_chunks, &g0, &g1);
    if (g0 >= g1) return;
    uint8_t* s = thread_scratch(t, unpacked_bytes + stage_bytes).data();
    auto* stage = reinterpret_cast<float*>(s + unpacked_bytes);
    const int64_t c_begin = g0 * kTileRows, width = std::min(n_out, g1 * kTileRows) - c_begin;
    cpu::UnpackedRow rows[kTileRows];
    for (int r = 0; r < kTileRows; ++r) {
      uint8_t* p = s + per_row * static_cast<size_t>(r);
      rows[r] = {p, reinterpret_cast<float*>(p + n_in),
                 reinterpret_cast<float*>(p + n_in + n_in / 4)};
    }
    float out[kTileRows * kMaxCols];
    cpu::ActRow xs[kMaxCols];
    for (int64_t tb = 0; tb < n_tok; tb += block) {
      const int64_t te = std::min(n_tok, tb + block);
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t o0 = g * kTileRows;
        const int nr = static_cast<int>(std::min<int64_t>(kTileRows, n_out - o0));
        for (int r = 0; r < nr; ++r)
          k.unpack(w.type, cpu::row_ptr(w, o0 + r), n_in, const_cast<uint8_t*>(rows[r].q),
                   const_cast<float*>(rows[r].ls), const_cast<float*>(rows[r].mn));
        for (int64_t tok = tb; tok < te; tok += k.max_cols) {
          const int nc = static_cast<int>(std::min<int64_t>(k.max_cols, te - tok));
          for (int c = 0; c < nc; ++c) xs[c] = act.row(tok + c);
          k.dot_int(nr, rows, wide, nc, xs, n_in, out);
          for (int c = 0; c < nc; ++c)
            store_outputs(out + c * kTileRows, nr, stage + (tok + c - tb) * width + (o0 - c_begin));
        }
      }
      for (int64_t tok = tb; tok < te; ++tok)
        std::memcpy(cpu::f32_row(y, tok) + c_begin, stage + (tok - tb) * width,
                    static_cast<size_t>(width) * 4);
    }
  });
}

void CpuBackend::matmul_fused(const Tensor& w, const cpu::ActRow& first, int64_t n_tok,
                              const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  const int64_t n_groups = (n_out + kTileRows - 1) / kTileRows;
  const cpu::MatmulKernels& k = *kernels_;
  cpu::ActRow xs[kMaxCols];
  for (int64_t c = 0; c < n_tok; ++c)
    xs[c] = {first.q + c * n_in, first.d + c * (n_in / 32), first.s16 + c * (n_in / 16),
             first.dx16 + c * (n_in / 64 * 16)};
  const int64_t n_chunks = n_chunks_for(n_groups, pool_.n_threads());
  // One activation row: the weight rows one at a time or interleaved, as the probe found faster
  // here (the same bits either way; cpu/row_order_probe.h).
  const size_t bytes = static_cast<size_t>(n_out) * w.nb[1];
  const bool one_row = n_tok == 1 && row_order_.one_row(bytes);
  const bool timed = n_tok == 1 && row_order_.timing(bytes);
  const auto t0 =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  pool_.run_chunks(n_chunks, [&](int64_t chunk, int t) {
    int64_t g0, g1;
    split(n_groups, chunk, n_chunks, &g0, &g1);
    if (g0 >= g1) return;
    auto* mn = reinterpret_cast<float*>(
        thread_scratch(t, static_cast<size_t>(n_in / 16) * 4 * kTileRows).data());
    float out[kTileRows * kMaxCols];
    const uint8_t* rows[kTileRows];
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t o0 = g * kTileRows;
      const int nr = static_cast<int>(std::min<int64_t>(kTileRows, n_out - o0));
      for (int r = 0; r < nr; ++r) rows[r] = cpu::row_ptr(w, o0 + r);
      if (one_row) {
        for (int r = 0; r < nr; ++r) k.dot_fused(w.type, 1, rows + r, 1, xs, n_in, mn, out + r);
      } else {
        k.dot_fused(w.type, nr, rows, static_cast<int>(n_tok), xs, n_in, mn, out);
      }
      for (int64_t c = 0; c < n_tok; ++c)
        store_outputs(out + c * kTileRows, nr, cpu::f32_row(y, c) + o0);
    }
  });
  if (!timed) return;
  row_order_.record(bytes,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (row_order_.order() != cpu::RowOrderProbe::Order::kProbing)
    T9_LOG_INFO(
        "cpu: decode matmuls walk weight rows {} (measured {:.1f} vs {:.1f} ms/GB for one "
        "row at a time vs the {}-row tile)",
        row_order_.order() == cpu::RowOrderProbe::Order::kOneRow ? "one at a time" : "in tiles",
        row_order_.one_row_s_per_gb() * 1e3, row_order_.tile_s_per_gb() * 1e3, kTileRows);
}

void CpuBackend::matmul_float(const Tensor& w, const Tensor& x, const Tensor& y) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const int64_t n_groups = (n_out + kTileRows - 1) / kTileRows;
  const int64_t block = act_block_rows(n_in * 4);
  const cpu::MatmulKernels& k = *kernels_;
  const int64_t n_chunks = n_chunks_for(n_groups, pool_.n_threads());
  pool_.run_chunks(n_chunks, [&](int64_t chunk, int t) {
    int64_t g0, g1;
    split(n_groups, chunk, n_chunks, &g0, &g1);
    if (g0 >= g1) return;
    auto* s = reinterpret_cast<float*>(
        thread_scratch(t, static_cast<size_t>(n_in) * 4 * kTileRows).data());
    const float* rows[kTileRows];
    float out[kTileRows];
    for (int64_t tb = 0; tb < n_tok; tb += block) {
      const int64_t te = std::min(n_tok, tb + block);
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t o0 = g * kTileRows;
        const int nr = static_cast<int>(std::min<int64_t>(kTileRows, n_out - o0));
        for (int r = 0; r < nr; ++r) {
          if (w.type == GgmlType::F32) {
            rows[r] = cpu::f32_row(w, o0 + r);
          } else {
            k.to_f32(w.type, cpu::row_ptr(w, o0 + r), n_in, s + r * n_in);
            rows[r] = s + r * n_in;
          }
        }
        for (int64_t tok = tb; tok < te; ++tok) {
          k.dot_f32(nr, rows, cpu::f32_row(x, tok), n_in, out);
          store_outputs(out, nr, cpu::f32_row(y, tok) + o0);
        }
      }
    }
  });
}

}  // namespace t9
