// Whole-model check of the CUDA backend: the tiny random HF models in
// ../shared/fixtures/reference, every architecture we support (dense llama, qwen2, qwen3,
// gemma3: GQA, QK-norm, NeoX RoPE, sliding window, GeGLU; qwen3moe's routed experts; the hybrid
// qwen3next / qwen35 / qwen35moe: Gated DeltaNet, gated attention, routed + shared experts), are
// converted with our converter and run through the shared forward pass on CUDA, then compared
// with the transformers logits stored beside them and with the CPU backend. The fixture folder is
// TEMPO9_SHARED_DIR from the environment when set (the device machine gets a copy), else the
// build's. Compiled to nothing without CUDA; a missing fixture fails the test.
#ifdef TEMPO9_HAVE_CUDA

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "model/convert/hf_convert.h"
#include "model/model.h"
#include "model/pipeline_check.h"
#include "model/session.h"
#include "model/snapshot_check.h"
#include "ops_test_util.h"

namespace t9::test {
namespace {

using namespace cuda_util;

namespace fs = std::filesystem;

class CudaModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaModel, MatchesTransformersAndCpu) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  const std::string arch = GetParam(), dir = fixture_dir(arch);
  std::ifstream rf(dir + "/reference.json");
  ASSERT_TRUE(rf.good()) << "missing fixture " << dir;
  const auto toks = nlohmann::json::parse(rf)["tokens"].get<std::vector<int32_t>>();
  const int n_pos = static_cast<int>(toks.size());
  CudaBackend gpu;
  CpuBackend cpu;
  for (GgmlType wt : {GgmlType::F32, GgmlType::Q8_0}) {
    SCOPED_TRACE(type_name(wt));
    const fs::path gguf = fs::temp_directory_path() /
                          fmt::format("t9-cuda-{}-{}-{}.gguf", arch, type_name(wt), ::getpid());
    ASSERT_TRUE(convert::convert_hf_to_gguf({dir, gguf.string(), wt, ""}).ok());
    // F32 weights: F32 KV isolates the forward pass, as the CPU parity test does.
    const GgmlType kv = wt == GgmlType::F32 ? GgmlType::F32 : GgmlType::F16;
    const ModelRun g = run_model(gpu, gguf.string(), kv, toks);
    const ModelRun c = run_model(cpu, gguf.string(), kv, toks);
    ASSERT_EQ(g.whole.size(), c.whole.size());
    ASSERT_EQ(g.stepped.size(), g.whole.size());
    const int n_vocab = static_cast<int>(g.whole.size()) / n_pos;
    const auto ref = read_npy(dir + "/logits.npy", g.whole.size());
    const Cmp gw = compare(g.whole, ref, n_pos, n_vocab),
              gs = compare(g.stepped, ref, n_pos, n_vocab);
    const Cmp cw = compare(c.whole, ref, n_pos, n_vocab);
    const Cmp gc = compare(g.whole, c.whole, n_pos, n_vocab);
    std::printf(
        "[cuda model %s %s] vs transformers: whole top-1 %d/%d max|d| %.2e mean|d| %.2e; "
        "stepped max|d| %.2e | cpu vs transformers mean|d| %.2e | cuda vs cpu max|d| "
        "%.2e top-1 %d/%d\n",
        arch.c_str(), std::string(type_name(wt)).c_str(), gw.top1, n_pos, gw.max_abs, gw.mean_abs,
        gs.max_abs, cw.mean_abs, gc.max_abs, gc.top1, n_pos);
    // Every op is batch-invariant, attention reads the same K/V and the delta rule runs token by
    // token in both, so one pass and token by token give the same bits.
    EXPECT_EQ(g.whole, g.stepped);
    if (wt == GgmlType::F32) {
      // Same bound as the CPU parity test (tests/model/reference_parity_test.cpp): fp32 both
      // sides, logits O(1); 1e-4 leaves ~50x room over summation-order differences, a real bug (a
      // wrong head mapping, decay, gate or expert) moves logits by >= 1e-2.
      EXPECT_EQ(gw.top1, n_pos);
      EXPECT_LT(gw.max_abs, 1e-4);
      EXPECT_LT(gs.max_abs, 1e-4);
    } else {
      // Q8_0: CUDA and the CPU round activations to int8 per 32 the same way (the dominant
      // error beside the weights'); the sums run in other orders and CUDA's attention and
      // norms are not rounded the same, so CUDA must be about as close to the fp32 model as
      // the CPU: 25% slack for which rounding errors happen to cancel.
      EXPECT_LE(gw.mean_abs, 1.25 * cw.mean_abs);
      EXPECT_GT(gw.mean_abs, 0.0);  // the weights really were rounded
    }
    fs::remove(gguf);
  }
}

// Two models from one fixture converted to Q8_0, on one backend (a test and its twin run).
struct Twins {
  fs::path gguf;
  std::unique_ptr<model::Model> a, b;
  ~Twins() { fs::remove(gguf); }
};

std::unique_ptr<Twins> load_twins(const std::string& arch, CudaBackend& gpu) {
  auto t = std::make_unique<Twins>();
  t->gguf = fs::temp_directory_path() / fmt::format("t9-cuda-twin-{}-{}.gguf", arch, ::getpid());
  const Status st =
      convert::convert_hf_to_gguf({fixture_dir(arch), t->gguf.string(), GgmlType::Q8_0, ""});
  EXPECT_TRUE(st.ok()) << st.message();
  auto a = model::Model::load(t->gguf.string(), gpu, model::ModelConfig{});
  auto b = model::Model::load(t->gguf.string(), gpu, model::ModelConfig{});
  EXPECT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.message() : a.message());
  if (!st.ok() || !a.ok() || !b.ok()) return nullptr;
  t->a = std::move(a).value();
  t->b = std::move(b).value();
  return t;
}

// Token ids 1 + (i * step) % (n_vocab - 1) for i < n.
std::vector<int32_t> spread_tokens(int n, int step, int n_vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(1 + (i * step) % (n_vocab - 1));
  return t;
}

// The engine's checkpoints inside a step on CUDA (the conv and the delta rule run in two calls
// around the state copy): the state a step ending there leaves, bitwise (model/snapshot_check.h).
class CudaHybridModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaHybridModel, StateSnapshotInsideAStepIsTheStateOfAStepEndingThere) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  CudaBackend gpu;
  auto t = load_twins(GetParam(), gpu);
  ASSERT_NE(t, nullptr);
  testing::check_snapshot_inside_step(*t->a, *t->b, spread_tokens(37, 7919, t->a->n_vocab()));
}

// Pipelined decode steps on CUDA: each step recorded and submitted while the one before runs (a
// stream window ended without a wait, the next staged in the other pinned buffer), its input ids
// read on the device from the previous argmax (take_tokens): the tokens of synchronous steps.
class CudaPipelinedModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaPipelinedModel, DecodeEqualsForwardSteps) {
  ASSERT_GT(cuda_device_count(), 0) << "no CUDA device: this test needs a GPU";
  CudaBackend gpu;
  auto t = load_twins(GetParam(), gpu);
  ASSERT_NE(t, nullptr);
  const int n_vocab = t->a->n_vocab();
  testing::check_pipelined_decode(*t->a, *t->b, spread_tokens(21, 7919, n_vocab),
                                  spread_tokens(6, 104729, n_vocab), 24);
  const CudaGraphStats st = gpu.graph_stats();
  std::printf("[%s] pipelined decode: %ld windows, %ld replayed, %ld captures\n", GetParam(),
              st.windows, st.replays, st.captures);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaPipelinedModel,
                         ::testing::Values("llama", "qwen3moe", "qwen35", "qwen35moe"),
                         [](const auto& info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Hybrid, CudaHybridModel,
                         ::testing::Values("qwen3next", "qwen35", "qwen35moe"),
                         [](const auto& info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Dense, CudaModel, ::testing::Values("llama", "qwen2", "qwen3", "gemma3"),
                         [](const auto& info) { return std::string(info.param); });
INSTANTIATE_TEST_SUITE_P(MoeHybrid, CudaModel,
                         ::testing::Values("qwen3moe", "qwen3next", "qwen35", "qwen35moe"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
