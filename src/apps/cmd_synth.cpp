// `tempo9 synth --arch ARCH (--preset NAME | --config HF_CONFIG.json) --quant Q --seed N -o FILE
// [--tokenizer tokenizer.json]`: a random-weight GGUF of any supported shape (model/synth/synth.h),
// with the synthetic vocabulary or a real one; `--dry-run` prints the tensor list, the file size
// and the parameter count instead of writing.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "apps/command.h"
#include "model/synth/synth.h"

namespace t9::apps {
namespace {

struct SynthArgs {
  std::string arch, preset, config, quant = "Q8_0", out, tokenizer;
  uint64_t seed = 0;
  int vocab = 0;
  int threads = 0;
  bool dry_run = false;
};

std::string dims(const std::vector<int64_t>& ne) {
  std::string s;
  for (int64_t d : ne) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

Result<synth::SynthOptions> options(const SynthArgs& a) {
  synth::SynthOptions opt;
  if (a.preset.empty() == a.config.empty())
    return error("give exactly one of --preset and --config");
  if (!a.preset.empty()) {
    T9_ASSIGN_OR_RETURN(opt.shape, synth::preset_shape(a.arch, a.preset));
  } else {
    if (a.arch.empty()) return error("--config needs --arch");
    T9_ASSIGN_OR_RETURN(opt.shape, synth::shape_from_hf_config(a.arch, a.config));
  }
  if (a.vocab > 0) opt.shape.n_vocab = a.vocab;
  T9_ASSIGN_OR_RETURN(opt.quant, synth::quant_from_name(a.quant));
  opt.seed = a.seed;
  opt.n_threads = a.threads;
  opt.tokenizer_json = a.tokenizer;
  return opt;
}

int print_dry_run(const synth::SynthOptions& opt) {
  auto s = synth::summarize(opt);
  if (!s.ok()) {
    std::fprintf(stderr, "tempo9 synth: %s\n", s.message().c_str());
    return 1;
  }
  for (const synth::TensorPlan& t : s->tensors)
    fmt::print("{:<36} {:<22} {:<5} {}\n", t.name, dims(t.ne), type_name(t.type), t.n_bytes());
  fmt::print("arch {} quant {} tensors {}\n", opt.shape.arch, synth::quant_name(opt.quant),
             s->tensors.size());
  fmt::print("params {}\n", s->n_params);
  fmt::print("file_bytes {}\n", s->file_bytes);
  return 0;
}

int run(const SynthArgs& a) {
  auto opt = options(a);
  if (!opt.ok()) {
    std::fprintf(stderr, "tempo9 synth: %s\n", opt.message().c_str());
    return 2;
  }
  if (a.dry_run) return print_dry_run(*opt);
  if (a.out.empty()) {
    std::fprintf(stderr, "tempo9 synth: -o FILE is required (or --dry-run)\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Status st = synth::write_synth_gguf(*opt, a.out, [](size_t done, size_t total) {
    if (done % 64 == 0 || done == total) std::fprintf(stderr, "\rtensors %zu/%zu", done, total);
  });
  std::fprintf(stderr, "\n");
  if (!st.ok()) {
    std::fprintf(stderr, "tempo9 synth: %s\n", st.message().c_str());
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "tempo9 synth: wrote %s in %.1f s\n", a.out.c_str(), s);
  return 0;
}

const bool registered = register_command(Command{
    "synth", "Write a random-weight GGUF of a preset or Hugging Face config shape",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<SynthArgs>();
      sub.add_option("--arch", a->arch,
                     "llama, qwen2, qwen3, gemma3, qwen3moe, qwen3next, qwen35, qwen35moe");
      sub.add_option("--preset", a->preset,
                     "tiny, qwen3-8b, llama-3.1-8b, qwen3-30b-a3b, qwen3.5-35b-a3b");
      sub.add_option("--config", a->config, "a Hugging Face config.json for the shape");
      sub.add_option("--quant", a->quant, "F32, F16, BF16, Q8_0, Q4_0, Q6_K, Q4_K_M, Q3_K_M, Q5_K_M");
      sub.add_option("--seed", a->seed, "random seed (same arguments + seed: same bytes)");
      sub.add_option("--vocab", a->vocab, "vocabulary size (default: the preset's)");
      sub.add_option("--tokenizer", a->tokenizer,
                     "a Hugging Face byte-level BPE tokenizer.json to embed (default: a small "
                     "synthetic vocabulary); padded to the vocabulary size");
      sub.add_option("-t,--threads", a->threads, "threads (default: all)");
      sub.add_option("-o,--out", a->out, "output GGUF file");
      sub.add_flag("--dry-run", a->dry_run, "print the tensor list, size and parameter count");
      return [a] { return run(*a); };
    }});

}  // namespace
}  // namespace t9::apps
