// `tempo9 parity`: teacher-forced logits of one GGUF on two backends, side by side — does this
// GPU (or this thread count) agree with the CPU reference on this file?
//
//   tempo9 parity -m MODEL.gguf [--backend cuda] [--tokens 256] [--threads T] [--ref-threads T]
//                 [--margin 0.25] [--text FILE] [--isa I] [--ref-isa I]
//
// The text (a built-in English paragraph, or --text) is tokenized by the file's own tokenizer and
// repeated to --tokens ids. The reference (the CPU backend, --ref-threads) feeds them as one
// sequence in one batch; the tested backend (--backend, --threads) feeds them the same way
// ("whole") and one token per step ("stepped": the decode path). Per mode it prints the largest
// logit difference, top-1 agreement over all positions, and over the positions where the
// reference's top-1 leads its runner-up by at least --margin nats. A near tie may flip between
// two correct kernels that round differently; a clear lead must not: the exit status is 1 when
// some clear position disagrees (2: usage or load errors).
//
// How far two correct backends drift depends on the model: a random-weight MoE routes on
// near-ties that a last-bit difference flips, and a flipped expert moves every later logit. A
// CPU-vs-CPU run with another kernel set (--isa avx2 against the default's AVX-512, say: the same
// arithmetic, other summation orders) measures that drift for the file; the per-quarter maxima
// and the first disagreement's position show where it starts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "apps/chat_setup.h"
#include "apps/command.h"
#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"

namespace t9::apps {
namespace {

struct ParityOptions {
  std::string model;
  std::string backend = "cpu";
  std::string text_file;
  int tokens = 256;
  int threads = 0;
  int ref_threads = 0;
  float margin = 0.25f;
  std::string isa;      // the CPU backend under test's kernels (empty: the best)
  std::string ref_isa;  // the reference's
};

constexpr const char* kText =
    "The river ran high that spring, and the town council met every evening to argue about the "
    "old stone bridge. Some wanted to repair it before the summer markets; others said the money "
    "would be better spent on the school roof, which had leaked through three winters already. "
    "In the end the engineer from the capital settled it: the bridge would stand another decade, "
    "the roof would not. ";

// Logits of `ids`: the whole sequence in one batch, or one token per step.
Result<std::vector<float>> logits_of(model::Model& m, std::span<const int32_t> ids, bool stepped) {
  model::Session s(m);
  if (!stepped) {
    T9_ASSIGN_OR_RETURN(model::Logits l, s.feed(ids, model::LogitRows::kAll));
    return std::move(l.data);
  }
  std::vector<float> all;
  for (const int32_t t : ids) {
    T9_ASSIGN_OR_RETURN(model::Logits l, s.feed(std::span<const int32_t>(&t, 1)));
    all.insert(all.end(), l.data.begin(), l.data.end());
  }
  return all;
}

struct Agreement {
  double max_abs = 0.0;        // largest |got - ref| over every logit
  double quarter_max[4] = {};  // ... over each quarter of the positions
  double ref_rms = 0.0;        // the reference logits' root mean square (their scale)
  int top1 = 0;                // positions whose argmax agrees
  int first_diff = -1;         // the first position whose argmax differs (-1: none)
  int clear = 0;               // positions where the reference leads by >= margin
  int clear_top1 = 0;          // ... and the argmax agrees
};

Agreement compare(std::span<const float> ref, std::span<const float> got, int n_vocab,
                  float margin) {
  Agreement a;
  const size_t n_rows = ref.size() / static_cast<size_t>(n_vocab);
  double sum_sq = 0.0;
  for (size_t r = 0; r < n_rows; ++r) {
    const float* x = ref.data() + r * n_vocab;
    const float* y = got.data() + r * n_vocab;
    double& quarter = a.quarter_max[4 * r / n_rows];
    int best = 0, second = -1, got_best = 0;
    for (int v = 0; v < n_vocab; ++v) {
      quarter = std::max(quarter, static_cast<double>(std::fabs(x[v] - y[v])));
      sum_sq += static_cast<double>(x[v]) * x[v];
      if (y[v] > y[got_best]) got_best = v;
      if (x[v] > x[best]) {
        second = best;
        best = v;
      } else if (v != best && (second < 0 || x[v] > x[second])) {
        second = v;
      }
    }
    const bool same = got_best == best;
    a.top1 += same;
    if (!same && a.first_diff < 0) a.first_diff = static_cast<int>(r);
    if (second < 0 || x[best] - x[second] >= margin) {
      ++a.clear;
      a.clear_top1 += same;
    }
  }
  for (const double q : a.quarter_max) a.max_abs = std::max(a.max_abs, q);
  a.ref_rms = std::sqrt(sum_sq / static_cast<double>(ref.size()));
  return a;
}

int parity(const ParityOptions& opt) {
  auto tok = tok::Tokenizer::from_gguf_file(opt.model);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.message().c_str());
    return 2;
  }
  std::string text = kText;
  if (!opt.text_file.empty()) {
    std::ifstream f(opt.text_file, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "error: --text: cannot read %s\n", opt.text_file.c_str());
      return 2;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  // The first copy with the vocabulary's BOS (if it adds one), then plain repeats.
  auto first = tok->encode(text, {.add_special = true, .parse_special = false});
  auto piece = tok->encode(text, {.add_special = false, .parse_special = false});
  if (!first.ok() || !piece.ok() || piece->empty()) {
    std::fprintf(stderr, "error: --text: %s\n",
                 !first.ok()   ? first.message().c_str()
                 : !piece.ok() ? piece.message().c_str()
                               : "no tokens in the text");
    return 2;
  }
  std::vector<int32_t> ids(first->begin(), first->end());
  while (static_cast<int>(ids.size()) < opt.tokens)
    ids.insert(ids.end(), piece->begin(), piece->end());
  ids.resize(static_cast<size_t>(opt.tokens));

  const auto isa_of = [](const std::string& name) -> Result<std::optional<CpuIsa>> {
    if (name.empty()) return std::optional<CpuIsa>{};
    const std::optional<CpuIsa> isa = parse_cpu_isa(name);
    if (!isa) return error("unknown ISA '{}' (scalar, avx2, avx512, avx512-groups or amx)", name);
    if (!cpu_isa_supported(*isa)) return error("this CPU has no {}", name);
    return isa;
  };
  const auto ref_isa = isa_of(opt.ref_isa), test_isa = isa_of(opt.isa);
  if (!ref_isa.ok() || !test_isa.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", ref_isa.ok() ? "--isa" : "--ref-isa",
                 (ref_isa.ok() ? test_isa : ref_isa).message().c_str());
    return 2;
  }
  CpuBackend ref_be(CpuBackendConfig{opt.ref_threads, *ref_isa});
  auto test_be = make_backend(opt.backend, opt.threads, *test_isa);
  if (!test_be.ok()) {
    std::fprintf(stderr, "error: %s\n", test_be.message().c_str());
    return 2;
  }
  std::vector<float> ref;
  int n_vocab = 0;
  {
    auto m = model::Model::load(opt.model, ref_be);
    if (!m.ok()) {
      std::fprintf(stderr, "error: %s\n", m.message().c_str());
      return 2;
    }
    auto r = logits_of(**m, ids, false);
    if (!r.ok()) {
      std::fprintf(stderr, "error: reference: %s\n", r.message().c_str());
      return 2;
    }
    ref = std::move(*r);
    n_vocab = static_cast<int>(ref.size() / ids.size());
  }
  auto m = model::Model::load(opt.model, **test_be);
  if (!m.ok()) {
    std::fprintf(stderr, "error: %s\n", m.message().c_str());
    return 2;
  }
  // The kernel sets in use (an unset --isa follows TEMPO9_CPU_ISA, else the best).
  const auto* test_cpu = dynamic_cast<const CpuBackend*>(test_be->get());
  const std::string test_name =
      test_cpu != nullptr ? "cpu " + std::string(cpu_isa_name(test_cpu->isa())) : opt.backend;
  std::printf(
      "parity: %s, %zu tokens, reference cpu %s (%d threads) vs %s (%d threads), margin %.2f\n",
      opt.model.c_str(), ids.size(), std::string(cpu_isa_name(ref_be.isa())).c_str(),
      opt.ref_threads, test_name.c_str(), opt.threads, opt.margin);
  bool ok = true;
  for (const bool stepped : {false, true}) {
    auto got = logits_of(**m, ids, stepped);
    if (!got.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", stepped ? "stepped" : "whole", got.message().c_str());
      return 2;
    }
    const Agreement a = compare(ref, *got, n_vocab, opt.margin);
    std::printf(
        "%-8s max |d| %.6g (by quarter %.3g %.3g %.3g %.3g; logits rms %.3g)  top-1 %d/%zu "
        "(first differs at %d)  clear top-1 %d/%d\n",
        stepped ? "stepped" : "whole", a.max_abs, a.quarter_max[0], a.quarter_max[1],
        a.quarter_max[2], a.quarter_max[3], a.ref_rms, a.top1, ids.size(), a.first_diff,
        a.clear_top1, a.clear);
    ok = ok && a.clear_top1 == a.clear;
  }
  std::printf("parity: %s\n", ok ? "ok" : "FAILED (a clear top-1 differs)");
  return ok ? 0 : 1;
}

const bool registered = register_command(Command{
    "parity", "Teacher-forced logits of a GGUF on a backend vs the CPU reference",
    [](CLI::App& sub) -> std::function<int()> {
      auto opt = std::make_shared<ParityOptions>();
      sub.add_option("-m,--model", opt->model, "GGUF model file")->required();
      sub.add_option("--backend", opt->backend, "Backend under test: cpu or cuda")
          ->check(CLI::IsMember({"cpu", "cuda"}));
      sub.add_option("--tokens", opt->tokens, "Teacher-forced tokens")
          ->check(CLI::Range(2, 1 << 16));
      sub.add_option("-t,--threads", opt->threads,
                     "CPU threads of the backend under test (0 = all)")
          ->check(CLI::Range(0, 1024));
      sub.add_option("--ref-threads", opt->ref_threads, "CPU threads of the reference (0 = all)")
          ->check(CLI::Range(0, 1024));
      sub.add_option("--margin", opt->margin,
                     "Top-1 lead (nats) from which the reference's choice must be kept")
          ->check(CLI::Range(0.0, 100.0));
      sub.add_option("--text", opt->text_file, "Text file to tokenize (default: built in)");
      sub.add_option("--isa", opt->isa,
                     "CPU kernels of the backend under test: scalar, avx2, avx512, avx512-groups, "
                     "amx (default: the best; --backend cpu only)");
      sub.add_option("--ref-isa", opt->ref_isa, "CPU kernels of the reference (default: the best)");
      return [opt] { return parity(*opt); };
    }});

}  // namespace
}  // namespace t9::apps
