// llama (Llama 2/3, SmolLM2, Mistral-style dense models): pre-norm RMSNorm, SwiGLU, RoPE in
// llama.cpp's "normal" (interleaved pairs) layout — the GGUF converter permutes Q/K rows so
// that pairs (2i, 2i+1) rotate together.
#include "model/arch/arch.h"

namespace t9::model {

Result<ArchSpec> build_llama(const HParams& hp) {
  ArchSpec s;
  s.name = "llama";
  s.rope_layout = RopeLayout::kNormal;
  s.glu = GluKind::kSwiGLU;
  s.layers = uniform_layers(hp);
  if (hp.sliding_window > 0)
    for (LayerSpec& l : s.layers) l.sliding_window = hp.sliding_window;
  return s;
}

}  // namespace t9::model
