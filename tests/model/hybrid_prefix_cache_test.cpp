// The prefix cache on real hybrid models (Gated DeltaNet + gated attention, issue 9): the engine
// and the model runner together, on the tiny reference configurations converted to Q8_0 GGUFs.
// An agent conversation re-sends its whole history every turn; from turn 2 on only the new
// suffix may be computed (the engine's counters), and every sampled token and its logprob must be
// bitwise those of the same conversation with the prefix cache off. Exactness, not a tolerance:
// the CPU kernels are batch- and split-invariant (docs/ARCHITECTURE.md rule 7, checked for the
// hybrids by ChunkConsistency.DefaultConfigIsBitwiseSplitInvariant), so a restored checkpoint
// plus the suffix computes the same bits as the whole history.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/convert/hf_convert.h"
#include "model/engine_runner.h"
#include "model/model.h"
#include "pipeline_check.h"
#include "snapshot_check.h"

namespace t9 {
namespace {

namespace fs = std::filesystem;

// Two models from one file: the cached and the uncached engine each need their own KV pool and
// recurrent state (an engine owns its model's block ids).
struct Loaded {
  fs::path file;
  std::unique_ptr<model::Model> model, twin;
  ~Loaded() { fs::remove(file); }
};

std::unique_ptr<model::Model> load_file(const fs::path& file, CpuBackend& backend,
                                        const model::ModelConfig& cfg = {}) {
  auto m = model::Model::load(file.string(), backend, cfg);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.message());
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

std::unique_ptr<Loaded> load_hybrid(const std::string& arch, CpuBackend& backend,
                                    const model::ModelConfig& cfg = {}) {
  auto l = std::make_unique<Loaded>();
  l->file =
      fs::temp_directory_path() / ("t9-hpc-" + arch + "-" + std::to_string(::getpid()) + ".gguf");
  const std::string dir = std::string(TEMPO9_SHARED_DIR) + "/fixtures/reference/" + arch;
  Status st = convert::convert_hf_to_gguf({dir, l->file.string(), GgmlType::Q8_0, ""});
  EXPECT_TRUE(st.ok()) << st.message();
  l->model = load_file(l->file, backend, cfg);
  l->twin = load_file(l->file, backend, cfg);
  if (!l->model || !l->twin) return nullptr;
  return l;
}

// Deterministic token ids in [1, n_vocab).
std::vector<int32_t> tokens_of(int n, uint32_t seed, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& id : t) {
    seed = seed * 1664525u + 1013904223u;
    id = 1 + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(n_vocab - 1));
  }
  return t;
}

struct Reply {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int n_cached = 0;
};

struct DriverOptions {
  bool prefix_cache = true;
  int spec_draft = 0;
  // Pipelined steps (the CPU runner computes them inside enqueue(): the engine's bookkeeping is
  // what is tested).
  bool pipeline = false;
  bool logprobs = true;
};

class Driver {
 public:
  Driver(model::Model& m, DriverOptions o) : runner_(m), logprobs_(o.logprobs) {
    engine::EngineConfig c;
    c.kv.pool.block_size_tokens = m.config().kv_block_size;
    c.kv.pool.max_blocks = 512;
    c.kv.enable_prefix_cache = o.prefix_cache;
    c.scheduler.prefill_chunk_tokens = 64;  // long prompts take several steps
    c.scheduler.max_batch_tokens = 160;
    c.max_context_tokens = 8192;
    c.check_every_step = true;
    c.scheduler.spec = {o.spec_draft, 3, 1};
    c.pipeline = o.pipeline ? engine::StepPipeline::kOn : engine::StepPipeline::kOff;
    engine_ = std::make_unique<engine::Engine>(c, runner_);
  }

  // Runs the prompts together (one engine, batched steps) until all are done.
  std::vector<Reply> generate(const std::vector<std::vector<int32_t>>& prompts, int n_gen) {
    std::vector<std::shared_ptr<Reply>> out;
    for (const auto& p : prompts) {
      auto r = std::make_shared<Reply>();
      engine::GenerateRequest req;
      req.prompt = p;
      req.max_tokens = n_gen;
      req.sampling.temperature = 0.0f;
      req.logprobs = logprobs_;
      req.on_event = [r](const engine::TokenEvent& ev) {
        if (ev.token >= 0) {
          r->tokens.push_back(ev.token);
          r->logprobs.push_back(ev.logprob);
        }
        EXPECT_TRUE(ev.error.empty()) << ev.error;
        r->n_cached = ev.usage.n_cached_prompt_tokens;
      };
      EXPECT_TRUE(engine_->submit(std::move(req)).ok());
      out.push_back(r);
    }
    engine_->run_until_idle();
    std::vector<Reply> replies;
    for (auto& r : out) replies.push_back(*r);
    return replies;
  }

  engine::Engine& engine() { return *engine_; }

 private:
  model::EngineRunner runner_;
  bool logprobs_;
  std::unique_ptr<engine::Engine> engine_;
};

class HybridPrefixCache : public ::testing::TestWithParam<std::string> {};

// A state snapshot taken inside a step is the state of a step ending there (snapshot_check.h).
TEST_P(HybridPrefixCache, SnapshotInsideAStepIsTheStateOfAStepEndingThere) {
  CpuBackend backend;
  auto loaded = load_hybrid(GetParam(), backend);
  ASSERT_NE(loaded, nullptr);
  testing::check_snapshot_inside_step(*loaded->model, *loaded->twin,
                                      tokens_of(37, 11, loaded->model->n_vocab()));
}

// Pipelined decode steps on the hybrids: the recurrent state advances by steps enqueued before
// the previous one is waited for, each reading its input ids on the backend (pipeline_check.h).
TEST_P(HybridPrefixCache, PipelinedDecodeEqualsForwardSteps) {
  CpuBackend backend;
  auto loaded = load_hybrid(GetParam(), backend);
  ASSERT_NE(loaded, nullptr);
  const int n_vocab = loaded->model->n_vocab();
  testing::check_pipelined_decode(*loaded->model, *loaded->twin, tokens_of(21, 3, n_vocab),
                                  tokens_of(6, 4, n_vocab), 24);
}

TEST_P(HybridPrefixCache, FiveTurnAgentConversationIsExactAndComputesOnlyTheSuffix) {
  CpuBackend backend;
  auto loaded = load_hybrid(GetParam(), backend);
  ASSERT_TRUE(loaded);
  model::Model& m = *loaded->model;
  constexpr int kGen = 24;
  const int bs = m.config().kv_block_size;
  Driver cached(m, {}), plain(*loaded->twin, {.prefix_cache = false});
  std::vector<int32_t> history = tokens_of(150, 11, m.n_vocab());  // system prompt + first ask
  std::vector<int32_t> prev;
  for (int turn = 0; turn < 5; ++turn) {
    SCOPED_TRACE(::testing::Message() << GetParam() << " turn " << turn);
    const int64_t before = cached.engine().stats().n_computed_tokens;
    const Reply a = cached.generate({history}, kGen)[0];
    const int64_t computed = cached.engine().stats().n_computed_tokens - before;
    const Reply b = plain.generate({history}, kGen)[0];
    ASSERT_EQ(a.tokens.size(), static_cast<size_t>(kGen));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.logprobs, b.logprobs);  // bitwise
    EXPECT_EQ(b.n_cached, 0);
    const int n_prompt = static_cast<int>(history.size());
    if (turn == 0) {
      EXPECT_EQ(a.n_cached, 0);
    } else {
      // The previous turn computed its prompt and all but its last sampled token; the state at
      // the last block boundary of that is restored, so only the rest is computed.
      const int prev_computed = static_cast<int>(prev.size()) + kGen - 1;
      EXPECT_EQ(a.n_cached, prev_computed / bs * bs);
      EXPECT_LT(n_prompt - a.n_cached, bs + 20 + 1);  // < one block + the new user message
    }
    EXPECT_EQ(computed, n_prompt - a.n_cached + kGen - 1);
    std::printf("[%s] turn %d: prompt %d, cached %d, computed %ld\n", GetParam().c_str(), turn,
                n_prompt, a.n_cached, static_cast<long>(computed));
    prev = history;
    history.insert(history.end(), a.tokens.begin(), a.tokens.end());
    const auto user = tokens_of(20, 100 + turn, m.n_vocab());
    history.insert(history.end(), user.begin(), user.end());
  }
  EXPECT_GT(cached.engine().stats().n_state_checkpoints, 0);
}

// Three agents with one system prompt, each turn submitted together so steps batch them: the
// first agents' turn 0 finds nothing, later turns hit their own history, and batches mixing hits,
// restores and decodes still give the uncached bits.
TEST_P(HybridPrefixCache, ConcurrentAgentsSharingASystemPromptAreExact) {
  CpuBackend backend;
  auto loaded = load_hybrid(GetParam(), backend);
  ASSERT_TRUE(loaded);
  model::Model& m = *loaded->model;
  constexpr int kGen = 12, kAgents = 3;
  Driver cached(m, {}), plain(*loaded->twin, {.prefix_cache = false});
  const std::vector<int32_t> system = tokens_of(100, 7, m.n_vocab());
  std::vector<std::vector<int32_t>> hist(kAgents, system);
  for (int a = 0; a < kAgents; ++a) {
    auto ask = tokens_of(10 + a, 50 + a, m.n_vocab());
    hist[a].insert(hist[a].end(), ask.begin(), ask.end());
  }
  int total_cached = 0;
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE(::testing::Message() << GetParam() << " turn " << turn);
    const std::vector<Reply> x = cached.generate(hist, kGen);
    const std::vector<Reply> y = plain.generate(hist, kGen);
    for (int a = 0; a < kAgents; ++a) {
      EXPECT_EQ(x[a].tokens, y[a].tokens) << "agent " << a;
      EXPECT_EQ(x[a].logprobs, y[a].logprobs) << "agent " << a;
      total_cached += x[a].n_cached;
      hist[a].insert(hist[a].end(), x[a].tokens.begin(), x[a].tokens.end());
      auto more = tokens_of(8, 200 + 10 * turn + a, m.n_vocab());
      hist[a].insert(hist[a].end(), more.begin(), more.end());
    }
  }
  EXPECT_GT(total_cached, 0);
  EXPECT_LT(cached.engine().stats().n_computed_tokens, plain.engine().stats().n_computed_tokens);
}

// Speculative decoding on the hybrids: a speculative step whose drafts are rejected is undone
// (the recurrent state saved before it is restored); kept drafts save steps. Tokens and logprobs
// must be bitwise those of plain decoding, with the prefix cache on.
TEST_P(HybridPrefixCache, SpeculativeDecodingIsExact) {
  CpuBackend backend;
  auto loaded = load_hybrid(GetParam(), backend);
  ASSERT_TRUE(loaded);
  model::Model& m = *loaded->model;
  Driver spec(m, {.spec_draft = 4}), plain(*loaded->twin, {});
  std::vector<int32_t> p;  // a repetitive prompt, so that n-gram drafts exist
  const auto unit = tokens_of(12, 3, m.n_vocab());
  for (int r = 0; r < 8; ++r) p.insert(p.end(), unit.begin(), unit.end());
  const Reply a = spec.generate({p}, 160)[0];
  const Reply b = plain.generate({p}, 160)[0];
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logprobs, b.logprobs);
  const engine::EngineStats st = spec.engine().stats();
  EXPECT_GT(st.n_draft_tokens, 0);
  std::printf("[%s] speculative: %ld drafts, %ld kept, %ld vs %ld steps\n", GetParam().c_str(),
              static_cast<long>(st.n_draft_tokens), static_cast<long>(st.n_accepted_draft_tokens),
              static_cast<long>(st.n_steps), static_cast<long>(plain.engine().stats().n_steps));
}

// Pipelined steps (see the test below) on `arch`, loaded with rows_per_call logit rows per call.
void check_pipelined_conversation(const std::string& arch, int rows_per_call) {
  CpuBackend backend;
  model::ModelConfig cfg;
  cfg.max_logit_rows_per_call = rows_per_call;
  auto loaded = load_hybrid(arch, backend, cfg);
  ASSERT_TRUE(loaded);
  model::Model& m = *loaded->model;
  constexpr int kGen = 19, kAgents = 2;
  Driver piped(m, {.pipeline = true, .logprobs = false});
  Driver plain(*loaded->twin, {.logprobs = false});
  std::vector<std::vector<int32_t>> hist(kAgents, tokens_of(70, 9, m.n_vocab()));
  for (int a = 0; a < kAgents; ++a) {
    auto ask = tokens_of(5 + 4 * a, 60 + a, m.n_vocab());
    hist[a].insert(hist[a].end(), ask.begin(), ask.end());
  }
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE(::testing::Message() << arch << " turn " << turn);
    const std::vector<Reply> x = piped.generate(hist, kGen);
    const std::vector<Reply> y = plain.generate(hist, kGen);
    for (int a = 0; a < kAgents; ++a) {
      ASSERT_EQ(x[a].tokens.size(), static_cast<size_t>(kGen)) << "agent " << a;
      EXPECT_EQ(x[a].tokens, y[a].tokens) << "agent " << a;
      EXPECT_EQ(x[a].n_cached, y[a].n_cached) << "agent " << a;
      hist[a].insert(hist[a].end(), x[a].tokens.begin(), x[a].tokens.end());
      auto more = tokens_of(7, 300 + 10 * turn + a, m.n_vocab());
      hist[a].insert(hist[a].end(), more.begin(), more.end());
    }
  }
  const engine::EngineStats st = piped.engine().stats();
  EXPECT_EQ(st.n_pipelined_steps, 3 * (kGen - 1));  // every decode step after the prompt's
  EXPECT_EQ(st.n_computed_tokens, plain.engine().stats().n_computed_tokens);
  std::printf("[%s] pipelined: %ld of %ld steps planned ahead\n", arch.c_str(),
              static_cast<long>(st.n_pipelined_steps), static_cast<long>(st.n_steps));
}

// Pipelined steps with the prefix cache on: each turn's decode steps are planned while the one
// before computes, with "the token it samples" as their input, and the checkpoint each reply
// publishes at its end must be the one unpipelined decoding publishes (the next turn's hit
// length proves where it is; its restore computing the same tokens proves what it holds).
// With one logit row per backend call, two rows are more than the model keeps on the backend
// (Model::previous_tokens): the runner then waits and takes them on the host, same tokens.
TEST_P(HybridPrefixCache, PipelinedStepsWithThePrefixCacheAreExact) {
  for (const int rows_per_call : {64, 1}) {
    SCOPED_TRACE(::testing::Message() << rows_per_call << " logit rows per call");
    check_pipelined_conversation(GetParam(), rows_per_call);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Hybrid, HybridPrefixCache,
                         ::testing::Values("qwen3next", "qwen35", "qwen35moe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace t9
