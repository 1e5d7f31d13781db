#include "unit/integration/probes.h"

#include <chrono>
#include <cstdio>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "model/engine_runner.h"
#include "unit/integration/real_engine.h"

namespace t9::integration {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Distinct, reproducible prompts of ordinary (non-control) token ids.
std::vector<TokenId> synthetic_prompt(int n, uint64_t seed, int n_vocab) {
  std::vector<TokenId> p(static_cast<size_t>(n));
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    // SmolLM2's control tokens sit at the bottom of the vocabulary: stay well above them.
    p[static_cast<size_t>(i)] = static_cast<TokenId>(1000 + (x >> 33) % (n_vocab - 1000));
  }
  return p;
}

}  // namespace

int rss_probe_main(int ctx_tokens) {
  const int64_t rss_start = vm_rss_kib();
  CpuBackend backend;
  auto m = model::Model::load(model_path(kSmolLM2), backend);
  if (!m.ok()) {
    std::fprintf(stderr, "rss-probe: %s\n", m.message().c_str());
    return 1;
  }
  model::Model& model = **m;
  const int bs = model.config().kv_block_size;
  EngineSetup setup;
  setup.max_blocks = (ctx_tokens + bs - 1) / bs + 1;  // as `tempo9 run --ctx` sizes it
  setup.integrity_checks = false;
  engine::EngineConfig cfg = make_engine_config(setup, bs);
  cfg.max_context_tokens = ctx_tokens;
  model::EngineRunner runner(model);
  engine::Engine eng(cfg, runner);
  const int64_t rss_load = vm_rss_kib();
  const size_t kv_load = model.kv().bytes_allocated();

  int n_generated = 0;
  engine::GenerateRequest req = greedy_request(synthetic_prompt(8, 1, model.n_vocab()), 8);
  req.on_event = [&](const engine::TokenEvent& ev) { n_generated += ev.token >= 0; };
  if (auto id = eng.submit(std::move(req)); !id.ok()) {
    std::fprintf(stderr, "rss-probe: %s\n", id.message().c_str());
    return 1;
  }
  eng.run_until_idle();
  const int64_t rss_request = vm_rss_kib();
  const auto& hp = model.hparams();
  // What a KV cache sized for the whole context up front would take (F16 K and V).
  const int64_t kv_full_ctx = 2LL * hp.n_layer * hp.n_head_kv * hp.head_dim * 2 * ctx_tokens;
  std::printf(
      "rss_probe ctx=%d max_blocks=%d rss_start_kib=%lld rss_load_kib=%lld "
      "rss_after_request_kib=%lld kv_bytes_load=%zu kv_bytes_after_request=%zu "
      "kv_full_ctx_bytes=%lld n_generated=%d\n",
      ctx_tokens, setup.max_blocks, static_cast<long long>(rss_start),
      static_cast<long long>(rss_load), static_cast<long long>(rss_request), kv_load,
      model.kv().bytes_allocated(), static_cast<long long>(kv_full_ctx), n_generated);
  return 0;
}

namespace {

// One throughput point: `n_concurrent` sequences of `n_prompt` + `n_gen` tokens, submitted
// together; prints one `engine_bench` record.
void bench_point(RealModel& rm, int n_concurrent, int n_prompt, int n_gen) {
  EngineSetup setup;  // `tempo9 serve` defaults: chunk 512, 2048 tokens per step
  setup.prefill_chunk_tokens = 512;
  setup.max_batch_tokens = 2048;
  setup.integrity_checks = false;
  EngineSession s(rm, setup);
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < n_concurrent; ++i)
    prompts.push_back(
        synthetic_prompt(n_prompt, 100 + static_cast<uint64_t>(i), rm.model->n_vocab()));
  const auto t0 = Clock::now();
  std::vector<Output> outs = s.run(prompts, n_gen);
  const double wall_s = seconds_since(t0);
  const engine::EngineStats st = s.stats();
  int64_t n_out = 0;
  for (const Output& o : outs) n_out += static_cast<int64_t>(o.tokens.size());
  const double overhead = st.total_step_ms > 0
                              ? (st.total_schedule_ms + st.total_postprocess_ms) / st.total_step_ms
                              : 0.0;
  std::printf(
      "engine_bench concurrency=%d prompt_tokens=%d gen_tokens=%d wall_s=%.3f "
      "generated=%lld gen_tok_s=%.2f steps=%lld step_ms_total=%.2f schedule_ms_total=%.3f "
      "model_ms_total=%.2f postprocess_ms_total=%.3f sched_overhead_pct=%.3f\n",
      n_concurrent, n_prompt, n_gen, wall_s, static_cast<long long>(n_out),
      static_cast<double>(n_out) / wall_s, static_cast<long long>(st.n_steps), st.total_step_ms,
      st.total_schedule_ms, st.total_model_ms, st.total_postprocess_ms, overhead * 100.0);
  std::fflush(stdout);
}

// Prefill of one n_prompt-token prompt in `chunk`-token steps: model time of each step, to see
// how a chunk's cost grows with the context before it (attention) against the fixed part.
void prefill_profile(RealModel& rm, int n_prompt, int chunk) {
  EngineSetup setup;
  setup.prefill_chunk_tokens = chunk;
  setup.max_batch_tokens = chunk;
  setup.integrity_checks = false;
  EngineSession s(rm, setup);
  engine::GenerateRequest req =
      greedy_request(synthetic_prompt(n_prompt, 77, rm.model->n_vocab()), 1);
  if (!s.engine().submit(std::move(req)).ok()) return;
  std::string per_step;
  double last_ms = 0;
  const auto t0 = Clock::now();
  for (bool more = true; more;) {
    more = s.engine().step();
    const double ms = s.stats().total_model_ms;
    per_step += fmt::format("{}{:.0f}", per_step.empty() ? "" : ",", ms - last_ms);
    last_ms = ms;
  }
  const double wall_s = seconds_since(t0);
  std::printf(
      "prefill_profile prompt_tokens=%d chunk=%d wall_s=%.3f prefill_tok_s=%.2f "
      "step_model_ms=%s\n",
      n_prompt, chunk, wall_s, n_prompt / wall_s, per_step.c_str());
  std::fflush(stdout);
}

}  // namespace

int engine_bench_main(int n_gen) {
  Result<RealModel*> rm = smollm2();
  if (!rm.ok()) {
    std::fprintf(stderr, "engine-bench: %s\n", rm.message().c_str());
    return 1;
  }
  for (int c : {1, 4, 8}) bench_point(**rm, c, 64, n_gen);
  prefill_profile(**rm, 1024, 256);
  return 0;
}

std::optional<std::map<std::string, std::string>> parse_record(const std::string& line,
                                                               const std::string& tag) {
  std::istringstream in(line);
  std::string word;
  if (!(in >> word) || word != tag) return std::nullopt;
  std::map<std::string, std::string> kv;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return kv;
}

}  // namespace t9::integration
