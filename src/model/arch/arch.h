// Architectures as data: each family (one file in model/arch/) turns the GGUF hyper-parameters
// into an ArchSpec, and the one forward pass in model/forward.cpp reads only the spec. Adding a
// family means adding a file and one line to the table in arch/registry.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "model/hparams.h"

namespace t9::model {

struct LayerSpec {
  int sliding_window = 0;           // > 0: this layer attends to the last `sliding_window` keys
  float rope_freq_base = 10000.0f;  // gemma3: 10000 on local layers, rope.freq_base on global
  float rope_freq_scale = 1.0f;
};

struct ArchSpec {
  std::string name;
  RopeLayout rope_layout = RopeLayout::kNormal;
  GluKind glu = GluKind::kSwiGLU;
  float embd_scale = 1.0f;        // gemma: token embeddings times sqrt(n_embd)
  float norm_weight_bias = 0.0f;  // RMSNorm multiplies by (w + bias); see gemma3.cpp for why 0
  float attn_scale = 0.0f;        // q.k scale; 0 = 1 / sqrt(head_dim)
  bool qkv_bias = false;          // attn_q/k/v.bias (qwen2)
  bool qk_norm = false;           // attn_q_norm / attn_k_norm per head before RoPE (qwen3, gemma3)
  bool sandwich_norms = false;    // post_attention_norm and post_ffw_norm (gemma2/3)
  std::vector<LayerSpec> layers;  // [n_layer]
};

// Builds the spec of one family; errors name the file and key.
using ArchBuilder = Result<ArchSpec> (*)(const HParams& hp);

// The spec for hp.arch, or an Error naming the unsupported architecture.
Result<ArchSpec> build_arch(const HParams& hp);
std::vector<std::string_view> supported_archs();

// Per-family builders (one file each in model/arch/).
Result<ArchSpec> build_llama(const HParams& hp);
Result<ArchSpec> build_qwen2(const HParams& hp);
Result<ArchSpec> build_qwen3(const HParams& hp);
Result<ArchSpec> build_gemma3(const HParams& hp);

// Every layer global, one RoPE base: the common case.
std::vector<LayerSpec> uniform_layers(const HParams& hp);

}  // namespace t9::model
