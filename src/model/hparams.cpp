#include "model/hparams.h"

#include <fmt/format.h>

#include <optional>

#include "gguf/gguf_file.h"

namespace t9::model {
namespace {

// Reads `<arch>.<key>` as T; absent keys give `fallback` when it is set, else an Error.
template <typename T>
Result<T> key_or(const gguf::GgufFile& f, const std::string& arch, std::string_view key,
                 std::optional<T> fallback) {
  const std::string full = fmt::format("{}.{}", arch, key);
  if (!f.find(full)) {
    if (fallback) return *fallback;
    return error("{}: metadata key '{}' is missing", f.name(), full);
  }
  return f.get<T>(full);
}

Status check_positive(const gguf::GgufFile& f, const std::string& arch, std::string_view key, int v,
                      int max) {
  if (v <= 0 || v > max)
    return error("{}: metadata key '{}.{}' = {} is out of range (1..{})", f.name(), arch, key, v,
                 max);
  return {};
}

Status read_rope(const gguf::GgufFile& f, HParams& hp) {
  const std::string& a = hp.arch;
  T9_ASSIGN_OR_RETURN(hp.n_rot, key_or<int>(f, a, "rope.dimension_count", hp.head_dim));
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0)
    return error("{}: '{}.rope.dimension_count' = {} must be even and in 1..head_dim ({})",
                 f.name(), a, hp.n_rot, hp.head_dim);
  T9_ASSIGN_OR_RETURN(hp.rope_freq_base, key_or<float>(f, a, "rope.freq_base", 10000.0f));
  if (!(hp.rope_freq_base > 0.0f)) return error("{}: '{}.rope.freq_base' must be > 0", f.name(), a);
  T9_ASSIGN_OR_RETURN(std::string type,
                      key_or<std::string>(f, a, "rope.scaling.type", std::string("none")));
  T9_ASSIGN_OR_RETURN(float factor, key_or<float>(f, a, "rope.scaling.factor", 0.0f));
  if (type == "none" || factor == 0.0f || factor == 1.0f) {
    hp.rope_freq_scale = 1.0f;
  } else if (type == "linear" || type == "yarn") {
    if (!(factor > 0.0f)) return error("{}: '{}.rope.scaling.factor' must be > 0", f.name(), a);
    hp.rope_freq_scale = 1.0f / factor;
    hp.rope_yarn = type == "yarn";
  } else {
    return error("{}: '{}.rope.scaling.type' = '{}' is not supported (none, linear, yarn)",
                 f.name(), a, type);
  }
  T9_ASSIGN_OR_RETURN(hp.rope_attn_factor, key_or<float>(f, a, "rope.scaling.attn_factor", 1.0f));
  T9_ASSIGN_OR_RETURN(hp.rope_n_ctx_orig,
                      key_or<int>(f, a, "rope.scaling.original_context_length", hp.n_ctx_train));
  T9_ASSIGN_OR_RETURN(hp.yarn_beta_fast, key_or<float>(f, a, "rope.scaling.yarn_beta_fast", 32.0f));
  T9_ASSIGN_OR_RETURN(hp.yarn_beta_slow, key_or<float>(f, a, "rope.scaling.yarn_beta_slow", 1.0f));
  return {};
}

// Expert and Gated DeltaNet keys; all optional (0 = the feature is absent), checked together.
Status read_moe_ssm(const gguf::GgufFile& f, HParams& hp) {
  const std::string& a = hp.arch;
  constexpr int kMax = 1 << 20;
  struct IntKey {
    const char* key;
    int* dst;
  };
  const IntKey keys[] = {
      {"expert_count", &hp.n_expert},
      {"expert_used_count", &hp.n_expert_used},
      {"expert_feed_forward_length", &hp.n_ff_exp},
      {"expert_shared_feed_forward_length", &hp.n_ff_shexp},
      {"ssm.conv_kernel", &hp.ssm_d_conv},
      {"ssm.state_size", &hp.ssm_d_state},
      {"ssm.group_count", &hp.ssm_n_group},
      {"ssm.time_step_rank", &hp.ssm_dt_rank},
      {"ssm.inner_size", &hp.ssm_d_inner},
      {"full_attention_interval", &hp.full_attn_interval},
      {"nextn_predict_layers", &hp.n_nextn},
  };
  for (const IntKey& k : keys) {
    T9_ASSIGN_OR_RETURN(*k.dst, key_or<int>(f, a, k.key, 0));
    if (*k.dst < 0 || *k.dst > kMax)
      return error("{}: '{}.{}' = {} is out of range", f.name(), a, k.key, *k.dst);
  }
  T9_ASSIGN_OR_RETURN(hp.expert_weights_norm, key_or<bool>(f, a, "expert_weights_norm", true));
  if (hp.n_expert > 0 && (hp.n_expert_used < 1 || hp.n_expert_used > hp.n_expert ||
                          hp.n_ff_exp < 1))
    return error("{}: {} experts need expert_used_count in 1..{} and expert_feed_forward_length",
                 f.name(), hp.n_expert, hp.n_expert);
  if (hp.n_expert == 0 && hp.n_ff == 0)
    return error("{}: metadata key '{}.feed_forward_length' is missing", f.name(), a);
  if (hp.n_nextn >= hp.n_layer)
    return error("{}: nextn_predict_layers {} >= block_count {}", f.name(), hp.n_nextn,
                 hp.n_layer);
  if (hp.full_attn_interval > 0) {
    const int nk = hp.ssm_n_group, nv = hp.ssm_dt_rank;
    if (hp.ssm_d_conv < 2 || hp.ssm_d_state < 1 || nk < 1 || nv < 1 || nv % nk != 0 ||
        hp.ssm_d_inner < 1 || hp.ssm_d_inner % nv != 0)
      return error("{}: Gated DeltaNet keys are inconsistent (ssm.conv_kernel {}, state_size {}, "
                   "group_count {}, time_step_rank {}, inner_size {})",
                   f.name(), hp.ssm_d_conv, hp.ssm_d_state, nk, nv, hp.ssm_d_inner);
  }
  return {};
}

}  // namespace

Result<HParams> read_hparams(const gguf::GgufFile& f) {
  HParams hp;
  T9_ASSIGN_OR_RETURN(hp.arch, f.get<std::string>("general.architecture"));
  const std::string& a = hp.arch;
  constexpr int kMaxDim = 1 << 20;
  T9_ASSIGN_OR_RETURN(hp.n_layer, key_or<int>(f, a, "block_count", std::nullopt));
  T9_TRY(check_positive(f, a, "block_count", hp.n_layer, 4096));
  T9_ASSIGN_OR_RETURN(hp.n_embd, key_or<int>(f, a, "embedding_length", std::nullopt));
  T9_TRY(check_positive(f, a, "embedding_length", hp.n_embd, kMaxDim));
  // MoE files (qwen35moe) may have no dense FFN length at all; read_moe_ssm() checks the pair.
  T9_ASSIGN_OR_RETURN(hp.n_ff, key_or<int>(f, a, "feed_forward_length", 0));
  if (hp.n_ff < 0 || hp.n_ff > kMaxDim)
    return error("{}: '{}.feed_forward_length' = {} is out of range", f.name(), a, hp.n_ff);
  T9_ASSIGN_OR_RETURN(hp.n_head, key_or<int>(f, a, "attention.head_count", std::nullopt));
  T9_TRY(check_positive(f, a, "attention.head_count", hp.n_head, 4096));
  T9_ASSIGN_OR_RETURN(hp.n_head_kv, key_or<int>(f, a, "attention.head_count_kv", hp.n_head));
  T9_TRY(check_positive(f, a, "attention.head_count_kv", hp.n_head_kv, hp.n_head));
  if (hp.n_head % hp.n_head_kv != 0)
    return error("{}: head_count {} is not a multiple of head_count_kv {}", f.name(), hp.n_head,
                 hp.n_head_kv);
  T9_ASSIGN_OR_RETURN(hp.head_dim,
                      key_or<int>(f, a, "attention.key_length", hp.n_embd / hp.n_head));
  T9_TRY(check_positive(f, a, "attention.key_length", hp.head_dim, 4096));
  T9_ASSIGN_OR_RETURN(int v_len, key_or<int>(f, a, "attention.value_length", hp.head_dim));
  if (v_len != hp.head_dim)
    return error("{}: attention.value_length {} != key_length {} is not supported", f.name(), v_len,
                 hp.head_dim);
  T9_ASSIGN_OR_RETURN(hp.n_ctx_train, key_or<int>(f, a, "context_length", 4096));
  T9_TRY(check_positive(f, a, "context_length", hp.n_ctx_train, 1 << 30));
  T9_ASSIGN_OR_RETURN(hp.rms_eps, key_or<float>(f, a, "attention.layer_norm_rms_epsilon", 1e-5f));
  if (!(hp.rms_eps > 0.0f && hp.rms_eps < 1.0f))
    return error("{}: '{}.attention.layer_norm_rms_epsilon' must be in (0, 1)", f.name(), a);
  T9_TRY(read_rope(f, hp));
  T9_ASSIGN_OR_RETURN(hp.sliding_window, key_or<int>(f, a, "attention.sliding_window", 0));
  if (hp.sliding_window < 0)
    return error("{}: '{}.attention.sliding_window' must be >= 0", f.name(), a);
  if (f.find(a + ".attention.sliding_window_pattern")) {
    T9_ASSIGN_OR_RETURN(hp.swa_layers, f.get_array<bool>(a + ".attention.sliding_window_pattern"));
    if (static_cast<int>(hp.swa_layers.size()) != hp.n_layer)
      return error("{}: '{}.attention.sliding_window_pattern' has {} entries for {} layers",
                   f.name(), a, hp.swa_layers.size(), hp.n_layer);
  }
  T9_ASSIGN_OR_RETURN(hp.rope_freq_base_swa, key_or<float>(f, a, "rope.freq_base_swa", 0.0f));
  T9_ASSIGN_OR_RETURN(hp.attn_scale, key_or<float>(f, a, "attention.scale", 0.0f));
  if (hp.rope_freq_base_swa < 0.0f || hp.attn_scale < 0.0f)
    return error("{}: rope.freq_base_swa and attention.scale must be >= 0", f.name());
  T9_ASSIGN_OR_RETURN(hp.attn_softcap, key_or<float>(f, a, "attn_logit_softcapping", 0.0f));
  T9_ASSIGN_OR_RETURN(hp.final_softcap, key_or<float>(f, a, "final_logit_softcapping", 0.0f));
  if (hp.attn_softcap < 0.0f || hp.final_softcap < 0.0f)
    return error("{}: logit softcapping values must be >= 0", f.name());

  T9_TRY(read_moe_ssm(f, hp));

  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2)
    return error("{}: tensor 'token_embd.weight' is missing or not 2-D", f.name());
  if (embd->ne[0] != hp.n_embd)
    return error("{}: token_embd.weight has {} columns, embedding_length is {}", f.name(),
                 embd->ne[0], hp.n_embd);
  if (embd->ne[1] <= 0 || embd->ne[1] > (1 << 24))
    return error("{}: token_embd.weight has {} rows (vocabulary size out of range)", f.name(),
                 embd->ne[1]);
  hp.n_vocab = static_cast<int>(embd->ne[1]);
  return hp;
}

}  // namespace t9::model
