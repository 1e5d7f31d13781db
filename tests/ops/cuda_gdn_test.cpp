// CUDA ops of the Gated DeltaNet layers vs the CPU backend: ssm_conv, gated_delta_net (one call
// and steps that carry state), and gdn_chain (the conv and the delta rule as one launch) against
// the two ops, on fresh random inputs (seed printed; TEMPO9_TEST_SEED reproduces), outputs
// NaN-poisoned. The MoE ops are in cuda_hybrid_test.cpp. Compiled to nothing
// without CUDA; on a CUDA build with no GPU the tests fail (they never skip).
#ifdef TEMPO9_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "model/model.h"
#include "ops_test_util.h"

namespace t9::test {
namespace {

using namespace cuda_util;

class CudaGdn : public cuda_util::CudaVsCpu {};

// ---- ssm_conv ----

// Four sequences in one batch (rows out of slot order, one fresh, one continuing a random state
// over 70 tokens, i.e. three of the kernel's 32-token chunks, one of a single token, one of 7)
// and an empty fresh one, K = 4 (Qwen) and 3; C = 200 leaves a partial block of channels. The new
// state is pure data movement: bitwise equal to the CPU's. Outputs: K products summed per channel
// (each side within 2K u sum|w x| of exact: a rounding per product and per add, fewer with fused
// multiply-adds) through silu (slope <= 1.1, plus a few ulps of its own): 4.4 K u sum|w x| + 8 u
// |out|.
TEST_F(CudaGdn, SsmConvMatchesCpu) {
  auto rng = test_rng();
  const int64_t C = 200, n_tok = 83, n_slots = 6;
  for (int64_t K : {4, 3}) {
    SCOPED_TRACE(fmt::format("K {}", K));
    const auto x = random_floats(rng, static_cast<size_t>(n_tok * C), -2.0f, 2.0f);
    const auto w = random_floats(rng, static_cast<size_t>(C * K));
    const auto state0 = random_floats(rng, static_cast<size_t>(n_slots * (K - 1) * C), -2.0f, 2.0f);
    const std::vector<int32_t> seqs{6,  70, 3, 0,   // rows [6, 76) continue slot 3
                                    0,  5,  2, 1,   // rows [0, 5) fresh in slot 2
                                    5,  1,  0, 0,   // row 5 continues slot 0
                                    76, 7,  5, 0,   // rows [76, 83) continue slot 5
                                    83, 0,  4, 1};  // no rows, fresh slot 4: zeroed
    std::vector<float> out[2], state[2];
    Backend* bes[2] = {be_.get(), &cpu_};
    for (int side = 0; side < 2; ++side) {
      DeviceArena arena(*bes[side]);
      const Tensor st = arena.from_host(state0, GgmlType::F32, C, K - 1, n_slots);
      const Tensor ot = arena.poisoned(GgmlType::F32, C, n_tok);
      bes[side]->ssm_conv(arena.from_host(x, GgmlType::F32, C, n_tok),
                          arena.from_host(w, GgmlType::F32, K, C), st,
                          arena.from_host(seqs, GgmlType::I32, 4, 5), ot);
      out[side] = arena.download<float>(ot);
      state[side] = arena.download<float>(st);
    }
    for (size_t i = 0; i < state[0].size(); ++i)
      ASSERT_EQ(float_bits(state[0][i]), float_bits(state[1][i])) << "state element " << i;
    // Slot 1 is untouched; slot 4 zeroed.
    EXPECT_EQ(state[0][static_cast<size_t>((K - 1) * C)], state0[static_cast<size_t>((K - 1) * C)]);
    EXPECT_EQ(state[0][static_cast<size_t>(4 * (K - 1) * C)], 0.0f);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t c = 0; c < C; ++c) {
        // Rebuild sum|w x| from the CPU's view: the inputs of row t (state rows before it are
        // bounded by 2, like x), so K * 2 * max|w| bounds it.
        double mag = 0.0;
        for (int64_t i = 0; i < K; ++i) mag += 2.0 * std::fabs(w[static_cast<size_t>(c * K + i)]);
        const size_t at = static_cast<size_t>(t * C + c);
        ASSERT_LE(std::fabs(out[0][at] - out[1][at]),
                  4.4 * K * kU * mag + 8 * kU * std::fabs(out[1][at]))
            << "tok " << t << " channel " << c;
      }
  }
}

// ---- gated_delta_net ----

struct GdnCase {
  int nk, nv, dk, dv;
  bool tiled;
};

struct GdnInputs {
  int64_t n_tok;
  std::vector<float> q, k, v, a, b, A, dt;
};

GdnInputs gdn_inputs(std::mt19937_64& rng, const GdnCase& c, int64_t n_tok) {
  GdnInputs in{n_tok, {}, {}, {}, {}, {}, {}, {}};
  const auto n = static_cast<size_t>(n_tok);
  in.q = random_floats(rng, n * c.nk * c.dk);
  in.k = random_floats(rng, n * c.nk * c.dk);
  in.v = random_floats(rng, n * c.nv * c.dv);
  in.a = random_floats(rng, n * c.nv, -3.0f, 3.0f);
  in.b = random_floats(rng, n * c.nv, -3.0f, 3.0f);
  in.A = random_floats(rng, static_cast<size_t>(c.nv), -4.0f, -0.05f);  // -exp(A_log) < 0
  in.dt = random_floats(rng, static_cast<size_t>(c.nv));
  return in;
}

// Runs gated_delta_net for the sequences `seqs` (RecurrentSeq rows over the token rows
// [row0, row0 + n) of `in`) on `be`, continuing `state` (host copy, updated); returns out rows.
std::vector<float> run_gdn(Backend& be, const GdnCase& c, const GdnInputs& in, int64_t row0,
                           int64_t n, const std::vector<int32_t>& seqs, std::vector<float>& state) {
  DeviceArena arena(be);
  auto part = [&](const std::vector<float>& v, int64_t per_row) {
    return std::vector<float>(v.begin() + row0 * per_row, v.begin() + (row0 + n) * per_row);
  };
  const int64_t n_slots = static_cast<int64_t>(state.size()) / (c.nv * c.dk * c.dv);
  const Tensor st = arena.from_host(state, GgmlType::F32, c.dv, c.dk, c.nv, n_slots);
  const Tensor out = arena.poisoned(GgmlType::F32, c.dv, c.nv, n);
  GdnParams p;
  p.n_k_heads = c.nk, p.n_v_heads = c.nv, p.d_k = c.dk, p.d_v = c.dv, p.v_heads_tiled = c.tiled;
  p.min_chunked_tokens = 1 << 30;  // the CPU's recurrent form (CUDA has only that one)
  // a, b as [n, 2, nv / 2] (the fused-ba layout's row split) to exercise head addressing.
  be.gated_delta_net(
      arena.from_host(part(in.q, c.nk * c.dk), GgmlType::F32, c.dk, c.nk, n),
      arena.from_host(part(in.k, c.nk * c.dk), GgmlType::F32, c.dk, c.nk, n),
      arena.from_host(part(in.v, c.nv * c.dv), GgmlType::F32, c.dv, c.nv, n),
      arena.from_host(part(in.a, c.nv), GgmlType::F32, c.nv / 2, 2, n),
      arena.from_host(part(in.b, c.nv), GgmlType::F32, c.nv / 2, 2, n),
      arena.from_host(in.A, GgmlType::F32, c.nv), arena.from_host(in.dt, GgmlType::F32, c.nv), st,
      arena.from_host(seqs, GgmlType::I32, 4, static_cast<int64_t>(seqs.size() / 4)), p, out);
  state = arena.download<float>(st);
  return arena.download<float>(out);
}

// Error bound for outputs and states after T tokens. |k| = 1 and 0 < beta < 1 make each update
// of a state column, s <- exp(g) (I - beta k k^T) s + beta v_j k, non-expansive, so rounding
// errors carried in the state do not grow. Each token adds, per side, the rounding of d_k-term
// dot products (at most d_k u times sum_i |s_i k_i| <= sqrt(d_k) max|s|, Cauchy-Schwarz) and of
// the d_k updates: (d_k sqrt(d_k) + d_k + d_v) u of the values' magnitude. Both sides, T + 2
// tokens' worth (the output's own dot): 2 (T + 2) (d_k sqrt(d_k) + d_k + d_v) u max(1, max|value|).
// A wrong decay, head mapping or reset moves results by O(0.1), far beyond it (<= 4e-3 here).
double gdn_bound(const GdnCase& c, int64_t T, const std::vector<float>& ref) {
  double mx = 1.0;
  for (float f : ref) mx = std::max(mx, static_cast<double>(std::fabs(f)));
  const double dk = c.dk;
  return 2.0 * static_cast<double>(T + 2) * (dk * std::sqrt(dk) + dk + c.dv) * kU * mx;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double bound,
                  const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
    ASSERT_LE(d, bound) << what << " element " << i << " got " << got[i] << " ref " << ref[i];
    worst = std::max(worst, d);
  }
  std::printf("[cuda gdn] %s max|d| %.3g (bound %.3g)\n", what, worst, bound);
}

// Three sequences in one batch: a fresh one (random garbage in its slot must be ignored), one
// continuing a random state, one single decode token; slot 1 unused (must stay as it was).
// Shapes: the tiny fixtures' (16x16, grouped heads), Qwen3.5's tiled heads, 64 x 48 (a partial
// block of columns), 128x128 heads (the real models'; state in registers, 4 blocks per head),
// and d_k = 40 (the general shared-memory kernel).
TEST_F(CudaGdn, GatedDeltaNetMatchesCpuRecurrent) {
  auto rng = test_rng();
  for (const GdnCase& c :
       {GdnCase{2, 4, 16, 16, false}, GdnCase{2, 6, 32, 24, true}, GdnCase{1, 2, 64, 48, false},
        GdnCase{1, 2, 128, 128, false}, GdnCase{1, 2, 40, 24, false}}) {
    SCOPED_TRACE(fmt::format("nk {} nv {} dk {} dv {} tiled {}", c.nk, c.nv, c.dk, c.dv, c.tiled));
    const int64_t n_tok = 30, n_slots = 4;
    const GdnInputs in = gdn_inputs(rng, c, n_tok);
    const std::vector<int32_t> seqs{0,  17, 2, 1,   // fresh in slot 2
                                    17, 12, 0, 0,   // continues slot 0
                                    29, 1,  3, 0};  // one token, slot 3
    const auto state0 =
        random_floats(rng, static_cast<size_t>(n_slots * c.nv * c.dk * c.dv), -0.5f, 0.5f);
    std::vector<float> sg = state0, sc = state0;
    const auto og = run_gdn(*be_, c, in, 0, n_tok, seqs, sg);
    const auto oc = run_gdn(cpu_, c, in, 0, n_tok, seqs, sc);
    expect_close(og, oc, gdn_bound(c, 17, oc), "out");
    expect_close(sg, sc, gdn_bound(c, 17, sc), "state");
    const size_t slot = static_cast<size_t>(c.nv * c.dk * c.dv);
    for (size_t i = slot; i < 2 * slot; ++i) ASSERT_EQ(float_bits(sg[i]), float_bits(state0[i]));
  }
}

// The same 70 tokens of two sequences fed in steps of 1, of 7 and whole, state carried in the
// slots: on CUDA every split gives the same bits, outputs and final state (the recurrence runs
// token by token whatever the step, and the state between steps is the same floats the kernel
// keeps in registers); the result matches the CPU (fed token by token) within gdn_bound. Steps of
// 1 and 7 run gdn_regs_kernel, the whole sequences gdn_rounds_kernel (three rounds of prepared
// tokens) on four threads a column, and again on sixteen (CudaBackendConfig::gdn_chains), so this
// also holds the three kernels to the same bits; for d_k 64 / d_v 32, the real shape 128 / 128
// (four column blocks) and 16 / 48 (a partial column block).
TEST_F(CudaGdn, GatedDeltaNetStepsCarryState) {
  auto rng = test_rng();
  CudaBackendConfig chains_cfg;
  chains_cfg.gdn_chains = true;
  CudaBackend chains(chains_cfg);
  for (const GdnCase& c :
       {GdnCase{2, 4, 64, 32, true}, GdnCase{2, 4, 128, 128, false}, GdnCase{1, 2, 16, 48, true}}) {
    SCOPED_TRACE(::testing::Message() << "d_k " << c.dk << " d_v " << c.dv);
    const int64_t T = 70;
    const size_t slot = static_cast<size_t>(c.nv * c.dk * c.dv), row = c.nv * c.dv;
    // Token t of sequence s is input row 2t + s; sequence 0 uses slot 2, sequence 1 slot 0 (both
    // start fresh over garbage), slot 1 is never touched.
    const GdnInputs in = gdn_inputs(rng, c, 2 * T);
    const std::vector<float> garbage = random_floats(rng, 3 * slot);
    std::vector<std::vector<float>> outs, states;
    const std::pair<Backend*, int64_t> runs[] = {
        {be_.get(), 1}, {be_.get(), 7}, {be_.get(), T}, {&chains, T}};
    for (const auto& [be, step] : runs) {
      std::vector<float> state = garbage, out(static_cast<size_t>(2 * T) * row);
      for (int64_t t0 = 0; t0 < T; t0 += step) {
        const int64_t n = std::min(step, T - t0);
        // This step's batch: sequence 0's n rows, then sequence 1's.
        auto pick = [&](const std::vector<float>& v, int64_t per) {
          std::vector<float> r;
          for (int s = 0; s < 2; ++s)
            for (int64_t t = t0; t < t0 + n; ++t)
              r.insert(r.end(), v.begin() + (2 * t + s) * per, v.begin() + (2 * t + s + 1) * per);
          return r;
        };
        GdnInputs part = in;
        part.q = pick(in.q, c.nk * c.dk), part.k = pick(in.k, c.nk * c.dk);
        part.v = pick(in.v, c.nv * c.dv), part.a = pick(in.a, c.nv), part.b = pick(in.b, c.nv);
        const int32_t fresh = t0 == 0, n32 = static_cast<int32_t>(n);
        const std::vector<int32_t> seqs{0, n32, 2, fresh, n32, n32, 0, fresh};
        const auto o = run_gdn(*be, c, part, 0, 2 * n, seqs, state);
        for (int s = 0; s < 2; ++s)
          for (int64_t t = 0; t < n; ++t)
            std::copy_n(o.begin() + static_cast<int64_t>((s * n + t) * row), row,
                        out.begin() + static_cast<int64_t>((2 * (t0 + t) + s) * row));
      }
      outs.push_back(out);
      states.push_back(state);
    }
    // The first element that differs (-1: none), for the failure message.
    const auto diff = [](const std::vector<float>& a, const std::vector<float>& b) {
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (float_bits(a[i]) != float_bits(b[i])) return static_cast<int64_t>(i);
      return a.size() == b.size() ? int64_t{-1}
                                  : static_cast<int64_t>(std::min(a.size(), b.size()));
    };
    const char* names[] = {"steps of 1", "steps of 7", "whole (rounds)", "whole (chains)"};
    for (size_t r = 1; r < outs.size(); ++r) {
      EXPECT_EQ(diff(outs[0], outs[r]), -1)
          << "out: " << names[0] << " vs " << names[r] << " (" << row << " floats per row)";
      EXPECT_EQ(diff(states[0], states[r]), -1) << "state: " << names[0] << " vs " << names[r];
    }
    std::vector<float> sc = garbage, oc;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t fresh = t == 0;
      const std::vector<int32_t> seqs{0, 1, 2, fresh, 1, 1, 0, fresh};
      const auto o = run_gdn(cpu_, c, in, 2 * t, 2, seqs, sc);
      oc.insert(oc.end(), o.begin(), o.end());
    }
    expect_close(outs[2], oc, gdn_bound(c, T, oc), "stepped out vs cpu");
    expect_close(states[2], sc, gdn_bound(c, T, sc), "stepped state vs cpu");
    // Slot 1 is no sequence's: untouched by every run.
    for (size_t i = slot; i < 2 * slot; ++i)
      ASSERT_EQ(float_bits(states[3][i]), float_bits(garbage[i]));
  }
}

// ---- gdn_chain ----

// One GDN layer's conv and delta rule (Backend::gdn_chain) on `be`, continuing the host states
// conv_state ([slots, 3, C]) and delta_state ([slots, nv, dk, dv]); returns the core rows [T, nv,
// dv]. mixed: [T, C] with C = 2 nk dk + nv dv; a, b: [T, nv] (as [T, 2, nv / 2], the fused-ba
// layout's row split); q, k, v are views of the conv output as the model takes them
// (gated_deltanet.cpp).
struct ChainInputs {
  std::vector<float> mixed, conv_w, a, b, A, dt;
};
std::vector<float> run_chain(Backend& be, const GdnCase& c, const ChainInputs& in, int64_t T,
                             const std::vector<int32_t>& seqs, std::vector<float>& conv_state,
                             std::vector<float>& delta_state) {
  DeviceArena arena(be);
  const int64_t C = 2 * c.nk * c.dk + c.nv * c.dv, K = 4;
  const int64_t n_slots = static_cast<int64_t>(delta_state.size()) / (c.nv * c.dk * c.dv);
  Backend::GdnChain ch;
  ch.mixed = arena.from_host(in.mixed, GgmlType::F32, C, T);
  ch.conv_w = arena.from_host(in.conv_w, GgmlType::F32, K, C);
  ch.conv_state = arena.from_host(conv_state, GgmlType::F32, C, K - 1, n_slots);
  ch.conv = arena.poisoned(GgmlType::F32, C, T);
  const auto view = [&](int64_t first, int64_t heads, int64_t d) {
    Tensor v = ch.conv;
    v.offset += static_cast<size_t>(first) * 4;
    v.ne = {d, heads, T, 1};
    v.nb = {4, static_cast<size_t>(d) * 4, ch.conv.nb[1], ch.conv.nb[1] * static_cast<size_t>(T)};
    return v;
  };
  ch.q = view(0, c.nk, c.dk);
  ch.k = view(c.nk * c.dk, c.nk, c.dk);
  ch.v = view(2 * c.nk * c.dk, c.nv, c.dv);
  ch.a = arena.from_host(in.a, GgmlType::F32, c.nv / 2, 2, T);
  ch.b = arena.from_host(in.b, GgmlType::F32, c.nv / 2, 2, T);
  ch.A = arena.from_host(in.A, GgmlType::F32, c.nv);
  ch.dt_bias = arena.from_host(in.dt, GgmlType::F32, c.nv);
  ch.delta_state = arena.from_host(delta_state, GgmlType::F32, c.dv, c.dk, c.nv, n_slots);
  ch.seqs = arena.from_host(seqs, GgmlType::I32, 4, static_cast<int64_t>(seqs.size() / 4));
  ch.p.n_k_heads = c.nk, ch.p.n_v_heads = c.nv, ch.p.d_k = c.dk, ch.p.d_v = c.dv;
  ch.p.v_heads_tiled = c.tiled;
  ch.p.min_chunked_tokens = 1 << 30;
  ch.core = arena.poisoned(GgmlType::F32, c.dv, c.nv, T);
  be.gdn_chain(ch);
  conv_state = arena.download<float>(ch.conv_state);
  delta_state = arena.download<float>(ch.delta_state);
  return arena.download<float>(ch.core);
}

// Fresh random inputs of one chain call of T rows.
ChainInputs random_chain_inputs(std::mt19937_64& rng, const GdnCase& c, int64_t T) {
  const int64_t C = 2 * c.nk * c.dk + c.nv * c.dv;
  ChainInputs in;
  in.mixed = random_floats(rng, static_cast<size_t>(T * C), -2.0f, 2.0f);
  in.conv_w = random_floats(rng, static_cast<size_t>(C * 4));
  in.a = random_floats(rng, static_cast<size_t>(T * c.nv), -3.0f, 3.0f);
  in.b = random_floats(rng, static_cast<size_t>(T * c.nv), -3.0f, 3.0f);
  in.A = random_floats(rng, static_cast<size_t>(c.nv), -4.0f, -0.05f);
  in.dt = random_floats(rng, static_cast<size_t>(c.nv));
  return in;
}

// The same random conv and delta states of n_slots slots in both of conv_s and delta_s (one per
// backend).
void random_states(std::mt19937_64& rng, const GdnCase& c, int64_t n_slots,
                   std::vector<float> (&conv_s)[2], std::vector<float> (&delta_s)[2]) {
  const int64_t C = 2 * c.nk * c.dk + c.nv * c.dv;
  conv_s[0] = conv_s[1] = random_floats(rng, static_cast<size_t>(n_slots * 3 * C), -2.0f, 2.0f);
  delta_s[0] = delta_s[1] =
      random_floats(rng, static_cast<size_t>(n_slots * c.nv * c.dk * c.dv), -0.5f, 0.5f);
}

// The core rows and both states of two backends after the same call, bit for bit.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::vector<float> (&conv_s)[2],
                      const std::vector<float> (&delta_s)[2]) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << "core element " << i;
  for (size_t i = 0; i < conv_s[0].size(); ++i)
    ASSERT_EQ(float_bits(conv_s[0][i]), float_bits(conv_s[1][i])) << "conv state " << i;
  for (size_t i = 0; i < delta_s[0].size(); ++i)
    ASSERT_EQ(float_bits(delta_s[0][i]), float_bits(delta_s[1][i])) << "delta state " << i;
}

// The chain as one launch (CudaBackendConfig::gdn_chain_max_seqs) against the two ops, bit for
// bit: the core rows and both states, over two steps that carry the states (so the block counters
// must be back at zero after each launch), for eight blocks a key head (two value heads of 128 x
// 128 per key head, tiled as Qwen3.5), two (d_k = d_v = 64, one value head a key head) and four
// (two grouped value heads of 64). Three sequences a step: one token continuing slot 2, three
// tokens (fresh over garbage in slot 0 at step 1), two tokens continuing slot 3; slot 1 is no
// sequence's and stays as it was. The default configuration (be_, one sequence at most) runs
// these calls as the two ops.
TEST_F(CudaGdn, GdnChainEqualsTheOps) {
  auto rng = test_rng();
  for (const GdnCase& c : {GdnCase{2, 4, 128, 128, true}, GdnCase{2, 2, 64, 64, false},
                           GdnCase{1, 2, 64, 64, false}}) {
    SCOPED_TRACE(fmt::format("nk {} nv {} dk {} dv {} tiled {}", c.nk, c.nv, c.dk, c.dv, c.tiled));
    CudaBackendConfig fused_cfg;
    fused_cfg.gdn_chain_max_seqs = 3;
    CudaBackend fused(fused_cfg);
    const int64_t C = 2 * c.nk * c.dk + c.nv * c.dv, T = 6;
    const size_t slot = static_cast<size_t>(c.nv * c.dk * c.dv), conv_slot = 3 * C;
    std::vector<float> conv_s[2], delta_s[2];
    random_states(rng, c, 4, conv_s, delta_s);
    const std::vector<float> conv0 = conv_s[0], delta0 = delta_s[0];
    for (int step = 0; step < 2; ++step) {
      SCOPED_TRACE(step);
      const ChainInputs in = random_chain_inputs(rng, c, T);
      const int32_t fresh = step == 0;
      const std::vector<int32_t> seqs{0, 1, 2, 0,      // one token, slot 2
                                      1, 3, 0, fresh,  // three tokens, slot 0
                                      4, 2, 3, 0};     // two tokens, slot 3
      const int64_t before = fused.gdn_chain_launches();
      const auto got = run_chain(fused, c, in, T, seqs, conv_s[0], delta_s[0]);
      EXPECT_EQ(fused.gdn_chain_launches() - before, 1);
      const auto want = run_chain(*be_, c, in, T, seqs, conv_s[1], delta_s[1]);
      EXPECT_EQ(be_->gdn_chain_launches(), 0);
      ASSERT_NO_FATAL_FAILURE(expect_same_bits(got, want, conv_s, delta_s));
    }
    for (size_t i = conv_slot; i < 2 * conv_slot; ++i)
      ASSERT_EQ(float_bits(conv_s[0][i]), float_bits(conv0[i])) << "slot 1's conv state";
    for (size_t i = slot; i < 2 * slot; ++i)
      ASSERT_EQ(float_bits(delta_s[0][i]), float_bits(delta0[i])) << "delta state of slot 1";
  }
}

// A single decode step (one sequence, one token: the default configuration's chain) against the
// two ops (gdn_chain_max_seqs 0), on the 35B's layer shape (16 key heads, 32 value heads of 128,
// tiled), twice over the carried states.
TEST_F(CudaGdn, GdnChainTakesOneSequenceByDefault) {
  auto rng = test_rng();
  const GdnCase c{16, 32, 128, 128, true};
  CudaBackend chained{CudaBackendConfig{}};
  CudaBackendConfig ops_cfg;
  ops_cfg.gdn_chain_max_seqs = 0;
  CudaBackend ops(ops_cfg);
  const int64_t T = 1;
  std::vector<float> conv_s[2], delta_s[2];
  random_states(rng, c, 2, conv_s, delta_s);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    const ChainInputs in = random_chain_inputs(rng, c, T);
    const std::vector<int32_t> seqs{0, 1, 1, 0};  // one token continuing slot 1
    const auto got = run_chain(chained, c, in, T, seqs, conv_s[0], delta_s[0]);
    EXPECT_EQ(chained.gdn_chain_launches(), step + 1);
    const auto want = run_chain(ops, c, in, T, seqs, conv_s[1], delta_s[1]);
    EXPECT_EQ(ops.gdn_chain_launches(), 0);
    ASSERT_NO_FATAL_FAILURE(expect_same_bits(got, want, conv_s, delta_s));
  }
}

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
