// The mixture-of-experts FFN block (qwen3moe, qwen3next, qwen35moe) over backend ops:
//   router logits = h @ ffn_gate_inp^T; top-k of softmax (renormalised when
//   expert_weights_norm); each token's k experts run as grouped matmuls (matmul_id: one matmul
//   per used expert over its tokens); out = sum_j w_j * expert_j(h) in rank order
//   (+ sigmoid(h . ffn_gate_inp_shexp) * shared_expert(h) when the file has a shared expert).
#pragma once

#include <array>
#include <span>

#include "backend/backend.h"
#include "model/extra_scratch.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace t9::model {

// The block's first matmuls of h: its router logits (s.router) and, when the file has a shared
// expert, that expert's one-output gate (s.sgate), written into `outs`; the used entries. The
// caller runs them (matmul_shared_x, or add_rms_norm_matmul with h's pre-norm) before moe_ffn.
std::span<const Backend::MatmulOut> moe_gates(const LayerWeights& L, const ExtraScratch& s,
                                              std::array<Backend::MatmulOut, 2>& outs);

// h: F32 [T, E] normed input, the moe_gates already computed; out: F32 [T, E] (may not alias h).
void moe_ffn(Backend& be, const HParams& hp, const LayerWeights& L, const ExtraScratch& s,
             const Tensor& h, const Tensor& out);

}  // namespace t9::model
