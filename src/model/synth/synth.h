// `tempo9 synth`: random-weight GGUF files of any supported shape, with llama.cpp's metadata keys
// and tensor names, loadable here and by llama.cpp. Values are drawn per tensor from a
// counter-based generator keyed by (seed, tensor name, element index), so the bytes depend only on
// the arguments — not on the thread count — and tensors are generated and quantized in row slabs,
// written as they are made: a real-shape model never sits in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "gguf/gguf_writer.h"
#include "model/synth/synth_plan.h"
#include "model/synth/synth_shape.h"

namespace t9::synth {

struct SynthOptions {
  SynthShape shape;
  SynthQuant quant = SynthQuant::Q8_0;
  uint64_t seed = 0;
  int n_threads = 0;  // 0: every hardware thread
  // A Hugging Face tokenizer.json to embed instead of the synthetic vocabulary
  // (synth_vocab_json.h); empty: the synthetic one.
  std::string tokenizer_json;
};

struct SynthSummary {
  std::vector<TensorPlan> tensors;  // file order, with types
  uint64_t n_params = 0;            // elements of every tensor
  uint64_t file_bytes = 0;          // exact size of the file write_synth_gguf makes
};

// Every metadata key of the file (general.*, <arch>.*, tokenizer.*); the tokenizer is read from
// `tokenizer_json` when it is not empty.
Status add_model_metadata(gguf::GgufWriter& w, const SynthShape& s, SynthQuant q,
                          const std::string& tokenizer_json = {});

// The plan and the file size without generating anything (--dry-run).
Result<SynthSummary> summarize(const SynthOptions& opt);

// Called after each tensor is written: (tensors done, total).
using SynthProgress = std::function<void(size_t done, size_t total)>;

// Writes the file (to `path`.partial, renamed when complete).
Status write_synth_gguf(const SynthOptions& opt, const std::string& path,
                        const SynthProgress& progress = {});

// The value of element `index` of a tensor with this plan entry (exposed for tests).
float synth_value(const TensorPlan& t, uint64_t key, uint64_t index);
uint64_t tensor_key(uint64_t seed, const std::string& name);

}  // namespace t9::synth
