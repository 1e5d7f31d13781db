// `tempo9 run`: generate text from a GGUF model on the command line, through the same engine
// (scheduler, sampler, paged KV) the server uses, driven synchronously on this thread.
//
//   tempo9 run -m MODEL -p "PROMPT" [-n N] [--temp T --top-k K --top-p P --min-p P --seed S]
//   tempo9 run -m MODEL --chat             interactive multi-turn chat (Ctrl-C ends a reply,
//                                          Ctrl-C at the prompt or Ctrl-D quits)
//   --raw: the prompt is plain text (BOS as the file's metadata says), no chat formatting.
//   --parallel N: N copies of the prompt as N concurrent requests (one batch of N rows per decode
//   step, the prompt's blocks shared through the prefix cache); the first one's text streams.
//   For timing a batched step without the HTTP server (bench/h200_bench.sh kernels).
//   --warmup: before the timed run, one untimed run of the same shape (llama-bench's warm-up), so
//   that the timed prompt and decode steps do not pay first-use costs (the CUDA driver loads a
//   kernel at its first launch, scratch grows, each decode batch size captures its graph once).
//   --logprobs N: every request asks for its tokens' log-probabilities and the N most likely
//   (as the server's `logprobs` / `top_logprobs`); the first request's mean log-probability and
//   its first token's top list go to stderr (compare TEMPO9_SAMPLE_ON_HOST=1: the host's).
//
// Generated text streams to stdout; load progress (on a terminal) and timings go to stderr.
//
// Chat formatting: until the Jinja engine (src/chat) can render the file's template, the common
// families are recognised from the template text and vocabulary: ChatML (<|im_start|>; the
// template's default system prompt is kept) and Gemma turns (<start_of_turn>). Other models
// fall back to raw text with a warning.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/chat_setup.h"
#include "apps/command.h"
#include "apps/engine_options.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/engine_runner.h"
#include "model/model.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace t9::apps {
namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  bool chat = false;
  bool raw = false;
  int n_predict = 256;
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  std::optional<uint64_t> seed;
  int ctx = 4096;
  int threads = 0;
  std::string backend = "cpu";
  bool ignore_eos = false;
  int parallel = 1;  // copies of the prompt run side by side (not with --chat)
  bool warmup = false;
  int logprobs = -1;  // >= 0: logprobs and this many top ones for every request
  engine::StepPipeline pipeline = engine::StepPipeline::kAuto;
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) {
  g_interrupted.store(true);
}

// No SA_RESTART: a Ctrl-C while reading the chat prompt makes the read fail, so the loop ends.
void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

// A terminal progress bar on stderr (only when stderr is a TTY).
model::LoadProgress progress_bar() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](int done, int total) {
    const int width = 40, filled = done * width / total;
    std::fprintf(stderr, "\rloading [%s%s] %3d%%", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), done * 100 / total);
    if (done == total) std::fprintf(stderr, "\r%*s\r", width + 20, "");
  };
}

class Runner {
 public:
  Runner(const RunOptions& opt, model::Model& m, tok::Tokenizer& tok)
      : opt_(opt), model_(m), tok_(tok), runner_(m), engine_(engine_config(opt, m), runner_) {
    for (tok::TokenId id : eog_token_ids(tok)) eog_.push_back(id);
  }

  // One untimed run shaped like generate(prompt_ids): as many requests, the same prompt length,
  // up to 8 generated tokens (decode steps of the same batch size). Its prompts differ from the
  // real one in the first token, so the prefix cache serves the timed run nothing from it. The
  // engine's step counters are read again after it (print_timings reports the timed run only).
  Status warm_up(std::vector<int32_t> prompt_ids) {
    if (prompt_ids.empty()) return {};
    const auto n_vocab = static_cast<int32_t>(tok_.n_tokens());
    prompt_ids[0] = (prompt_ids[0] + 1) % n_vocab;
    const int n_req = std::max(1, opt_.parallel);
    int n_done = 0;
    std::string err;
    for (int i = 0; i < n_req; ++i) {
      engine::GenerateRequest req;
      req.prompt = prompt_ids;
      req.max_tokens = std::min(opt_.n_predict, 8);
      req.sampling.temperature = 0.0f;
      ask_logprobs(req);
      req.on_event = [&n_done, &err](const engine::TokenEvent& ev) {
        if (ev.finish == engine::FinishReason::kError && err.empty()) err = ev.error;
        if (ev.finish != engine::FinishReason::kNone) ++n_done;
      };
      T9_TRY(engine_.submit(std::move(req)));
    }
    while (n_done < n_req && engine_.step()) {
    }
    base_ = engine_.stats();
    model_.backend().mark_diagnostics();
    if (!err.empty()) return error("warm-up failed: {}", err);
    return {};
  }

  // Generates a reply to `prompt_ids`, streaming it to stdout; returns the text. With
  // opt.parallel > 1 the same prompt also runs as opt.parallel - 1 more requests beside it (their
  // tokens are counted, not printed).
  Result<std::string> generate(const std::vector<int32_t>& prompt_ids) {
    const int n_req = std::max(1, opt_.parallel);
    std::vector<std::vector<engine::TokenEvent>> events(static_cast<size_t>(n_req));
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled;
    for (int i = 0; i < n_req; ++i) {
      engine::GenerateRequest req;
      req.prompt = prompt_ids;
      req.max_tokens = opt_.n_predict;
      req.sampling.temperature = opt_.temp;
      req.sampling.top_k = opt_.top_k;
      req.sampling.top_p = opt_.top_p;
      req.sampling.min_p = opt_.min_p;
      req.sampling.seed = opt_.seed;
      if (!opt_.ignore_eos) req.stop_token_ids = eog_;
      ask_logprobs(req);
      auto& mine = events[static_cast<size_t>(i)];
      req.on_event = [&mine](const engine::TokenEvent& ev) { mine.push_back(ev); };
      cancelled.push_back(req.cancelled);
      T9_TRY(engine_.submit(std::move(req)));
    }

    tok::DecodeOptions dopt;
    dopt.skip_special = true;
    tok::StreamDecoder dec(tok_, dopt);
    std::string text;
    const auto t0 = std::chrono::steady_clock::now();
    auto t_first = t0;
    int n_gen = 0;           // the first request's tokens
    long n_others = 0;       // the other requests' tokens
    double logprob_sum = 0;  // the first request's (--logprobs)
    std::vector<engine::TopLogprob> first_top;
    int n_done = 0;
    std::vector<bool> finished(static_cast<size_t>(n_req), false);
    std::string err;
    while (n_done < n_req) {
      if (g_interrupted.exchange(false))
        for (auto& c : cancelled) c->store(true);
      const bool more = engine_.step();
      for (int i = 0; i < n_req; ++i) {
        for (const engine::TokenEvent& ev : events[static_cast<size_t>(i)]) {
          if (ev.token >= 0 && ev.finish != engine::FinishReason::kStop) {
            if (i > 0) {
              ++n_others;
            } else {
              if (n_gen++ == 0) {
                t_first = std::chrono::steady_clock::now();
                first_top = ev.top_logprobs;
              }
              logprob_sum += ev.logprob;
              std::string piece;
              if (dec.push(ev.token, piece).ok()) {
                std::fwrite(piece.data(), 1, piece.size(), stdout);
                std::fflush(stdout);
                text += piece;
              }
            }
          }
          if (ev.finish == engine::FinishReason::kError && err.empty()) err = ev.error;
          if (ev.finish != engine::FinishReason::kNone && !finished[static_cast<size_t>(i)]) {
            finished[static_cast<size_t>(i)] = true;
            ++n_done;
          }
        }
        events[static_cast<size_t>(i)].clear();
      }
      if (!more) break;
    }
    std::string tail;
    dec.finish(tail);
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    print_timings(prompt_ids.size(), n_gen, t0, t_first);
    if (opt_.logprobs >= 0 && n_gen > 0) {
      std::string top;
      for (const engine::TopLogprob& t : first_top)
        top += fmt::format(" {}:{:.6f}", t.token, t.logprob);
      std::fprintf(stderr, "[logprobs: mean %.6f over %d tokens; first token's top:%s]\n",
                   logprob_sum / n_gen, n_gen, top.c_str());
    }
    if (n_req > 1) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "[parallel: %d requests, %ld tokens generated in all, %.1f tok/s]\n",
                   n_req, n_gen + n_others,
                   s > 0 ? static_cast<double>(n_gen + n_others) / s : 0.0);
    }
    if (!err.empty()) return error("generation failed: {}", err);
    return text + tail;
  }

 private:
  void ask_logprobs(engine::GenerateRequest& req) const {
    if (opt_.logprobs < 0) return;
    req.logprobs = true;
    req.n_top_logprobs = opt_.logprobs;
  }
  static engine::EngineConfig engine_config(const RunOptions& opt, model::Model& m) {
    engine::EngineConfig c;
    c.max_context_tokens = opt.ctx;
    c.pipeline = opt.pipeline;
    c.kv.pool.block_size_tokens = m.config().kv_block_size;
    // Every parallel request may hold a whole context (shared prompt blocks count once).
    c.kv.pool.max_blocks =
        std::max(1, opt.parallel) *
        ((opt.ctx + m.config().kv_block_size - 1) / m.config().kv_block_size + 1);
    return c;
  }

  void print_timings(size_t n_prompt, int n_gen, std::chrono::steady_clock::time_point t0,
                     std::chrono::steady_clock::time_point t_first) const {
    const auto t1 = std::chrono::steady_clock::now();
    const double prompt_s = std::chrono::duration<double>(t_first - t0).count();
    const double gen_s = std::chrono::duration<double>(t1 - t_first).count();
    // The first token comes out of the prompt step, so generation speed counts the others.
    std::fprintf(stderr, "[prompt: %zu tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s]\n",
                 n_prompt, prompt_s > 0 ? static_cast<double>(n_prompt) / prompt_s : 0.0, n_gen,
                 n_gen > 1 && gen_s > 0 ? (n_gen - 1) / gen_s : 0.0);
    // Where a step's time goes (host work beside the model shows up as schedule/postprocess).
    const engine::EngineStats st = engine_.stats();
    const int64_t n_steps = st.n_steps - base_.n_steps;
    if (n_steps > 0) {
      const double n = static_cast<double>(n_steps);
      std::fprintf(stderr,
                   "[engine: %lld steps, per step %.3f ms: schedule %.3f, model %.3f, "
                   "postprocess %.3f]\n",
                   static_cast<long long>(n_steps), (st.total_step_ms - base_.total_step_ms) / n,
                   (st.total_schedule_ms - base_.total_schedule_ms) / n,
                   (st.total_model_ms - base_.total_model_ms) / n,
                   (st.total_postprocess_ms - base_.total_postprocess_ms) / n);
      // Pipelined steps (--pipeline): "model" above is then the wait for a step that was
      // enqueued while the one before it computed.
      if (const int64_t n_piped = st.n_pipelined_steps - base_.n_pipelined_steps; n_piped > 0)
        std::fprintf(stderr,
                     "[pipelined: %lld of %lld steps enqueued ahead, %lld tokens discarded]\n",
                     static_cast<long long>(n_piped), static_cast<long long>(n_steps),
                     static_cast<long long>(st.n_discarded_tokens - base_.n_discarded_tokens));
    }
    // Counted since the warm-up (the stream's own log line at exit counts the whole process).
    if (const std::string d = model_.backend().diagnostics(); !d.empty())
      std::fprintf(stderr, "[%s]\n", d.c_str());
  }

  const RunOptions& opt_;
  model::Model& model_;
  tok::Tokenizer& tok_;
  model::EngineRunner runner_;
  engine::Engine engine_;
  std::vector<int32_t> eog_;
  engine::EngineStats base_;  // the counters after warm_up (zero without one)
};

// The prompt for a conversation: the model's chat template, or (raw, or a base model without a
// template) the user turns' text as it is — control-token strings in raw text are not special.
Result<std::vector<int32_t>> encode_turns(const tok::Tokenizer& tok, const chat::ChatTemplate* tmpl,
                                          const chat::Json& history) {
  if (!tmpl) {
    std::string text;
    for (const auto& m : history)
      if (m["role"] == "user") text += m["content"].get<std::string>();
    return tok.encode(text, {.add_special = true, .parse_special = false});
  }
  chat::ChatRequest req;
  req.messages = history;
  T9_ASSIGN_OR_RETURN(std::string prompt, tmpl->apply(req));
  return tok.encode_prompt(prompt);
}

int chat_loop(Runner& runner, const tok::Tokenizer& tok, const chat::ChatTemplate* tmpl) {
  chat::Json history = chat::Json::array();
  for (;;) {
    std::fprintf(stderr, "> ");
    std::string line;
    if (!std::getline(std::cin, line) || g_interrupted.load()) break;
    if (line.empty()) continue;
    history.push_back({{"role", "user"}, {"content", line}});
    auto ids = encode_turns(tok, tmpl, history);
    if (!ids.ok()) {
      std::fprintf(stderr, "error: %s\n", ids.message().c_str());
      history.erase(history.size() - 1);
      continue;
    }
    auto reply = runner.generate(*ids);
    if (!reply.ok()) {
      std::fprintf(stderr, "error: %s\n", reply.message().c_str());
      return 1;
    }
    history.push_back({{"role", "assistant"}, {"content", *reply}});
  }
  std::fprintf(stderr, "\n");
  return 0;
}

int run(const RunOptions& opt) {
  install_sigint();
  auto backend = make_backend(opt.backend, opt.threads);
  if (!backend.ok()) {
    std::fprintf(stderr, "error: %s\n", backend.message().c_str());
    return 1;
  }
  auto model = model::Model::load(opt.model, **backend, {}, progress_bar());
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.message().c_str());
    return 1;
  }
  auto tok = tok::Tokenizer::from_gguf((*model)->file());
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.message().c_str());
    return 1;
  }
  auto tmpl = load_chat_template((*model)->file(), *tok);
  if (!tmpl.ok()) {
    std::fprintf(stderr, "error: %s\n", tmpl.message().c_str());
    return 1;
  }
  const chat::ChatTemplate* t = opt.raw || !tmpl->has_value() ? nullptr : &**tmpl;
  if (!opt.raw && !t)
    std::fprintf(stderr, "note: the model has no chat template; using raw text\n");
  Runner runner(opt, **model, *tok);
  if (opt.chat) return chat_loop(runner, *tok, t);
  auto ids =
      encode_turns(*tok, t, chat::Json::array({{{"role", "user"}, {"content", opt.prompt}}}));
  if (!ids.ok()) {
    std::fprintf(stderr, "error: %s\n", ids.message().c_str());
    return 1;
  }
  if (opt.warmup) {
    const Status w = runner.warm_up(*ids);
    if (!w.ok()) {
      std::fprintf(stderr, "error: %s\n", w.message().c_str());
      return 1;
    }
  }
  auto reply = runner.generate(*ids);
  if (!reply.ok()) {
    std::fprintf(stderr, "error: %s\n", reply.message().c_str());
    return 1;
  }
  return 0;
}

const bool registered = register_command(Command{
    "run", "Generate text from a GGUF model (one prompt, or --chat)",
    [](CLI::App& sub) -> std::function<int()> {
      auto opt = std::make_shared<RunOptions>();
      sub.add_option("-m,--model", opt->model, "GGUF model file")->required();
      auto* p = sub.add_option("-p,--prompt", opt->prompt, "Prompt text");
      auto* c = sub.add_flag("--chat", opt->chat, "Interactive multi-turn chat");
      p->excludes(c);
      sub.add_flag("--raw", opt->raw, "Plain text prompt, no chat template");
      sub.add_option("-n,--n-predict", opt->n_predict, "Tokens to generate")
          ->check(CLI::Range(1, 1 << 20));
      sub.add_option("--temp", opt->temp, "Temperature (0 = greedy)")
          ->check(CLI::Range(0.0, 100.0));
      sub.add_option("--top-k", opt->top_k, "Top-k (0 = off)")->check(CLI::Range(0, 1 << 24));
      sub.add_option("--top-p", opt->top_p, "Top-p (1 = off)")->check(CLI::Range(0.0, 1.0));
      sub.add_option("--min-p", opt->min_p, "Min-p (0 = off)")->check(CLI::Range(0.0, 1.0));
      sub.add_option("--seed", opt->seed, "Sampling seed");
      sub.add_option("--ctx", opt->ctx, "Context size in tokens")->check(CLI::Range(16, 1 << 24));
      sub.add_flag("--ignore-eos", opt->ignore_eos,
                   "Keep generating after end-of-generation tokens");
      sub.add_option("--backend", opt->backend, "Compute backend: cpu or cuda")
          ->check(CLI::IsMember({"cpu", "cuda"}));
      sub.add_option("-t,--threads", opt->threads, "CPU threads (0 = all)")
          ->check(CLI::Range(0, 1024));
      add_pipeline_option(sub, opt->pipeline);
      sub.add_option("--parallel", opt->parallel,
                     "Run the prompt as N concurrent requests (batched decode; the first prints)")
          ->check(CLI::Range(1, engine::SchedulerConfig{}.max_seqs))
          ->excludes(c);
      sub.add_option("--logprobs", opt->logprobs,
                     "Ask every request for its tokens' logprobs and the N most likely; the first "
                     "request's mean goes to stderr")
          ->check(CLI::Range(0, kMaxTopLogprobs));
      sub.add_flag("--warmup", opt->warmup,
                   "One untimed run of the same shape first (first-use costs out of the timings)")
          ->excludes(c);
      return [opt] {
        if (!opt->chat && opt->prompt.empty()) {
          std::fprintf(stderr, "error: give -p PROMPT or --chat\n");
          return 2;
        }
        return run(*opt);
      };
    }});

}  // namespace
}  // namespace t9::apps
