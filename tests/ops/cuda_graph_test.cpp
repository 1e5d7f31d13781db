// CUDA graphs for repeated windows (src/backend/cuda/cuda_stream.cuh): a window (the work between
// two sync()s) whose launches and copies repeat is captured once and then replayed. A replay must
// read the fresh uploads, hand back fresh downloads, and stop the moment an argument differs;
// whole models stepped token by token must give the same bits with graphs on and off. Compiled to
// nothing without CUDA.
#ifdef TEMPO9_HAVE_CUDA

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "model/convert/hf_convert.h"
#include "ops_test_util.h"

namespace t9::test {
namespace {

using namespace cuda_util;

// One window: upload x, out = x * s + x, download out. With s = 2 every result is round(3x) on
// any device (x * 2 is exact), so the expected bits are computed on the host.
std::vector<float> window(CudaBackend& be, Buffer* xb, Buffer* ob, const std::vector<float>& x,
                          int64_t n, float s) {
  const Tensor xt = make_tensor(xb, 0, GgmlType::F32, n), ot = make_tensor(ob, 0, GgmlType::F32, n);
  be.upload(xb, 0, x.data(), static_cast<size_t>(n) * 4);
  be.scale(xt, s, ot);
  be.add(ot, xt, ot);
  std::vector<float> out(static_cast<size_t>(n), -1.0f);
  be.download(ob, 0, out.data(), out.size() * 4);
  be.sync();
  return out;
}

TEST(CudaGraphs, ReplayReadsFreshUploadsAndStopsOnNewArguments) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  for (bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "graphs on" : "graphs off");
    // Graphs built in end_window itself: the counts below are window by window.
    CudaBackend be({.device = 0, .graphs = graphs, .graph_background = false});
    const int64_t n = 1000;
    auto xb = be.alloc(n * 4), ob = be.alloc(n * 4);
    ASSERT_TRUE(xb.ok() && ob.ok());
    const auto expect = [&](const std::vector<float>& x, const std::vector<float>& y, float s) {
      for (int64_t i = 0; i < n; ++i) {
        const float want = s == 2.0f ? x[i] * 3.0f : x[i] * s + x[i];
        ASSERT_EQ(float_bits(y[i]), float_bits(want)) << "element " << i << " s " << s;
      }
    };
    // Six equal windows with fresh data: captured after the second, replayed from the third.
    for (int w = 0; w < 6; ++w) {
      const auto x = random_floats(rng, n, -4.0f, 4.0f);
      expect(x, window(be, *xb, *ob, x, n, 2.0f), 2.0f);
    }
    CudaGraphStats st = be.graph_stats();
    EXPECT_EQ(st.windows, 6);
    EXPECT_EQ(st.captures, graphs ? 1 : 0);
    EXPECT_EQ(st.replays, graphs ? 4 : 0);
    be.mark_diagnostics();  // diagnostics() counts the three windows below only
    // A new scale is a new kernel argument: the window must run as launched, not replay.
    // s = 0.5: x * 0.5 is exact too, and + x is one rounding on both sides.
    {
      const auto x = random_floats(rng, n, -4.0f, 4.0f);
      expect(x, window(be, *xb, *ob, x, n, 0.5f), 0.5f);
    }
    EXPECT_EQ(be.graph_stats().replays, st.replays);
    // Fewer elements: other grid, other copy sizes; the tail of out keeps the last window's.
    {
      const auto x = random_floats(rng, n, -4.0f, 4.0f);
      const auto y = window(be, *xb, *ob, x, n / 2, 2.0f);
      for (int64_t i = 0; i < n / 2; ++i) ASSERT_EQ(float_bits(y[i]), float_bits(x[i] * 3.0f));
    }
    EXPECT_EQ(be.graph_stats().replays, st.replays);
    // Back to the first shape: the cached graph replays again.
    const auto x = random_floats(rng, n, -4.0f, 4.0f);
    expect(x, window(be, *xb, *ob, x, n, 2.0f), 2.0f);
    EXPECT_EQ(be.graph_stats().replays, st.replays + (graphs ? 1 : 0));
    // Since the mark: both new windows were held back against the cached tape until they left
    // it (the new scale at its kernel, one kernel held; the new size at its upload, none), the
    // third replayed.
    EXPECT_EQ(be.diagnostics(),
              graphs ? "cuda graphs: 3 windows, 1 replayed, 0 captures (0.0 ms to build), 2 held "
                       "back then issued (1 kernels in all)"
                     : "cuda graphs: 3 windows, 0 replayed, 0 captures (0.0 ms to build), 0 held "
                       "back then issued (0 kernels in all)");
    be.free(*xb);
    be.free(*ob);
  }
}

// Pipelined windows (Backend::submit, wait_submitted): each window is recorded while the one
// before it may still run, so it stages its copies in the other pinned buffer; the downloads land
// only by their wait, results are right with graphs on and off, and the two alternating tapes are
// each captured once and then replayed.
TEST(CudaGraphs, SubmittedWindowsAlternateStagingAndReplay) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  for (bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "graphs on" : "graphs off");
    CudaBackend be({.device = 0, .graphs = graphs, .graph_background = false});
    const int64_t n = 1000;
    constexpr int kWindows = 10;
    auto xb = be.alloc(n * 4), ob = be.alloc(n * 4);
    ASSERT_TRUE(xb.ok() && ob.ok());
    const Tensor xt = make_tensor(*xb, 0, GgmlType::F32, n),
                 ot = make_tensor(*ob, 0, GgmlType::F32, n);
    std::vector<std::vector<float>> xs(kWindows), outs(kWindows);
    const auto record = [&](int w) {
      xs[w] = random_floats(rng, n, -4.0f, 4.0f);
      outs[w].assign(static_cast<size_t>(n), -1.0f);
      be.upload(*xb, 0, xs[w].data(), static_cast<size_t>(n) * 4);
      be.scale(xt, 2.0f, ot);
      be.add(ot, xt, ot);
      be.download(*ob, 0, outs[w].data(), outs[w].size() * 4);
      be.submit();
    };
    const auto check = [&](int w) {
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(float_bits(outs[w][i]), float_bits(xs[w][i] * 3.0f))
            << "window " << w << " " << i;
    };
    record(0);
    for (int w = 1; w < kWindows; ++w) {
      record(w);
      be.wait_submitted();
      check(w - 1);
      ASSERT_EQ(outs[w][0], -1.0f) << "window " << w << " delivered before its wait";
    }
    be.wait_submitted();
    check(kWindows - 1);
    const CudaGraphStats st = be.graph_stats();
    EXPECT_EQ(st.windows, kWindows);
    // Tapes A (even windows) and B (odd): each seen twice by windows 2 and 3, replayed after.
    EXPECT_EQ(st.captures, graphs ? 2 : 0);
    EXPECT_EQ(st.replays, graphs ? kWindows - 4 : 0);
    be.free(*xb);
    be.free(*ob);
  }
}

// A window of many kernels: upload x, out = x, then out *= s_i for each scale (powers of two, so
// every product is exact and the expected bits are computed on the host), download out.
std::vector<float> scaled_window(CudaBackend& be, Buffer* xb, Buffer* ob,
                                 const std::vector<float>& x, const std::vector<float>& scales) {
  const auto n = static_cast<int64_t>(x.size());
  const Tensor xt = make_tensor(xb, 0, GgmlType::F32, n), ot = make_tensor(ob, 0, GgmlType::F32, n);
  be.upload(xb, 0, x.data(), x.size() * 4);
  be.scale(xt, 1.0f, ot);
  for (const float s : scales) be.scale(ot, s, ot);
  std::vector<float> out(x.size(), -1.0f);
  be.download(ob, 0, out.data(), out.size() * 4);
  be.sync();
  return out;
}

// Segmented replay (StreamConfig::segment_kernels: graphs of 8 kernels, then 128, then the rest):
// a replayed window launches each segment as soon as its records match. A window that departs
// after the first segment has run, or ends before the cached tape does, must finish with its own
// work (issued from where the segments stopped) and right results; the cached graph must replay
// again afterwards. The same windows with one graph per window count the same replays.
TEST(CudaGraphs, SegmentsRunAsTheirRecordsMatch) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  for (bool segments : {true, false}) {
    SCOPED_TRACE(segments ? "segments" : "one graph");
    CudaBackend be(
        {.device = 0, .graphs = true, .graph_segments = segments, .graph_background = false});
    const int64_t n = 512;
    auto xb = be.alloc(n * 4), ob = be.alloc(n * 4);
    ASSERT_TRUE(xb.ok() && ob.ok());
    std::vector<float> scales(150);  // 151 kernels: segments of 8, 128 and 15
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = i % 2 == 0 ? 2.0f : 0.5f;
    const auto check = [&](const std::vector<float>& sc) {
      const auto x = random_floats(rng, n, -4.0f, 4.0f);
      const auto y = scaled_window(be, *xb, *ob, x, sc);
      float f = 1.0f;
      for (const float s : sc) f *= s;  // exact: powers of two
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(float_bits(y[i]), float_bits(x[i] * f)) << "element " << i;
    };
    for (int w = 0; w < 4; ++w) check(scales);  // captured after the second, then replayed
    const long replays = be.graph_stats().replays;
    EXPECT_EQ(be.graph_stats().captures, 1);
    EXPECT_EQ(replays, 2);
    auto other = scales;
    other[100] = 4.0f;  // departs in the second segment (kernel 102), after the first ran
    check(other);
    auto early = other;
    other[7] = 4.0f;  // departs in the first segment (kernel 9)
    check(other);
    early.resize(20);  // ends inside the second segment
    check(early);
    EXPECT_EQ(be.graph_stats().replays, replays);
    check(scales);  // the cached graph again
    EXPECT_EQ(be.graph_stats().replays, replays + 1);
    // A second cached tape with the same first segments: a window that leaves one after its
    // first segment ran switches to the other (the segments launched are the same work), so
    // windows that alternate between the two both replay.
    auto alt = scales;
    alt[120] = 4.0f;  // departs at kernel 122, in the second segment
    check(alt);
    check(alt);  // captured after the second
    EXPECT_EQ(be.graph_stats().captures, 2);
    const long before = be.graph_stats().replays;
    for (int w = 0; w < 4; ++w) check(w % 2 == 0 ? scales : alt);
    EXPECT_EQ(be.graph_stats().replays, before + 4);
    be.free(*xb);
    be.free(*ob);
  }
}

// A free() in the middle of a held-back window issues what was held back first; the data that
// window computed must still be right.
TEST(CudaGraphs, FreeMidWindowIssuesHeldBackWork) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  CudaBackend be({.device = 0, .graph_background = false});
  const int64_t n = 256;
  auto xb = be.alloc(n * 4), ob = be.alloc(n * 4);
  ASSERT_TRUE(xb.ok() && ob.ok());
  for (int w = 0; w < 3; ++w) {  // a cached graph: the next window is held back
    const auto x = random_floats(rng, n, -4.0f, 4.0f);
    (void)window(be, *xb, *ob, x, n, 2.0f);
  }
  ASSERT_EQ(be.graph_stats().captures, 1);
  const auto x = random_floats(rng, n, -4.0f, 4.0f);
  const Tensor xt = make_tensor(*xb, 0, GgmlType::F32, n),
               ot = make_tensor(*ob, 0, GgmlType::F32, n);
  be.upload(*xb, 0, x.data(), n * 4);
  be.scale(xt, 2.0f, ot);
  be.add(ot, xt, ot);
  auto spare = be.alloc(64);
  ASSERT_TRUE(spare.ok());
  be.free(*spare);  // mid-window
  std::vector<float> y(n);
  be.download(*ob, 0, y.data(), n * 4);
  be.sync();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(y[i]), float_bits(x[i] * 3.0f)) << i;
  be.free(*xb);
  be.free(*ob);
}

// Background builds (the default, StreamConfig::background_builds): a tape seen twice is queued
// for the builder's thread, and its graph replays once end_window has taken it. A free() drops
// the cached graphs and whatever is queued or being built (their tapes name memory about to be
// freed); the windows after it are right and build their graph anew.
TEST(CudaGraphs, BackgroundBuildsReplayOnceTakenAndDropOnFree) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  CudaBackend be;
  const int64_t n = 256;
  auto xb = be.alloc(n * 4), ob = be.alloc(n * 4);
  ASSERT_TRUE(xb.ok() && ob.ok());
  const auto check = [&] {
    const auto x = random_floats(rng, n, -4.0f, 4.0f);
    const auto y = window(be, *xb, *ob, x, n, 2.0f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(y[i]), float_bits(x[i] * 3.0f)) << i;
  };
  const auto free_one = [&] {
    auto spare = be.alloc(64);
    ASSERT_TRUE(spare.ok());
    be.free(*spare);
  };
  check();
  check();  // the tape's second sighting: its graph is queued
  be.settle_graph_builds();
  EXPECT_EQ(be.graph_stats().captures, 1);
  EXPECT_EQ(be.graph_stats().replays, 0);
  check();
  EXPECT_EQ(be.graph_stats().replays, 1);
  free_one();  // the cached graph goes
  check();     // (the window a free opened is issued unrecorded)
  check();     // seen before: queued again
  free_one();  // dropped, queued, running or finished
  be.settle_graph_builds();
  const long captures = be.graph_stats().captures;
  check();
  check();  // queued once more
  be.settle_graph_builds();
  EXPECT_EQ(be.graph_stats().captures, captures + 1);
  const long replays = be.graph_stats().replays;
  check();
  check();
  EXPECT_EQ(be.graph_stats().replays, replays + 2);
  EXPECT_NE(be.diagnostics().find("ms to build in the background)"), std::string::npos)
      << be.diagnostics();
  be.free(*xb);
  be.free(*ob);
}

// The op tests' pattern (tests/ops/cuda_hybrid_test.cpp run_gdn): each step allocates its
// buffers, runs a window that uploads, computes and downloads one result, a second window that
// downloads another, then frees everything. Every step's results must be its own. (Before frees
// dropped the cached graphs, the second window replayed a graph captured over the previous
// step's buffers at the same addresses and returned another buffer's bytes: H200 run 22.)
TEST(CudaGraphs, FreshBuffersEachStep) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  CudaBackend be;
  const int64_t n = 96;
  for (int step = 0; step < 12; ++step) {
    SCOPED_TRACE(step);
    DeviceArena arena(be);
    const auto xv = random_floats(rng, n, -4.0f, 4.0f);
    const Tensor x = arena.from_host(xv, GgmlType::F32, n);
    const Tensor o = arena.poisoned(GgmlType::F32, n), d = arena.poisoned(GgmlType::F32, n);
    be.scale(x, 2.0f, o);
    be.add(o, x, o);
    be.scale(x, 0.5f, d);
    const auto half = arena.download<float>(d);
    const auto tri = arena.download<float>(o);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(float_bits(half[i]), float_bits(xv[i] * 0.5f)) << "element " << i;
      ASSERT_EQ(float_bits(tri[i]), float_bits(xv[i] * 3.0f)) << "element " << i;
    }
  }
  std::printf("[cuda graphs fresh buffers] %ld windows, %ld captures, %ld replays\n",
              be.graph_stats().windows, be.graph_stats().captures, be.graph_stats().replays);
}

// Producer-written codes (cuda_derived.cuh): a matmul takes them only while nothing has written
// over its x since the producer. Three windows on a fused and an unfused backend, each ending in
// a Q8_0 matmul of h: (1) glu -> h, then scale h in place (the codes are stale: must not be
// used); (2) glu -> h, a write elsewhere (scale x -> x2), then the matmul (codes reused); (3)
// glu -> h, then an upload over part of h (stale again). Both backends must give the same bits,
// and the fused one reuse the codes exactly once.
TEST(CudaRounding, CodesAreUsedOnlyWhileTheirFloatsAreUnchanged) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto rng = test_rng();
  constexpr int64_t kIn = 256, kOut = 64, kRows = 3;
  const auto x = random_floats(rng, kIn * kRows, -2.0f, 2.0f);
  const auto up = random_floats(rng, kIn * kRows, -2.0f, 2.0f);
  const auto patch = random_floats(rng, 32, -2.0f, 2.0f);
  const auto w = random_weights(rng, GgmlType::Q8_0, kIn, kOut);
  const auto run = [&](CudaBackend& be) {
    auto wb = be.upload_weights(w.data(), w.size());
    auto fb = be.alloc(size_t{5} * kIn * kRows * 4);  // x, x2, h, up, spare
    EXPECT_TRUE(wb.ok() && fb.ok());
    const auto at = [&](int i) {
      return make_tensor(*fb, size_t{4} * kIn * kRows * i, GgmlType::F32, kIn, kRows);
    };
    const Tensor xt = at(0), x2 = at(1), h = at(2), ut = at(3);
    Tensor wt = make_tensor(*wb, 0, GgmlType::Q8_0, kIn, kOut);
    auto ob = be.alloc(size_t{4} * kOut * kRows);
    EXPECT_TRUE(ob.ok());
    const Tensor y = make_tensor(*ob, 0, GgmlType::F32, kOut, kRows);
    std::vector<float> out;
    const auto finish = [&] {
      std::vector<float> v(static_cast<size_t>(kOut * kRows));
      be.download(*ob, 0, v.data(), v.size() * 4);
      be.sync();
      out.insert(out.end(), v.begin(), v.end());
    };
    be.upload(*fb, 0, x.data(), x.size() * 4);
    be.upload(*fb, ut.offset, up.data(), up.size() * 4);
    be.glu(xt, ut, GluKind::kSwiGLU, h);
    be.scale(h, 3.0f, h);
    be.matmul(wt, h, Tensor{}, y);
    finish();
    be.glu(xt, ut, GluKind::kSwiGLU, h);
    be.scale(xt, 3.0f, x2);
    be.matmul(wt, h, Tensor{}, y);
    finish();
    be.glu(xt, ut, GluKind::kSwiGLU, h);
    be.upload(*fb, h.offset + 4 * kIn, patch.data(), patch.size() * 4);  // row 1's first block
    be.matmul(wt, h, Tensor{}, y);
    finish();
    be.free(*ob);
    be.free(*fb);
    be.free(*wb);
    return out;
  };
  CudaBackend fused({.device = 0, .graphs = true, .pdl = true, .fuse_rounding = true});
  CudaBackend plain({.device = 0, .graphs = true, .pdl = true, .fuse_rounding = false});
  const auto a = run(fused), b = run(plain);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(float_bits(a[i]), float_bits(b[i])) << "window " << i / (kOut * kRows) << " " << i;
  EXPECT_EQ(fused.rounding_reuses(), 1);
  EXPECT_EQ(plain.rounding_reuses(), 0);
}

namespace fs = std::filesystem;

class CudaGraphModel : public ::testing::TestWithParam<const char*> {};

// Token-by-token decode of a reference model (dense qwen2; hybrid qwen35moe: Gated DeltaNet,
// MoE on the device routes) replays graphs from the third token on and gives the same logits,
// bit for bit, as with graphs, programmatic dependent launch and producer-written int8 codes
// (cuda_derived.cuh) all off, and as with only the codes off.
TEST_P(CudaGraphModel, SteppedLogitsBitwiseEqualWithGraphsPdlAndFusedRoundingOff) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  const std::string arch = GetParam(), dir = fixture_dir(arch);
  std::ifstream rf(dir + "/reference.json");
  ASSERT_TRUE(rf.good()) << "missing fixture " << dir;
  const auto toks = nlohmann::json::parse(rf)["tokens"].get<std::vector<int32_t>>();
  ASSERT_GE(toks.size(), 4u);
  const fs::path gguf =
      fs::temp_directory_path() / fmt::format("t9-cudagraph-{}-{}.gguf", arch, ::getpid());
  ASSERT_TRUE(convert::convert_hf_to_gguf({dir, gguf.string(), GgmlType::Q8_0, ""}).ok());
  CudaBackend on({.device = 0, .graphs = true, .graph_background = false});
  CudaBackend off({.device = 0, .graphs = false, .pdl = false, .fuse_rounding = false});
  // Graphs built in the background here: which steps replay depends on the host's timing, the
  // bits must not.
  CudaBackend unfused({.device = 0,
                       .graphs = true,
                       .pdl = true,
                       .fuse_rounding = false,
                       .early_weights = true,
                       .fuse_parts = false});
  const ModelRun a = run_model(on, gguf.string(), GgmlType::F16, toks);
  const ModelRun b = run_model(off, gguf.string(), GgmlType::F16, toks);
  const ModelRun c = run_model(unfused, gguf.string(), GgmlType::F16, toks);
  fs::remove(gguf);
  ASSERT_FALSE(a.stepped.empty());
  EXPECT_EQ(a.stepped, b.stepped);
  EXPECT_EQ(a.whole, b.whole);
  EXPECT_EQ(a.stepped, c.stepped);
  EXPECT_EQ(a.whole, c.whole);
  EXPECT_EQ(a.whole, a.stepped);
  // Every step's GLUs hand their codes to the down projection (at least one per layer).
  EXPECT_GE(on.rounding_reuses(), static_cast<long>(toks.size()));
  EXPECT_EQ(off.rounding_reuses(), 0);
  // q/k/v (and qwen2's gate/up, the hybrid's GDN input projections) of every layer and step ran
  // as one launch each: the same bits as `unfused`, which ran them one by one.
  EXPECT_GE(on.fused_matmuls(), static_cast<long>(toks.size()));
  EXPECT_EQ(unfused.fused_matmuls(), 0);
  // The whole-sequence pass groups 160 x 2 pairs per MoE layer on the device: the up and down
  // projections reuse the gate's sort (the stepped passes' single rows take the GEMV route).
  if (arch == "qwen35moe") {
    EXPECT_GE(on.expert_sort_reuses(), 2);
  }
  // Steps 1 and 2 run as launched (the second one's tape is captured); the rest replay.
  EXPECT_GE(on.graph_stats().replays, static_cast<long>(toks.size()) - 2);
  EXPECT_EQ(off.graph_stats().replays, 0);
  std::printf("[cuda graphs %s] %ld windows, %ld captures, %ld replays, %ld rounded x reused\n",
              arch.c_str(), on.graph_stats().windows, on.graph_stats().captures,
              on.graph_stats().replays, on.rounding_reuses());
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraphModel, ::testing::Values("qwen2", "qwen35moe"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
