// The hybrid Qwen3-Next family: qwen3next (MoE + shared expert), qwen35 (Qwen3.5 dense) and
// qwen35moe (Qwen3.5 MoE). Every full_attention_interval-th layer is gated full attention (the
// query projection also yields a per-head gate, output * sigmoid(gate); Q/K head norms; NeoX RoPE
// on the first rope.dimension_count dims — partial_rotary_factor 0.25); the other layers are
// Gated DeltaNet blocks (model/gated_deltanet.h) with per-sequence recurrent state.
//
// Norm weights: HF's Qwen3NextRMSNorm computes x * (1 + w); llama.cpp's converter stores w + 1
// for every "*norm.weight" except linear_attn.norm (a plain-weight gated RMSNorm), so the file's
// weights are used as they are (norm_weight_bias 0), as for gemma3.
//
// V head order: HF groups value heads by key head (v head h reads key head h / (nv / nk)).
// qwen3next files keep that order; llama.cpp's converter reorders Qwen3.5 linear-attention
// weights to a tiled order (h reads key head h % nk), so qwen35/qwen35moe files use that.
#include "model/arch/arch.h"

namespace t9::model {
namespace {

Result<ArchSpec> build_hybrid(const HParams& hp, const char* name, bool moe) {
  if (hp.full_attn_interval <= 0)
    return error("{}: full_attention_interval is missing or 0", name);
  if (moe && hp.n_expert <= 0) return error("{}: expert_count is missing or 0", name);
  ArchSpec s;
  s.name = name;
  s.rope_layout = RopeLayout::kNeox;
  s.glu = GluKind::kSwiGLU;
  s.qk_norm = true;
  s.moe = moe;
  s.gated_attn = true;
  s.ffn_norm_is_post_attn = true;
  s.layers = uniform_layers(hp);
  for (int il = 0; il < hp.n_layer_main(); ++il)
    s.layers[static_cast<size_t>(il)].recurrent = hp.is_recurrent(il);
  return s;
}

}  // namespace

Result<ArchSpec> build_qwen3next(const HParams& hp) {
  T9_ASSIGN_OR_RETURN(ArchSpec s, build_hybrid(hp, "qwen3next", true));
  s.gdn_fused_ba = true;
  s.gdn_v_heads_tiled = false;
  return s;
}

Result<ArchSpec> build_qwen35(const HParams& hp) {
  T9_ASSIGN_OR_RETURN(ArchSpec s, build_hybrid(hp, "qwen35", false));
  s.gdn_v_heads_tiled = true;
  return s;
}

Result<ArchSpec> build_qwen35moe(const HParams& hp) {
  T9_ASSIGN_OR_RETURN(ArchSpec s, build_hybrid(hp, "qwen35moe", true));
  s.gdn_v_heads_tiled = true;
  return s;
}

}  // namespace t9::model
