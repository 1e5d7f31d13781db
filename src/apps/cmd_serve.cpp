// `tempo9 serve -m MODEL.gguf [--host H] [--port P] ...`: loads the model on the CPU backend
// (--backend cuda: the GPU), starts the engine thread, and serves OpenAI, Anthropic and Ollama
// on one port until SIGINT/SIGTERM.
// The seed's spelling `tempo9 --gguf MODEL --port 11435` is the same command (see main.cpp).
#include <signal.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "apps/chat_setup.h"
#include "apps/command.h"
#include "apps/engine_options.h"
#include "backend/cpu/cpu_backend.h"
#include "chat/chat_template.h"
#include "chat/tool_calls/dialects.h"
#include "core/log.h"
#include "engine/scheduler.h"
#include "model/engine_runner.h"
#include "model/model.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace t9::apps {
namespace {

struct ServeOptions {
  std::string model_path;
  server::ServerConfig server;
  int ctx = 0;  // 0: the model's training context
  int threads = 0;
  std::string backend = "cpu";
  std::string tool_grammar = "auto";  // auto: on for the CPU backend (server::ServerConfig)
  std::string warmup = "auto";        // auto: on for --backend cuda (warm_up)
  int max_seqs = engine::SchedulerConfig{}.max_seqs;
  int max_batch_tokens = engine::SchedulerConfig{}.max_batch_tokens;
  int prefill_chunk = engine::SchedulerConfig{}.prefill_chunk_tokens;
  int spec_draft = 0;  // speculative prompt-lookup drafts per step (0 = off)
  engine::StepPipeline pipeline = engine::StepPipeline::kAuto;
  int kv_block_size = 16;
  std::string kv_memory = "0.5";     // bytes (suffix K/M/G) or a fraction of RAM (GPU: free memory)
  std::string state_memory = "0.1";  // recurrent-state checkpoints (hybrid models): of RAM
  bool no_prefix_cache = false;
};

// "8G", "512M", "1073741824" or a fraction ("0.5") of `whole`: the backend's free memory when it
// has its own (a GPU's, after the weights were uploaded), else physical RAM.
// `flag` names the option in errors.
Result<size_t> parse_memory(const char* flag, const std::string& s, std::optional<size_t> whole) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v > 0)) return error("{}: '{}' is not a size", flag, s);
  const std::string suffix(end);
  if (suffix.empty() && v <= 1.0) {
    if (whole) return static_cast<size_t>(v * static_cast<double>(*whole));
    struct sysinfo si {};
    sysinfo(&si);
    return static_cast<size_t>(v * static_cast<double>(si.totalram) * si.mem_unit);
  }
  double mult = 1;
  if (suffix == "K" || suffix == "k")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return error("{}: unknown suffix '{}'", flag, suffix);
  return static_cast<size_t>(v * mult);
}

std::string quant_label(const gguf::GgufFile& f) {
  static const char* kFileTypes[] = {"F32",    "F16",    "Q4_0",   "Q4_1",   "Q4_1_SOME_F16",
                                     "Q4_2",   "Q4_3",   "Q8_0",   "Q5_0",   "Q5_1",
                                     "Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
                                     "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"};
  const uint32_t ft = f.get_or<uint32_t>("general.file_type", 999);
  if (ft < std::size(kFileTypes)) return kFileTypes[ft];
  if (ft == 32) return "BF16";
  return "unknown";
}

// Before the port opens, a few sequences' prompts and decode steps (as llama-server's start-up
// warm-up): a GPU loads each kernel at its first launch and captures a graph per decode batch
// size, costs the first agents would otherwise pay in their time to first token. The prompts
// differ in their first token (no prefix is shared) and are otherwise arbitrary ids; the
// engine's counters are zeroed after, so /metrics starts from the first real request.
Status warm_up(engine::Engine& eng, int n_vocab, int n_seqs, int n_prompt, int n_gen) {
  const auto t0 = std::chrono::steady_clock::now();
  int n_done = 0;
  std::string err;
  for (int s = 0; s < n_seqs; ++s) {
    engine::GenerateRequest req;
    for (int i = 0; i < n_prompt; ++i)
      req.prompt.push_back(static_cast<engine::TokenId>((1000 + 7919 * s + 31 * i) % n_vocab));
    req.max_tokens = n_gen;
    req.sampling.temperature = 0.0f;
    req.on_event = [&n_done, &err](const engine::TokenEvent& ev) {
      if (ev.finish == engine::FinishReason::kError && err.empty()) err = ev.error;
      if (ev.finish != engine::FinishReason::kNone) ++n_done;
    };
    T9_TRY(eng.submit(std::move(req)));
  }
  while (n_done < n_seqs && eng.step()) {
  }
  if (!err.empty()) return error("warm-up: {}", err);
  eng.reset_counters();
  T9_LOG_INFO(
      "warm-up: {} sequences of {} prompt tokens and {} generated in {:.0f} ms", n_seqs, n_prompt,
      n_gen,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return {};
}

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

int serve(ServeOptions& opt) {
  ::signal(SIGPIPE, SIG_IGN);  // a client that vanishes mid-write must not kill the server
  auto be = make_backend(opt.backend, opt.threads);
  if (!be.ok()) {
    std::fprintf(stderr, "tempo9 serve: %s\n", be.message().c_str());
    return 1;
  }
  Backend& backend = **be;
  model::ModelConfig mcfg;
  mcfg.kv_block_size = opt.kv_block_size;
  T9_LOG_INFO("loading {}", opt.model_path);
  auto model = model::Model::load(opt.model_path, backend, mcfg);
  if (!model.ok()) {
    std::fprintf(stderr, "tempo9 serve: %s\n", model.message().c_str());
    return 1;
  }
  model::Model& m = **model;
  auto tokenizer = tok::Tokenizer::from_gguf(m.file());
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tempo9 serve: %s\n", tokenizer.message().c_str());
    return 1;
  }
  const tok::Tokenizer& tk = *tokenizer;
  const std::string tmpl_src = m.file().get_or<std::string>("tokenizer.chat_template", "");
  auto tmpl = load_chat_template(m.file(), tk);
  if (!tmpl.ok()) {
    std::fprintf(stderr, "tempo9 serve: %s\n", tmpl.message().c_str());
    return 1;
  }

  const int n_ctx = opt.ctx > 0 ? opt.ctx : m.hparams().n_ctx_train;
  const std::optional<size_t> free_bytes = backend.free_memory_bytes();
  auto kv_bytes = parse_memory("--kv-memory", opt.kv_memory, free_bytes);
  // Checkpoints are snapshots in backend memory (model::StateSnapshot), as the KV pool.
  auto state_bytes = parse_memory("--state-memory", opt.state_memory, free_bytes);
  for (const auto* r : {&kv_bytes, &state_bytes}) {
    if (!r->ok()) {
      std::fprintf(stderr, "tempo9 serve: %s\n", r->message().c_str());
      return 2;
    }
  }
  const auto& hp = m.hparams();
  const size_t bytes_per_block = 2ull * hp.n_layer * hp.n_head_kv * hp.head_dim *
                                 opt.kv_block_size * traits(mcfg.kv_type).block_bytes;
  engine::EngineConfig ecfg;
  ecfg.max_context_tokens = n_ctx;
  ecfg.scheduler.max_seqs = opt.max_seqs;
  ecfg.scheduler.max_batch_tokens = opt.max_batch_tokens;
  ecfg.scheduler.prefill_chunk_tokens = opt.prefill_chunk;
  ecfg.kv.pool.block_size_tokens = opt.kv_block_size;
  ecfg.kv.pool.max_blocks = static_cast<int>(std::max<size_t>(*kv_bytes / bytes_per_block, 16));
  ecfg.kv.enable_prefix_cache = !opt.no_prefix_cache;
  ecfg.state_checkpoint_budget_bytes = static_cast<int64_t>(*state_bytes);
  ecfg.scheduler.spec.max_draft = opt.spec_draft;
  ecfg.pipeline = opt.pipeline;
  server::Metrics metrics;
  bool warming = false;  // the warm-up's steps stay out of the step-time histogram
  ecfg.on_step = [&metrics, &warming](double step_ms) {
    if (!warming) metrics.observe_step(step_ms);
  };
  model::EngineRunner runner(m);
  engine::Engine eng(ecfg, runner);
  if (opt.warmup == "on" || (opt.warmup == "auto" && opt.backend == "cuda")) {
    warming = true;
    const Status w = warm_up(eng, m.n_vocab(), std::min(opt.max_seqs, 8),
                             std::min({opt.prefill_chunk, 256, std::max(1, n_ctx / 4)}), 4);
    warming = false;
    if (!w.ok()) {
      std::fprintf(stderr, "tempo9 serve: %s\n", w.message().c_str());
      return 1;
    }
  }

  server::ServerContext ctx;
  ctx.config = opt.server;
  // A lazily checked tool call costs a CPU step ~1%. On CUDA the device decides the token and
  // the host checks it at the runner's wait (the step ahead is planned meanwhile; a refused
  // token's row there is dropped), but what that costs an agent load on a GPU has not been
  // measured yet (bench/device_plans/few_row_mma_8b.sh), so auto leaves it off there for now.
  ctx.config.tool_grammar =
      opt.tool_grammar == "on" || (opt.tool_grammar == "auto" && opt.backend == "cpu");
  ctx.engine = &eng;
  ctx.tokenizer = &tk;
  ctx.chat_template = tmpl->has_value() ? &**tmpl : nullptr;
  ctx.tool_dialect = opt.server.tool_dialect.empty()
                         ? std::string(chat::detect_tool_call_dialect(tmpl_src))
                         : opt.server.tool_dialect;
  ctx.metrics = &metrics;
  ctx.eog_ids = eog_token_ids(tk);
  auto& mi = ctx.model;
  mi.file_path = opt.model_path;
  mi.id = opt.server.model_alias.empty() ? std::filesystem::path(opt.model_path).stem().string()
                                         : opt.server.model_alias;
  mi.architecture = hp.arch;
  mi.quantization = quant_label(m.file());
  mi.parameter_size = m.file().get_or<std::string>("general.size_label", "");
  for (const auto& t : m.file().tensors()) mi.n_params += t.n_elements;
  mi.file_bytes = m.file().file_size();
  mi.n_ctx = n_ctx;
  mi.chat_template_source = tmpl_src;

  server::HttpServer http(ctx);
  if (Status s = http.bind(); !s.ok()) {
    std::fprintf(stderr, "tempo9 serve: %s\n", s.message().c_str());
    return 1;
  }
  eng.start();
  http.set_ready(true);
  T9_LOG_INFO(
      "serving {} ({}, {}, ctx {}, tool dialect {}) on http://{}:{} — OpenAI /v1, Anthropic "
      "/v1/messages, Ollama /api",
      mi.id, mi.architecture, mi.quantization, n_ctx, ctx.tool_dialect, opt.server.host,
      http.port());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::thread watcher([&] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
  });
  http.serve();
  g_stop = 1;
  watcher.join();
  eng.stop();
  T9_LOG_INFO("stopped");
  return 0;
}

const bool registered = register_command(Command{
    "serve", "Serve a GGUF model over OpenAI, Anthropic and Ollama APIs on one port",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<ServeOptions>();
      sub.add_option("-m,--model,--gguf", o->model_path, "GGUF model file")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--host", o->server.host, "address to listen on")->capture_default_str();
      sub.add_option("--port", o->server.port, "port (0: any free port)")->capture_default_str();
      sub.add_option("--api-key", o->server.api_key, "require this key (Bearer or x-api-key)");
      sub.add_option("--model-alias", o->server.model_alias,
                     "model id reported by /v1/models and /api/tags");
      sub.add_flag("--strict-model-names", o->server.strict_model_names,
                   "unknown model names get the protocol's 404");
      sub.add_option("-c,--ctx", o->ctx, "context length in tokens (0: the model's)")
          ->capture_default_str();
      sub.add_option("-t,--threads", o->threads, "compute threads (0: all cores)")
          ->capture_default_str();
      sub.add_option("--backend", o->backend, "compute backend: cpu or cuda")
          ->check(CLI::IsMember({"cpu", "cuda"}))
          ->capture_default_str();
      sub.add_option("--max-seqs", o->max_seqs, "concurrent sequences")->capture_default_str();
      sub.add_option("--max-batch-tokens", o->max_batch_tokens, "tokens per engine step")
          ->capture_default_str();
      sub.add_option("--prefill-chunk", o->prefill_chunk,
                     "most prompt tokens of one sequence per step")
          ->capture_default_str();
      sub.add_option("--kv-block-size", o->kv_block_size, "tokens per KV block")
          ->capture_default_str();
      sub.add_option(
             "--kv-memory", o->kv_memory,
             "KV cap: bytes (K/M/G suffix) or fraction of RAM (--backend cuda: of free GPU memory)")
          ->capture_default_str();
      sub.add_option("--state-memory", o->state_memory,
                     "hybrid models: memory for the prefix cache's recurrent-state "
                     "checkpoints (one per cached conversation end and shared prefix): bytes "
                     "(K/M/G suffix) or fraction of RAM (--backend cuda: of free GPU memory)")
          ->capture_default_str();
      sub.add_flag("--no-prefix-cache", o->no_prefix_cache, "disable prefix caching");
      sub.add_option("--spec-draft", o->spec_draft,
                     "speculative decoding: up to N prompt-lookup draft tokens per step for greedy "
                     "requests (0 = off; outputs are identical either way)")
          ->check(CLI::Range(0, 16))
          ->capture_default_str();
      add_pipeline_option(sub, o->pipeline);
      sub.add_option("--tool-dialect", o->server.tool_dialect,
                     "tool-call dialect (hermes, qwen_xml, none); default: from the template");
      sub.add_option("--tool-grammar", o->tool_grammar,
                     "check tool calls under tool_choice auto with a grammar from their opening "
                     "marker on (auto: on for --backend cpu, off for cuda)")
          ->check(CLI::IsMember({"auto", "on", "off"}))
          ->capture_default_str();
      sub.add_option("--warmup", o->warmup,
                     "before serving, run a few short sequences so the first requests pay no "
                     "first-use costs (auto: on for --backend cuda)")
          ->check(CLI::IsMember({"auto", "on", "off"}))
          ->capture_default_str();
      sub.add_option("--http-threads", o->server.n_http_threads,
                     "HTTP worker threads (max open connections)")
          ->capture_default_str();
      sub.add_option("--max-body-bytes", o->server.max_body_bytes, "largest request body")
          ->capture_default_str();
      sub.add_option("--max-queued", o->server.max_queued,
                     "waiting requests before new ones get 503")
          ->capture_default_str();
      sub.add_option("--default-max-tokens", o->server.default_max_tokens,
                     "max_tokens when a chat request names none")
          ->capture_default_str();
      return [o] { return serve(*o); };
    }});

}  // namespace
}  // namespace t9::apps
