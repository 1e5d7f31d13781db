// qwen2 (Qwen2, Qwen2.5, Qwen2.5-Coder): llama with biases on Q/K/V and NeoX RoPE (the
// converter keeps HF's half-split layout: pairs (i, i + n_rot/2)).
#include "model/arch/arch.h"

namespace t9::model {

Result<ArchSpec> build_qwen2(const HParams& hp) {
  ArchSpec s;
  s.name = "qwen2";
  s.rope_layout = RopeLayout::kNeox;
  s.glu = GluKind::kSwiGLU;
  s.qkv_bias = true;
  s.layers = uniform_layers(hp);
  return s;
}

}  // namespace t9::model
