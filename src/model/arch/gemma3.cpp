// gemma3 (text): sandwich norms (attn_norm -> attn -> post_attention_norm, ffn_norm -> ffn ->
// post_ffw_norm), Q/K head norms, GeGLU (tanh GELU), embeddings scaled by sqrt(n_embd), NeoX RoPE,
// and interleaved local/global attention: 5 sliding-window layers then 1 global one.
//
// Norm weights: HF's Gemma3RMSNorm computes x * (1 + w), but llama.cpp's converter
// (convert_hf_to_gguf.py, Gemma3Model.norm_shift returns 1.0 for every "*norm.weight") stores
// w + 1 in the GGUF, so the file's weights are used as they are (norm_weight_bias = 0). The
// real gemma-3-270m file agrees: its attn_norm weights average ~13, not ~0.
#include <cmath>

#include "model/arch/arch.h"

namespace t9::model {

namespace {
constexpr int kSwaPattern = 6;              // layers il % 6 == 5 are global
constexpr float kLocalRopeBase = 10000.0f;  // HF rope_local_base_freq
}  // namespace

Result<ArchSpec> build_gemma3(const HParams& hp) {
  ArchSpec s;
  s.name = "gemma3";
  s.rope_layout = RopeLayout::kNeox;
  s.glu = GluKind::kGeGLU;
  s.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  s.norm_weight_bias = 0.0f;
  s.qk_norm = true;
  s.sandwich_norms = true;
  // query_pre_attn_scalar is not in the GGUF; it is head_dim for every size except 27B (62
  // layers), where it is n_embd / n_head — the same rule llama.cpp applies.
  const float qpas = hp.n_layer == 62 ? static_cast<float>(hp.n_embd / hp.n_head)
                                      : static_cast<float>(hp.head_dim);
  s.attn_scale = hp.attn_scale > 0.0f ? hp.attn_scale : 1.0f / std::sqrt(qpas);
  s.layers = uniform_layers(hp);
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerSpec& l = s.layers[static_cast<size_t>(il)];
    const bool swa = hp.swa_layers.empty() ? il % kSwaPattern < kSwaPattern - 1
                                           : hp.swa_layers[static_cast<size_t>(il)];
    if (swa) {
      l.sliding_window = hp.sliding_window;
      l.rope_freq_base = hp.rope_freq_base_swa > 0.0f ? hp.rope_freq_base_swa : kLocalRopeBase;
      l.rope_freq_scale = 1.0f;  // scaling applies to global layers only
    }
  }
  return s;
}

}  // namespace t9::model
