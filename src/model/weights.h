// Model weights as backend tensors, found by llama.cpp's tensor names and checked against the
// hyper-parameters before use. On the CPU backend every tensor wraps the GGUF memory map (zero
// copy: resident weights are the mapped file pages, nothing else).
#pragma once

#include <functional>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "model/arch/arch.h"
#include "model/hparams.h"

namespace t9::gguf {
class GgufFile;
}

namespace t9::model {

// Shapes outermost first; d = head_dim, E = n_embd, F = n_ff.
struct LayerWeights {
  Tensor attn_norm;       // F32 [E]
  Tensor wq;              // [n_head * d, E]
  Tensor wk, wv;          // [n_head_kv * d, E]
  Tensor bq, bk, bv;      // F32 [n_head * d], [n_head_kv * d] (qkv_bias) or invalid
  Tensor q_norm, k_norm;  // F32 [d] (qk_norm) or invalid
  Tensor wo;              // [E, n_head * d]
  Tensor post_attn_norm;  // F32 [E] (sandwich_norms) or invalid
  Tensor ffn_norm;        // F32 [E]
  Tensor ffn_gate;        // [F, E]
  Tensor ffn_up;          // [F, E]
  Tensor ffn_down;        // [E, F]
  Tensor post_ffw_norm;   // F32 [E] (sandwich_norms) or invalid
};

struct Weights {
  Tensor token_embd;   // [n_vocab, E]
  Tensor output_norm;  // F32 [E]
  Tensor output;       // [n_vocab, E]; token_embd itself when the file has no output.weight
  std::vector<LayerWeights> layers;  // [n_layer]
  std::vector<Buffer*> buffers;      // owned by the backend; free with free_weights()
};

// Called after each tensor is made usable: (done, total).
using LoadProgress = std::function<void(int done, int total)>;

// Finds, validates and uploads every tensor the spec needs. Errors name the tensor and the
// mismatch (missing, wrong shape, unsupported type).
Result<Weights> load_weights(const gguf::GgufFile& file, const HParams& hp, const ArchSpec& spec,
                             Backend& backend, const LoadProgress& progress = {});
void free_weights(Weights& w, Backend& backend);

}  // namespace t9::model
