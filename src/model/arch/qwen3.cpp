// qwen3 (dense): qwen2 without the Q/K/V biases, plus RMSNorm over each head of Q and K
// (attn_q_norm / attn_k_norm, [head_dim]) before RoPE.
#include "model/arch/arch.h"

namespace t9::model {

Result<ArchSpec> build_qwen3(const HParams& hp) {
  ArchSpec s;
  s.name = "qwen3";
  s.rope_layout = RopeLayout::kNeox;
  s.glu = GluKind::kSwiGLU;
  s.qk_norm = true;
  s.layers = uniform_layers(hp);
  return s;
}

}  // namespace t9::model
