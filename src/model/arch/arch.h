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
  // Hybrid models: a Gated DeltaNet block instead of attention (no KV; recurrent state).
  bool recurrent = false;
  int kv_layer = -1;  // this attention layer's index in the KV pool (attention layers only)
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
  // Mixture of experts FFN on every layer (hp.n_expert > 0), optionally with a shared expert
  // gated by sigmoid(x . ffn_gate_inp_shexp) (hp.n_ff_shexp > 0).
  bool moe = false;
  // Qwen3-Next family: attn_q yields query and gate per head ([q(d), gate(d)] x n_head); the
  // attention output is multiplied by sigmoid(gate). The FFN norm is post_attention_norm.
  bool gated_attn = false;
  bool ffn_norm_is_post_attn = false;
  // Gated DeltaNet inputs: one ssm_ba tensor grouped by key head ([b x r, a x r] per key head,
  // qwen3next) or separate ssm_beta / ssm_alpha (qwen35); see GdnParams::v_heads_tiled.
  bool gdn_fused_ba = false;
  bool gdn_v_heads_tiled = false;
  std::vector<LayerSpec> layers;  // [n_layer_main]
  int n_kv_layers = 0;            // attention layers (KV pool layers)
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
Result<ArchSpec> build_qwen3moe(const HParams& hp);
Result<ArchSpec> build_qwen3next(const HParams& hp);
Result<ArchSpec> build_qwen35(const HParams& hp);
Result<ArchSpec> build_qwen35moe(const HParams& hp);

// Every layer global, one RoPE base: the common case.
std::vector<LayerSpec> uniform_layers(const HParams& hp);

}  // namespace t9::model
