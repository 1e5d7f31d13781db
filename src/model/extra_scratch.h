// Internal to model/: activations of the MoE FFN, gated attention and Gated DeltaNet blocks, in
// one backend buffer that grows with the largest batch (the dense ones are in scratch.h).
// T = tokens of the call; shapes outermost first.
#pragma once

#include "backend/backend.h"
#include "core/result.h"
#include "model/arch/arch.h"
#include "model/hparams.h"

namespace t9::model {

struct ExtraScratch {
  Tensor qg;         // F32 [T, n_head * 2d] gated attention: query and gate per head
  Tensor rseqs;      // I32 [n_seqs, 4] RecurrentSeq
  Tensor rseqs_tail;  // I32 [n_seqs, 4] RecurrentSeq: rows after a snapshot inside the step
  // Gated DeltaNet (Cd conv channels, nv value heads of dv).
  Tensor mixed;      // F32 [T, Cd] attn_qkv output (conv input)
  Tensor conv;       // F32 [T, Cd] conv + SiLU output: q | k | v
  Tensor z;          // F32 [T, nv * dv] output gate
  Tensor ba;         // F32 [T, 2 nv] (fused ba) or b | a rows: [T, nv] each in bb / aa
  Tensor bb, aa;     // F32 [T, nv]
  Tensor core;       // F32 [T, nv, dv] delta rule output, then gated-normed
  // MoE (X experts, k used, Fe / Fs expert / shared sizes, E = n_embd).
  Tensor router;     // F32 [T, X]
  Tensor ids;        // I32 [T, k]
  Tensor wts;        // F32 [T, k]
  Tensor eg, eu;     // F32 [T, k, Fe]
  Tensor ed;         // F32 [T, k, E]
  Tensor sg, su;     // F32 [T, Fs]
  Tensor so;         // F32 [T, E]
  Tensor sgate;      // F32 [T, 1]

  Buffer* buf = nullptr;
  int cap_tokens = 0, cap_seqs = 0;

  // Grows the buffer for at least these counts and points the tensors at exactly them.
  Status reserve(Backend& be, const HParams& hp, const ArchSpec& spec, int n_tokens, int n_seqs);
  void release(Backend& be);

 private:
  size_t layout(const HParams& hp, const ArchSpec& spec, int n_tokens, int n_seqs);
};

}  // namespace t9::model
