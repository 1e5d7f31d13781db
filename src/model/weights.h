// Model weights as backend tensors, found by llama.cpp's tensor names and checked against the
// hyper-parameters before use. On the CPU backend every tensor wraps the GGUF memory map (zero
// copy: resident weights are the mapped file pages, nothing else).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
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
  // (gated_attn: wq is [n_head * 2d, E], per head [query(d), gate(d)]; ffn_norm is the file's
  // post_attention_norm.)

  // Mixture of experts (spec.moe); X = n_expert, Fe = n_ff_exp, Fs = n_ff_shexp.
  Tensor ffn_gate_inp;                          // [X, E] router
  Tensor ffn_gate_exps, ffn_up_exps;            // [X, Fe, E]
  Tensor ffn_down_exps;                         // [X, E, Fe]
  Tensor ffn_gate_shexp, ffn_up_shexp;          // [Fs, E] (n_ff_shexp > 0) or invalid
  Tensor ffn_down_shexp;                        // [E, Fs]
  Tensor ffn_gate_inp_shexp;                    // [1, E] shared-expert gate

  // Gated DeltaNet (LayerSpec::recurrent); nk/nv key/value heads, dk/dv head sizes,
  // Cd = conv channels = 2 nk dk + nv dv, K = conv taps.
  Tensor ssm_qkv;         // attn_qkv [Cd, E]: q (nk dk), k (nk dk), v (nv dv)
  Tensor ssm_z;           // attn_gate [nv dv, E]: the output gate z
  Tensor ssm_ba;          // [2 nv, E] grouped per key head: b x (nv/nk), a x (nv/nk) (fused_ba)
  Tensor ssm_beta;        // [nv, E] (separate b/a)
  Tensor ssm_alpha;       // [nv, E]
  Tensor ssm_conv1d;      // F32 [Cd, K]
  Tensor ssm_a;           // F32 [nv] = -exp(A_log)
  Tensor ssm_dt;          // F32 [nv] dt bias
  Tensor ssm_norm;        // F32 [dv] gated RMSNorm weight (plain w)
  Tensor ssm_out;         // [E, nv dv]
};

struct Weights {
  Tensor token_embd;   // [n_vocab, E]
  Tensor output_norm;  // F32 [E]
  Tensor output;       // [n_vocab, E]; token_embd itself when the file has no output.weight
  std::vector<LayerWeights> layers;  // [n_layer_main]
  // Multi-token-prediction (nextn) blocks kept as loaded, by GGUF name; not run by forward().
  std::vector<std::pair<std::string, Tensor>> nextn;
  std::vector<Buffer*> buffers;      // owned by the backend; free with free_weights()
};

// Called after each tensor is made usable: (done, total).
using LoadProgress = std::function<void(int done, int total)>;

// Whether the loader keeps a matrix in the file's layout although only matmuls read it
// (upload_weights, not upload_matmul_weights): the shared expert's gate/up, which a backend's
// routed-experts launch may take beside the experts (CUDA: matmul_shared_x's plain parts read
// the file's layout; in the bf16 path's layout they ran apart and the experts' one-row launch
// took 88 us instead of 15, run 225).
bool rides_with_experts(std::string_view gguf_name);

// Finds, validates and uploads every tensor the spec needs. Errors name the tensor and the
// mismatch (missing, wrong shape, unsupported type).
Result<Weights> load_weights(const gguf::GgufFile& file, const HParams& hp, const ArchSpec& spec,
                             Backend& backend, const LoadProgress& progress = {});
void free_weights(Weights& w, Backend& backend);

}  // namespace t9::model
