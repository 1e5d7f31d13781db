// The Gated DeltaNet block of the hybrid Qwen3-Next family over backend ops:
//   mixed = h @ attn_qkv^T (q | k | v channels), z = h @ attn_gate^T, b, a from ssm_ba or
//   ssm_beta / ssm_alpha; conv = silu(causal conv1d(mixed)) continuing the conv state;
//   core = gated delta rule(q, k, v, a, b) continuing the delta state (backend.h states the math);
//   out = ssm_out(rmsnorm(core per value head) * ssm_norm * silu(z)).
#pragma once

#include <functional>

#include "backend/backend.h"
#include "model/arch/arch.h"
#include "model/extra_scratch.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace t9::model {

// A state snapshot inside the step (Model::forward): the conv and the delta rule run over
// s.rseqs (where the snapshotting sequences end at their snapshot), then at_snapshot() copies
// those sequences' state of this layer, then the two ops run on over `tail` (their rows after
// it). Both ops compute token by token, so the split leaves the bits of one call.
struct GdnSplit {
  Tensor tail;  // I32 [n, 4] RecurrentSeq
  std::function<void()> at_snapshot;
};

// h: F32 [T, E] normed input; out: F32 [T, E]. conv_state / delta_state: this layer's
// RecurrentState tensors; s.rseqs names each sequence's rows and slot. min_chunked_tokens:
// GdnParams::min_chunked_tokens (ModelConfig::gdn_min_chunked_tokens). split: null, or the
// step's snapshot inside it.
void gated_deltanet(Backend& be, const HParams& hp, const ArchSpec& spec, const LayerWeights& L,
                    const ExtraScratch& s, const Tensor& conv_state, const Tensor& delta_state,
                    const Tensor& h, int min_chunked_tokens, const GdnSplit* split,
                    const Tensor& out);

}  // namespace t9::model
