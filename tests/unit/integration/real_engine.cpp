#include "unit/integration/real_engine.h"

#include <cstdlib>
#include <fstream>
#include <mutex>

#include "model/engine_runner.h"

namespace t9::integration {

std::string models_dir() {
  if (const char* d = std::getenv("TEMPO9_MODELS")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/tempo9/models";
}

std::string model_path(const std::string& file) {
  return models_dir() + "/" + file;
}

namespace {

Result<std::unique_ptr<RealModel>> load_smollm2() {
  auto rm = std::make_unique<RealModel>();
  rm->backend = std::make_unique<CpuBackend>();  // all cores
  T9_ASSIGN_OR_RETURN(rm->model, model::Model::load(model_path(kSmolLM2), *rm->backend));
  T9_ASSIGN_OR_RETURN(tok::Tokenizer tk, tok::Tokenizer::from_gguf(rm->model->file()));
  rm->tokenizer = std::make_unique<tok::Tokenizer>(std::move(tk));
  return rm;
}

}  // namespace

namespace {

// Instance `i` of the process-wide SmolLM2 models, loaded on first use.
Result<RealModel*> smollm2_instance(int i) {
  static std::once_flag once[2];
  static Result<std::unique_ptr<RealModel>> loaded[2] = {error("not loaded"), error("not loaded")};
  std::call_once(once[i], [i] { loaded[i] = load_smollm2(); });
  if (!loaded[i].ok()) return error("{}: {}", model_path(kSmolLM2), loaded[i].message());
  return loaded[i]->get();
}

}  // namespace

Result<RealModel*> smollm2() {
  return smollm2_instance(0);
}

Result<RealModel*> smollm2_twin() {
  return smollm2_instance(1);
}

engine::EngineConfig make_engine_config(const EngineSetup& s, int block_size) {
  engine::EngineConfig c;
  c.scheduler.prefill_chunk_tokens = s.prefill_chunk_tokens;
  c.scheduler.max_batch_tokens = s.max_batch_tokens;
  c.scheduler.max_seqs = s.max_seqs;
  c.kv.pool.block_size_tokens = block_size;
  c.kv.pool.max_blocks = s.max_blocks;
  c.kv.enable_prefix_cache = s.prefix_cache;
  c.max_context_tokens = 1 << 17;
  c.check_every_step = s.integrity_checks;  // also in Release builds
  c.scheduler.spec = {s.spec_draft, 3, 2};
  c.pipeline = s.pipeline ? engine::StepPipeline::kOn : engine::StepPipeline::kOff;
  return c;
}

engine::GenerateRequest greedy_request(const std::vector<TokenId>& prompt, int max_tokens) {
  engine::GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

namespace {

std::unique_ptr<engine::ModelRunner> make_runner(RealModel& rm, const EngineSetup& setup) {
  auto runner = std::make_unique<model::EngineRunner>(*rm.model);
  runner->set_sample_on_host(setup.sample_on_host);
  return runner;
}

}  // namespace

EngineSession::EngineSession(RealModel& rm, const EngineSetup& setup)
    : runner_(make_runner(rm, setup)),
      engine_(std::make_unique<engine::Engine>(
          make_engine_config(setup, rm.model->config().kv_block_size), *runner_)),
      setup_(setup) {}

std::shared_ptr<Output> EngineSession::submit(const std::vector<TokenId>& prompt, int max_tokens) {
  auto out = std::make_shared<Output>();
  engine::GenerateRequest r = greedy_request(prompt, max_tokens);
  r.logprobs = setup_.logprobs;
  r.n_top_logprobs = setup_.top_logprobs;
  if (setup_.temperature > 0.0f) {
    r.sampling.temperature = setup_.temperature;
    r.sampling.top_p = setup_.top_p;
    r.sampling.top_k = setup_.top_k;
    r.sampling.seed = setup_.seed + n_submitted_;
  }
  r.sampling.repetition_penalty = setup_.repetition_penalty;
  r.sampling.presence_penalty = setup_.presence_penalty;
  ++n_submitted_;
  r.on_event = [out](const engine::TokenEvent& ev) {
    if (ev.token >= 0) {
      out->tokens.push_back(ev.token);
      out->logprobs.push_back(ev.logprob);
      out->top_logprobs.push_back(ev.top_logprobs);
    }
    out->finish = ev.finish;
    out->error = ev.error;
    out->usage = ev.usage;
  };
  Result<uint64_t> id = engine_->submit(std::move(r));
  if (!id.ok()) out->error = "submit: " + id.message();
  return out;
}

std::vector<Output> EngineSession::run(const std::vector<std::vector<TokenId>>& prompts,
                                       int max_tokens) {
  std::vector<std::shared_ptr<Output>> outs;
  for (const auto& p : prompts) outs.push_back(submit(p, max_tokens));
  engine_->run_until_idle();
  std::vector<Output> result;
  for (const auto& o : outs) result.push_back(*o);
  return result;
}

int64_t vm_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      int64_t kib = -1;
      f >> kib;
      return kib;
    }
    f.ignore(1 << 16, '\n');
  }
  return -1;
}

}  // namespace t9::integration
