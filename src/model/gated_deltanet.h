// The Gated DeltaNet block of the hybrid Qwen3-Next family over backend ops:
//   mixed = h @ attn_qkv^T (q | k | v channels), z = h @ attn_gate^T, b, a from ssm_ba or
//   ssm_beta / ssm_alpha; conv = silu(causal conv1d(mixed)) continuing the conv state;
//   core = gated delta rule(q, k, v, a, b) continuing the delta state (backend.h states the math);
//   out = ssm_out(rmsnorm(core per value head) * ssm_norm * silu(z)).
#pragma once

#include "backend/backend.h"
#include "model/arch/arch.h"
#include "model/extra_scratch.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace t9::model {

// h: F32 [T, E] normed input; out: F32 [T, E]. conv_state / delta_state: this layer's
// RecurrentState tensors; s.rseqs names each sequence's rows and slot. min_chunked_tokens:
// GdnParams::min_chunked_tokens (ModelConfig::gdn_min_chunked_tokens).
void gated_deltanet(Backend& be, const HParams& hp, const ArchSpec& spec, const LayerWeights& L,
                    const ExtraScratch& s, const Tensor& conv_state, const Tensor& delta_state,
                    const Tensor& h, int min_chunked_tokens, const Tensor& out);

}  // namespace t9::model
