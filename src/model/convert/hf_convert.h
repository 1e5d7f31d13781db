// Converting a Hugging Face checkpoint directory (config.json + model.safetensors) to a GGUF file
// with llama.cpp's architecture names, metadata keys and tensor names, so the same file loads in
// llama.cpp and here. Used for the reference fixtures (../shared/fixtures/reference) whose logits
// come from transformers, and for any small HF model.
//
// Transformations follow llama.cpp's converter, because GGUF files in the wild were made by it:
//   - llama: Q/K projection rows are permuted from HF's half-split rotary layout to ggml's
//     interleaved ("normal") RoPE layout; qwen2/qwen3/gemma3 use NeoX RoPE and need no permutation.
//   - gemma3: RMSNorm weights are stored as (1 + w), since ggml's rms_norm multiplies by w.
//   - MoE experts are stacked into one 3-D tensor per projection: [n_expert, n_out, n_in].
#pragma once

#include <string>

#include "core/result.h"
#include "quant/types.h"

namespace t9::convert {

struct ConvertOptions {
  std::string hf_dir;    // holds config.json and model.safetensors
  std::string out_path;  // the GGUF to write
  // Type of 2-D weight matrices (F32, F16, BF16, Q8_0, Q4_0, Q4_K, ...); norms, biases and other
  // 1-D tensors always stay F32 as in llama.cpp.
  GgmlType weight_type = GgmlType::F32;
  std::string name;  // general.name; defaults to "<model_type> (converted)"
};

// The GGUF architecture name for an HF model_type, or an error for unsupported ones.
Result<std::string> gguf_arch_for(const std::string& hf_model_type);

Status convert_hf_to_gguf(const ConvertOptions& opt);

}  // namespace t9::convert
