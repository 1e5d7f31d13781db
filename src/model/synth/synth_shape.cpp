#include "model/synth/synth_shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace t9::synth {
namespace {

using nlohmann::json;

// The default vocabulary of tiny presets: the synthetic tokenizer's tokens, padded to a round size.
constexpr int kTinyVocab = 512;

SynthShape tiny_base(const std::string& arch) {
  SynthShape s;
  s.arch = arch;
  s.name = arch + " tiny (synthetic)";
  s.n_layer = 2;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 64;
  s.n_rot = 64;
  s.n_vocab = kTinyVocab;
  s.n_ctx_train = 4096;
  s.rope_freq_base = 10000.0f;
  s.rms_eps = 1e-6f;
  return s;
}

// Hybrids: 4 layers = 3 Gated DeltaNet blocks and 1 gated-attention block; 2 key heads shared by 4
// value heads (the grouped/tiled V-head order matters); partial rotary (a quarter of head_dim).
void tiny_hybrid(SynthShape& s) {
  s.n_layer = 4;
  s.full_attn_interval = 4;
  s.n_rot = s.head_dim / 4;
  s.ssm_d_conv = 4;
  s.ssm_d_state = 64;
  s.ssm_n_group = 2;
  s.ssm_dt_rank = 4;
}

void tiny_moe(SynthShape& s, bool shared) {
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_ff_exp = 256;
  s.n_ff_shexp = shared ? 256 : 0;
}

Result<SynthShape> tiny_shape(const std::string& arch) {
  SynthShape s = tiny_base(arch);
  if (arch == "llama") {
    s.rms_eps = 1e-5f;
  } else if (arch == "qwen2" || arch == "qwen3") {
    s.rope_freq_base = 1000000.0f;
  } else if (arch == "gemma3") {
    // 6 layers: 5 sliding-window layers then 1 global one (gemma3's pattern); a 16-token window so
    // that short tests already slide. Tied embeddings as in every Gemma.
    s.n_layer = 6;
    s.sliding_window = 16;
    s.rope_freq_base = 1000000.0f;
    s.rope_freq_base_swa = 10000.0f;
    s.tied_embeddings = true;
  } else if (arch == "qwen3moe") {
    tiny_moe(s, false);
  } else if (arch == "qwen3next") {
    tiny_hybrid(s);
    tiny_moe(s, true);
    s.n_ff = 0;
  } else if (arch == "qwen35") {
    tiny_hybrid(s);
  } else if (arch == "qwen35moe") {
    tiny_hybrid(s);
    tiny_moe(s, true);
    s.n_ff = 0;
  } else {
    return error("synth: architecture '{}' is not supported", arch);
  }
  return s;
}

struct RealPreset {
  const char* name;
  SynthShape (*make)();
};

// Real model shapes from their published config.json files (values cited in docs/SYNTH.md).
SynthShape qwen3_8b() {
  SynthShape s;
  s.arch = "qwen3";
  s.name = "Qwen3-8B shape (synthetic)";
  s.n_layer = 36, s.n_embd = 4096, s.n_ff = 12288;
  s.n_head = 32, s.n_head_kv = 8, s.head_dim = 128, s.n_rot = 128;
  s.n_vocab = 151936, s.n_ctx_train = 40960, s.rope_freq_base = 1000000.0f, s.rms_eps = 1e-6f;
  return s;
}

// Llama 3.1's "llama3" RoPE scaling (a rope_freqs.weight tensor in llama.cpp files) is left out:
// the weights are random, so the frequency schedule only needs to be a valid one.
SynthShape llama31_8b() {
  SynthShape s;
  s.arch = "llama";
  s.name = "Llama-3.1-8B shape (synthetic)";
  s.n_layer = 32, s.n_embd = 4096, s.n_ff = 14336;
  s.n_head = 32, s.n_head_kv = 8, s.head_dim = 128, s.n_rot = 128;
  s.n_vocab = 128256, s.n_ctx_train = 131072, s.rope_freq_base = 500000.0f, s.rms_eps = 1e-5f;
  return s;
}

SynthShape qwen3_30b_a3b() {
  SynthShape s;
  s.arch = "qwen3moe";
  s.name = "Qwen3-30B-A3B shape (synthetic)";
  s.n_layer = 48, s.n_embd = 2048, s.n_ff = 6144;
  s.n_head = 32, s.n_head_kv = 4, s.head_dim = 128, s.n_rot = 128;
  s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768;
  s.n_vocab = 151936, s.n_ctx_train = 40960, s.rope_freq_base = 1000000.0f, s.rms_eps = 1e-6f;
  return s;
}

// The MTP block (mtp_num_hidden_layers 1) is not written; see docs/SYNTH.md.
SynthShape qwen35_35b_a3b() {
  SynthShape s;
  s.arch = "qwen35moe";
  s.name = "Qwen3.5-35B-A3B shape (synthetic)";
  s.n_layer = 40, s.n_embd = 2048, s.n_ff = 0;
  s.n_head = 16, s.n_head_kv = 2, s.head_dim = 256, s.n_rot = 64;
  s.n_expert = 256, s.n_expert_used = 8, s.n_ff_exp = 512, s.n_ff_shexp = 512;
  s.full_attn_interval = 4, s.ssm_d_conv = 4, s.ssm_d_state = 128, s.ssm_n_group = 16;
  s.ssm_dt_rank = 32;
  s.n_vocab = 248320, s.n_ctx_train = 262144, s.rope_freq_base = 10000000.0f, s.rms_eps = 1e-6f;
  return s;
}

constexpr RealPreset kReal[] = {
    {"qwen3-8b", &qwen3_8b},
    {"llama-3.1-8b", &llama31_8b},
    {"qwen3-30b-a3b", &qwen3_30b_a3b},
    {"qwen3.5-35b-a3b", &qwen35_35b_a3b},
};

Result<int> get_int(const json& cfg, const std::string& path, const char* key, bool required,
                    int fallback = 0) {
  if (!cfg.contains(key) || cfg[key].is_null()) {
    if (required) return error("{}: '{}' is missing", path, key);
    return fallback;
  }
  if (!cfg[key].is_number_integer()) return error("{}: '{}' is not an integer", path, key);
  const int64_t v = cfg[key].get<int64_t>();
  if (v < 0 || v > (int64_t{1} << 30)) return error("{}: '{}' = {} is out of range", path, key, v);
  return static_cast<int>(v);
}

float get_rope_theta(const json& cfg, float fallback) {
  if (cfg.contains("rope_parameters") && cfg["rope_parameters"].is_object() &&
      cfg["rope_parameters"].contains("rope_theta"))
    return cfg["rope_parameters"]["rope_theta"].get<float>();
  if (cfg.contains("rope_theta") && cfg["rope_theta"].is_number())
    return cfg["rope_theta"].get<float>();
  return fallback;
}

float get_partial_rotary(const json& cfg) {
  if (cfg.contains("partial_rotary_factor") && cfg["partial_rotary_factor"].is_number())
    return cfg["partial_rotary_factor"].get<float>();
  if (cfg.contains("rope_parameters") && cfg["rope_parameters"].is_object())
    return cfg["rope_parameters"].value("partial_rotary_factor", 1.0f);
  return 1.0f;
}

Status read_moe_keys(const json& cfg, const std::string& path, SynthShape& s) {
  const char* n_key = cfg.contains("num_experts") ? "num_experts" : "num_local_experts";
  T9_ASSIGN_OR_RETURN(s.n_expert, get_int(cfg, path, n_key, true));
  T9_ASSIGN_OR_RETURN(s.n_expert_used, get_int(cfg, path, "num_experts_per_tok", true));
  T9_ASSIGN_OR_RETURN(s.n_ff_exp, get_int(cfg, path, "moe_intermediate_size", true));
  T9_ASSIGN_OR_RETURN(s.n_ff_shexp,
                      get_int(cfg, path, "shared_expert_intermediate_size", false, 0));
  return {};
}

Status read_linear_keys(const json& cfg, const std::string& path, SynthShape& s) {
  T9_ASSIGN_OR_RETURN(s.full_attn_interval,
                      get_int(cfg, path, "full_attention_interval", false, 4));
  T9_ASSIGN_OR_RETURN(s.ssm_d_conv, get_int(cfg, path, "linear_conv_kernel_dim", true));
  T9_ASSIGN_OR_RETURN(s.ssm_d_state, get_int(cfg, path, "linear_key_head_dim", true));
  T9_ASSIGN_OR_RETURN(s.ssm_n_group, get_int(cfg, path, "linear_num_key_heads", true));
  T9_ASSIGN_OR_RETURN(s.ssm_dt_rank, get_int(cfg, path, "linear_num_value_heads", true));
  T9_ASSIGN_OR_RETURN(int dv, get_int(cfg, path, "linear_value_head_dim", true));
  // llama.cpp's qwen3next/qwen35 graphs take the value head size from ssm.state_size.
  if (dv != s.ssm_d_state)
    return error("{}: linear_value_head_dim {} != linear_key_head_dim {} is not supported", path,
                 dv, s.ssm_d_state);
  return {};
}

}  // namespace

const std::vector<std::string_view>& synth_archs() {
  static const std::vector<std::string_view> kArchs = {
      "llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen3next", "qwen35", "qwen35moe"};
  return kArchs;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out{"tiny"};
  for (const RealPreset& p : kReal) out.emplace_back(p.name);
  return out;
}

Result<SynthShape> preset_shape(const std::string& arch, const std::string& preset) {
  if (preset == "tiny") return tiny_shape(arch);
  for (const RealPreset& p : kReal) {
    if (preset != p.name) continue;
    SynthShape s = p.make();
    if (!arch.empty() && arch != s.arch)
      return error("synth: preset '{}' is a {} model, not {}", preset, s.arch, arch);
    return s;
  }
  return error("synth: unknown preset '{}' (known: {})", preset, fmt::join(preset_names(), ", "));
}

Result<SynthShape> shape_from_hf_config(const std::string& arch, const std::string& path) {
  if (std::find(synth_archs().begin(), synth_archs().end(), arch) == synth_archs().end())
    return error("synth: architecture '{}' is not supported", arch);
  std::ifstream f(path);
  if (!f) return error("{}: cannot open", path);
  json cfg = json::parse(f, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) return error("{}: not a JSON object", path);
  if (cfg.contains("text_config") && cfg["text_config"].is_object()) cfg = cfg["text_config"];
  SynthShape s = tiny_base(arch);
  s.name = cfg.value("model_type", arch) + " config (synthetic)";
  T9_ASSIGN_OR_RETURN(s.n_layer, get_int(cfg, path, "num_hidden_layers", true));
  T9_ASSIGN_OR_RETURN(s.n_embd, get_int(cfg, path, "hidden_size", true));
  T9_ASSIGN_OR_RETURN(s.n_ff, get_int(cfg, path, "intermediate_size", false, 0));
  T9_ASSIGN_OR_RETURN(s.n_head, get_int(cfg, path, "num_attention_heads", true));
  T9_ASSIGN_OR_RETURN(s.n_head_kv, get_int(cfg, path, "num_key_value_heads", false, s.n_head));
  const int default_hd = s.n_head > 0 ? s.n_embd / s.n_head : 0;
  T9_ASSIGN_OR_RETURN(s.head_dim, get_int(cfg, path, "head_dim", false, default_hd));
  s.n_rot = static_cast<int>(static_cast<float>(s.head_dim) * get_partial_rotary(cfg));
  T9_ASSIGN_OR_RETURN(s.n_vocab, get_int(cfg, path, "vocab_size", true));
  T9_ASSIGN_OR_RETURN(s.n_ctx_train, get_int(cfg, path, "max_position_embeddings", false, 4096));
  s.rope_freq_base = get_rope_theta(cfg, 10000.0f);
  s.rms_eps = cfg.value("rms_norm_eps", 1e-6f);
  s.tied_embeddings = cfg.value("tie_word_embeddings", arch == "gemma3");
  if (arch == "gemma3") {
    T9_ASSIGN_OR_RETURN(s.sliding_window, get_int(cfg, path, "sliding_window", false, 512));
    s.rope_freq_base_swa = cfg.value("rope_local_base_freq", 10000.0f);
  }
  if (arch == "qwen3moe" || arch == "qwen3next" || arch == "qwen35moe")
    T9_TRY(read_moe_keys(cfg, path, s));
  if (arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe")
    T9_TRY(read_linear_keys(cfg, path, s));
  T9_TRY(validate_shape(s));
  return s;
}

Status validate_shape(const SynthShape& s) {
  auto positive = [](const char* field, int v) -> Status {
    if (v <= 0) return error("synth: {} = {} must be > 0", field, v);
    return {};
  };
  T9_TRY(positive("n_layer", s.n_layer));
  T9_TRY(positive("n_embd", s.n_embd));
  T9_TRY(positive("n_head", s.n_head));
  T9_TRY(positive("n_head_kv", s.n_head_kv));
  T9_TRY(positive("head_dim", s.head_dim));
  T9_TRY(positive("n_vocab", s.n_vocab));
  if (s.n_head % s.n_head_kv != 0)
    return error("synth: n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv);
  if (s.n_rot <= 0 || s.n_rot > s.head_dim || s.n_rot % 2 != 0)
    return error("synth: n_rot {} must be even and in 1..head_dim ({})", s.n_rot, s.head_dim);
  if (s.n_embd % 32 != 0) return error("synth: n_embd {} is not a multiple of 32", s.n_embd);
  if (s.n_expert > 0) {
    if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert || s.n_ff_exp <= 0)
      return error("synth: {} experts need n_expert_used in 1..{} and n_ff_exp > 0", s.n_expert,
                   s.n_expert);
  } else {
    T9_TRY(positive("n_ff", s.n_ff));
  }
  if (s.is_hybrid()) {
    T9_TRY(positive("ssm_d_conv", s.ssm_d_conv));
    T9_TRY(positive("ssm_d_state", s.ssm_d_state));
    T9_TRY(positive("ssm_n_group", s.ssm_n_group));
    T9_TRY(positive("ssm_dt_rank", s.ssm_dt_rank));
    if (s.ssm_dt_rank % s.ssm_n_group != 0)
      return error("synth: value heads {} are not a multiple of key heads {}", s.ssm_dt_rank,
                   s.ssm_n_group);
  }
  return {};
}

}  // namespace t9::synth
