// The shape of a synthetic (random-weight) model: everything `tempo9 synth` needs to lay out
// llama.cpp's metadata keys and tensors for one architecture. Shapes come from a named preset
// (`tiny` for every architecture, and real model shapes such as `qwen3-8b`) or from a Hugging Face
// config.json.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace t9::synth {

struct SynthShape {
  std::string arch;  // GGUF general.architecture: llama, qwen2, qwen3, gemma3, qwen3moe, ...
  std::string name;  // general.name
  int n_layer = 0;   // blocks of the forward pass (no MTP blocks)
  int n_embd = 0;
  int n_ff = 0;  // dense FFN width (0 for MoE-only families)
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_rot = 0;    // rotary dims (partial rotary: < head_dim)
  int n_vocab = 0;  // rows of token_embd (>= the tokenizer's real tokens; padded)
  int n_ctx_train = 4096;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-6f;
  bool tied_embeddings = false;  // no output.weight: token_embd doubles as the output matrix

  // gemma3: sliding-window layers (5 local, then 1 global) with their own RoPE base.
  int sliding_window = 0;
  float rope_freq_base_swa = 10000.0f;

  // Mixture of experts (n_expert > 0).
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;
  int n_ff_shexp = 0;  // shared expert width (0: none)

  // Gated DeltaNet hybrids (full_attn_interval > 0): layer il is attention iff
  // (il + 1) % full_attn_interval == 0, else a Gated DeltaNet block.
  int full_attn_interval = 0;
  int ssm_d_conv = 0;   // conv taps
  int ssm_d_state = 0;  // key (and value) head size
  int ssm_n_group = 0;  // key heads
  int ssm_dt_rank = 0;  // value heads

  bool is_hybrid() const { return full_attn_interval > 0; }
  bool is_recurrent(int il) const {
    return full_attn_interval > 0 && (il + 1) % full_attn_interval != 0;
  }
  bool is_swa(int il) const { return sliding_window > 0 && (il + 1) % 6 != 0; }
};

// Architectures synth can write.
const std::vector<std::string_view>& synth_archs();

// Names of the presets: "tiny" (every architecture) and the real shapes.
std::vector<std::string> preset_names();

// The preset's shape for `arch`. A real-shape preset fixes its architecture; asking for it with
// another arch is an error naming both.
Result<SynthShape> preset_shape(const std::string& arch, const std::string& preset);

// A shape read from a Hugging Face config.json (text_config when nested), for `arch`. Errors name
// the file and the key.
Result<SynthShape> shape_from_hf_config(const std::string& arch, const std::string& path);

// Checks divisibility and ranges the loaders rely on; errors name the field.
Status validate_shape(const SynthShape& s);

}  // namespace t9::synth
