// qwen3moe (Qwen3-30B-A3B style): qwen3 attention (Q/K head norms, NeoX RoPE) with a
// mixture-of-experts FFN on every layer: softmax router, top-k experts (expert_used_count) with
// renormalised weights (expert_weights_norm, HF norm_topk_prob), SwiGLU experts, no shared expert.
#include "model/arch/arch.h"

namespace t9::model {

Result<ArchSpec> build_qwen3moe(const HParams& hp) {
  if (hp.n_expert <= 0) return error("qwen3moe: expert_count is missing or 0");
  ArchSpec s;
  s.name = "qwen3moe";
  s.rope_layout = RopeLayout::kNeox;
  s.glu = GluKind::kSwiGLU;
  s.qk_norm = true;
  s.moe = true;
  s.layers = uniform_layers(hp);
  return s;
}

}  // namespace t9::model
