// Hyper-parameters of a decoder-only transformer, read from GGUF metadata keys
// `<arch>.<name>` (llama.cpp's names). Only what the forward pass and the KV pool need.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace t9::gguf {
class GgufFile;
}

namespace t9::model {

struct HParams {
  std::string arch;       // general.architecture: "llama", "qwen2", "qwen3", "gemma3"
  int n_layer = 0;        // block_count
  int n_embd = 0;         // embedding_length
  int n_ff = 0;           // feed_forward_length
  int n_head = 0;         // attention.head_count
  int n_head_kv = 0;      // attention.head_count_kv (defaults to n_head)
  int head_dim = 0;       // attention.key_length (defaults to n_embd / n_head); == value_length
  int n_vocab = 0;        // rows of token_embd
  int n_ctx_train = 0;    // context_length
  float rms_eps = 1e-5f;  // attention.layer_norm_rms_epsilon

  // RoPE
  int n_rot = 0;  // rope.dimension_count (defaults to head_dim)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;   // 1 / rope.scaling.factor for linear and yarn scaling
  bool rope_yarn = false;         // rope.scaling.type == "yarn"
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor
  int rope_n_ctx_orig = 0;        // rope.scaling.original_context_length
  float yarn_beta_fast = 32.0f;   // rope.scaling.yarn_beta_fast
  float yarn_beta_slow = 1.0f;    // rope.scaling.yarn_beta_slow

  int sliding_window = 0;  // attention.sliding_window (0: none)
  // attention.sliding_window_pattern: per layer, true = sliding window. Empty when the file does
  // not say, and the family's default pattern applies (gemma3: 5 local layers, then 1 global).
  std::vector<bool> swa_layers;
  float rope_freq_base_swa = 0.0f;  // rope.freq_base_swa (0: the family's default)
  float attn_scale = 0.0f;          // attention.scale, the q.k scale (0: the family's default)
  float attn_softcap = 0.0f;        // attn_logit_softcapping (0: none)
  float final_softcap = 0.0f;       // final_logit_softcapping (0: none)

  // Mixture of experts (qwen3moe, qwen3next, qwen35moe); n_expert == 0: dense FFN.
  int n_expert = 0;                  // expert_count
  int n_expert_used = 0;             // expert_used_count (top-k)
  int n_ff_exp = 0;                  // expert_feed_forward_length
  int n_ff_shexp = 0;                // expert_shared_feed_forward_length (0: no shared expert)
  bool expert_weights_norm = true;   // expert_weights_norm: renormalise the top-k weights

  // Gated DeltaNet layers (qwen3next, qwen35, qwen35moe; llama.cpp's ssm.* keys).
  int ssm_d_conv = 0;            // ssm.conv_kernel (conv1d taps)
  int ssm_d_state = 0;           // ssm.state_size = key head size d_k
  int ssm_n_group = 0;           // ssm.group_count = key heads
  int ssm_dt_rank = 0;           // ssm.time_step_rank = value heads
  int ssm_d_inner = 0;           // ssm.inner_size = value heads * value head size
  int full_attn_interval = 0;    // full_attention_interval: layer il is attention iff (il+1) % n == 0
  int n_nextn = 0;               // nextn_predict_layers: trailing MTP blocks, not run by forward()

  bool is_recurrent(int il) const {
    return full_attn_interval > 0 && (il + 1) % full_attn_interval != 0;
  }
  int n_layer_main() const { return n_layer - n_nextn; }  // blocks of the forward pass
};

// Reads and validates; errors name the file and the key. `n_vocab` comes from token_embd.
Result<HParams> read_hparams(const gguf::GgufFile& file);

}  // namespace t9::model
