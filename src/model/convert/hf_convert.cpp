#include "model/convert/hf_convert.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>

#include "core/log.h"
#include "gguf/gguf_writer.h"
#include "model/convert/safetensors.h"
#include "quant/quantize.h"

namespace t9::convert {
namespace {

using nlohmann::json;
using gguf::Value;
using gguf::ValueType;

struct ArchSpec {
  const char* hf_model_type;
  const char* gguf_arch;
  bool permute_qk;   // llama: HF half-split rotary -> ggml interleaved
  float norm_shift;  // gemma: stores 1 + w
};

constexpr ArchSpec kArchs[] = {
    {"llama", "llama", true, 0.0f},          {"qwen2", "qwen2", false, 0.0f},
    {"qwen3", "qwen3", false, 0.0f},         {"qwen3_moe", "qwen3moe", false, 0.0f},
    {"gemma3_text", "gemma3", false, 1.0f},  {"gemma3", "gemma3", false, 1.0f},
    // Qwen3-Next family: HF RMSNorm is x * (1 + w); llama.cpp stores w + 1 (except the gated
    // linear_attn.norm, a plain weight).
    {"qwen3_next", "qwen3next", false, 1.0f},
    {"qwen3_5_text", "qwen35", false, 1.0f},
    {"qwen3_5_moe_text", "qwen35moe", false, 1.0f},
};

bool is_hybrid(const std::string& arch) {
  return arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe";
}

const ArchSpec* find_arch(const std::string& model_type) {
  for (const auto& a : kArchs)
    if (model_type == a.hf_model_type) return &a;
  return nullptr;
}

Value u32(uint64_t v) { return Value{ValueType::UINT32, uint64_t{v}}; }
Value f32(double v) { return Value{ValueType::FLOAT32, double{v}}; }
Value str(std::string s) { return Value{ValueType::STRING, std::move(s)}; }
Value boolean(bool b) { return Value{ValueType::BOOL, b}; }

// HF tensor name -> GGUF name (empty: not a tensor we convert). Per-layer names keep the index.
std::string gguf_name(const std::string& arch, const std::string& hf) {
  static const std::map<std::string, std::string> kGlobal = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  if (auto it = kGlobal.find(hf); it != kGlobal.end()) return it->second;
  static const std::regex kLayer(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf, m, kLayer)) return "";
  const std::string blk = "blk." + m[1].str() + ".";
  const std::string rest = m[2].str();
  const bool gemma = arch == "gemma3";
  static const std::map<std::string, std::string> kCommon = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
  };
  static const std::map<std::string, std::string> kHybrid = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
      {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
      {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
      {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
      {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
      {"linear_attn.A_log", "ssm_a"},
      {"linear_attn.dt_bias", "ssm_dt.bias"},
      {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
      {"linear_attn.norm.weight", "ssm_norm.weight"},
      {"linear_attn.out_proj.weight", "ssm_out.weight"},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
  };
  if (is_hybrid(arch))
    if (auto it = kHybrid.find(rest); it != kHybrid.end()) return blk + it->second;
  if (gemma) {
    if (rest == "post_attention_layernorm.weight") return blk + "post_attention_norm.weight";
    if (rest == "pre_feedforward_layernorm.weight") return blk + "ffn_norm.weight";
    if (rest == "post_feedforward_layernorm.weight") return blk + "post_ffw_norm.weight";
  } else if (rest == "post_attention_layernorm.weight") {
    return blk + "ffn_norm.weight";
  }
  if (auto it = kCommon.find(rest); it != kCommon.end()) return blk + it->second;
  return "";
}

// Rows of one head group move from [2][hd/2] (HF) to [hd/2][2] (ggml normal RoPE).
std::vector<float> permute_qk(const std::vector<float>& w, int64_t n_rows, int64_t n_cols,
                              int64_t n_heads) {
  std::vector<float> out(w.size());
  const int64_t hd = n_rows / n_heads, half = hd / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const int64_t src = h * hd + i * half + j, dst = h * hd + 2 * j + i;
        std::copy_n(&w[src * n_cols], n_cols, &out[dst * n_cols]);
      }
  return out;
}

// Linear-attention head geometry from config.json.
struct LinearHeads {
  int64_t nk = 0, nv = 0, dk = 0, dv = 0;
  int64_t r() const { return nv / nk; }
};

// Moves blocks of `block` rows of a [nk * r * block, cols] slab from HF's grouped order (key head
// g, then its value heads j) to llama.cpp's tiled order (j, then g), as its Qwen3.5 converter
// does (_LinearAttentionVReorderBase) so that ggml can broadcast key heads by tiling.
void tile_v_rows(float* rows, const LinearHeads& h, int64_t block, int64_t cols) {
  const int64_t n = h.nv * block * cols;
  std::vector<float> tmp(rows, rows + n);
  for (int64_t g = 0; g < h.nk; ++g)
    for (int64_t j = 0; j < h.r(); ++j)
      std::copy_n(&tmp[((g * h.r() + j) * block) * cols], block * cols,
                  rows + ((j * h.nk + g) * block) * cols);
}

// The same reorder on the columns of a [n_rows, nv * block] matrix (out_proj's input dim).
void tile_v_cols(std::vector<float>& w, const LinearHeads& h, int64_t block, int64_t n_rows) {
  const int64_t n_cols = h.nv * block;
  std::vector<float> tmp(w);
  for (int64_t row = 0; row < n_rows; ++row)
    for (int64_t g = 0; g < h.nk; ++g)
      for (int64_t j = 0; j < h.r(); ++j)
        std::copy_n(&tmp[row * n_cols + (g * h.r() + j) * block], block,
                    &w[row * n_cols + (j * h.nk + g) * block]);
}

// Qwen3-Next in_proj_qkvz rows are grouped per key head [q(dk), k(dk), v(r dv), z(r dv)]; llama.cpp
// splits them into attn_qkv (all q, all k, all v) and attn_gate (all z).
void split_qkvz(const std::vector<float>& w, const LinearHeads& h, int64_t cols,
                std::vector<float>& qkv, std::vector<float>& z) {
  const int64_t per = 2 * h.dk + 2 * h.r() * h.dv;
  qkv.clear();
  z.clear();
  auto part = [&](std::vector<float>& out, int64_t first, int64_t n) {
    for (int64_t g = 0; g < h.nk; ++g)
      out.insert(out.end(), w.begin() + (g * per + first) * cols,
                 w.begin() + (g * per + first + n) * cols);
  };
  part(qkv, 0, h.dk);
  part(qkv, h.dk, h.dk);
  part(qkv, 2 * h.dk, h.r() * h.dv);
  part(z, 2 * h.dk + h.r() * h.dv, h.r() * h.dv);
}

Status add_f32_tensor(gguf::GgufWriter& w, const std::string& name, std::vector<int64_t> ne,
                      const std::vector<float>& data, GgmlType type) {
  // Quantized types need rows that are whole blocks; fall back to F32 like llama.cpp does.
  if (type != GgmlType::F32 && ne[0] % traits(type).block_elems != 0) type = GgmlType::F32;
  T9_ASSIGN_OR_RETURN(auto bytes, quantize_floats(type, data.data(),
                                                  static_cast<int64_t>(data.size())));
  return w.add_tensor(name, std::move(ne), type, bytes);
}

Result<json> read_config(const std::string& dir) {
  std::ifstream f(dir + "/config.json");
  if (!f) return error("{}/config.json: cannot open", dir);
  json cfg = json::parse(f, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) return error("{}/config.json: not a JSON object", dir);
  if (cfg.contains("text_config") && cfg["text_config"].is_object()) return cfg["text_config"];
  return cfg;
}

Result<int64_t> cfg_int(const json& cfg, const char* key) {
  if (!cfg.contains(key) || !cfg[key].is_number_integer())
    return error("config.json: '{}' missing or not an integer", key);
  return cfg[key].get<int64_t>();
}

double rope_theta(const json& cfg, const char* layer_type) {
  if (cfg.contains("rope_parameters")) {
    const json& rp = cfg["rope_parameters"];
    if (layer_type && rp.contains(layer_type)) return rp[layer_type].value("rope_theta", 10000.0);
    if (rp.contains("rope_theta")) return rp["rope_theta"].get<double>();
  }
  return cfg.value("rope_theta", 10000.0);
}

// HF spells the expert count num_experts or num_local_experts depending on the family.
Result<int64_t> expert_count(const json& cfg) {
  if (cfg.contains("num_experts")) return cfg_int(cfg, "num_experts");
  return cfg_int(cfg, "num_local_experts");
}

Result<LinearHeads> linear_heads(const json& cfg) {
  LinearHeads h;
  T9_ASSIGN_OR_RETURN(h.nk, cfg_int(cfg, "linear_num_key_heads"));
  T9_ASSIGN_OR_RETURN(h.nv, cfg_int(cfg, "linear_num_value_heads"));
  T9_ASSIGN_OR_RETURN(h.dk, cfg_int(cfg, "linear_key_head_dim"));
  T9_ASSIGN_OR_RETURN(h.dv, cfg_int(cfg, "linear_value_head_dim"));
  if (h.nk <= 0 || h.nv <= 0 || h.nv % h.nk != 0 || h.dk <= 0 || h.dv <= 0)
    return error("config.json: linear attention heads {} (key) / {} (value) are inconsistent",
                 h.nk, h.nv);
  return h;
}

// llama.cpp's ssm.* keys for Gated DeltaNet layers and the attention-layer interval.
Status write_linear_attention(gguf::GgufWriter& w, const std::string& a, const json& cfg,
                              int64_t n_layer) {
  T9_ASSIGN_OR_RETURN(LinearHeads h, linear_heads(cfg));
  T9_ASSIGN_OR_RETURN(int64_t k_conv, cfg_int(cfg, "linear_conv_kernel_dim"));
  w.set(a + ".ssm.conv_kernel", u32(k_conv));
  w.set(a + ".ssm.state_size", u32(h.dk));
  w.set(a + ".ssm.group_count", u32(h.nk));
  w.set(a + ".ssm.time_step_rank", u32(h.nv));
  w.set(a + ".ssm.inner_size", u32(h.nv * h.dv));
  int64_t interval = cfg.value("full_attention_interval", 4);
  if (cfg.contains("layer_types")) {  // must be periodic: attention exactly every interval-th
    const json& lt = cfg["layer_types"];
    interval = 0;
    for (int64_t il = 0; il < n_layer && interval == 0; ++il)
      if (lt.at(il) == "full_attention") interval = il + 1;
    for (int64_t il = 0; il < n_layer; ++il)
      if ((lt.at(il) == "full_attention") != (interval > 0 && (il + 1) % interval == 0))
        return error("config.json: layer_types is not periodic (layer {})", il);
  }
  w.set(a + ".full_attention_interval", u32(interval));
  return {};
}

Status write_metadata(gguf::GgufWriter& w, const ArchSpec& spec, const json& cfg,
                      const ConvertOptions& opt) {
  const std::string a = spec.gguf_arch;
  T9_ASSIGN_OR_RETURN(int64_t n_layer, cfg_int(cfg, "num_hidden_layers"));
  T9_ASSIGN_OR_RETURN(int64_t n_embd, cfg_int(cfg, "hidden_size"));
  T9_ASSIGN_OR_RETURN(int64_t n_head, cfg_int(cfg, "num_attention_heads"));
  const int64_t n_head_kv = cfg.value("num_key_value_heads", n_head);
  const int64_t head_dim = cfg.value("head_dim", n_embd / n_head);
  double partial = cfg.value("partial_rotary_factor", 1.0);
  if (!cfg.contains("partial_rotary_factor") && cfg.contains("rope_parameters"))
    partial = cfg["rope_parameters"].value("partial_rotary_factor", 1.0);

  w.set("general.architecture", str(a));
  w.set("general.name", str(opt.name.empty() ? cfg.value("model_type", a) + " (converted)" : opt.name));
  w.set("general.file_type", u32(opt.weight_type == GgmlType::F32 ? 0 : 1));
  w.set(a + ".block_count", u32(n_layer));
  w.set(a + ".context_length", u32(cfg.value("max_position_embeddings", 4096)));
  w.set(a + ".embedding_length", u32(n_embd));
  if (cfg.contains("intermediate_size"))
    w.set(a + ".feed_forward_length", u32(cfg["intermediate_size"].get<int64_t>()));
  w.set(a + ".attention.head_count", u32(n_head));
  w.set(a + ".attention.head_count_kv", u32(n_head_kv));
  w.set(a + ".attention.key_length", u32(head_dim));
  w.set(a + ".attention.value_length", u32(head_dim));
  w.set(a + ".attention.layer_norm_rms_epsilon", f32(cfg.value("rms_norm_eps", 1e-6)));
  w.set(a + ".rope.dimension_count", u32(static_cast<uint64_t>(head_dim * partial)));

  if (a == "gemma3") {
    w.set(a + ".rope.freq_base", f32(rope_theta(cfg, "full_attention")));
    w.set(a + ".rope.freq_base_swa", f32(rope_theta(cfg, "sliding_attention")));
    w.set(a + ".attention.sliding_window", u32(cfg.value("sliding_window", 512)));
    // Which layers slide, per layer (true = sliding window), from layer_types when present.
    gguf::Array pattern{ValueType::BOOL, {}};
    for (int64_t il = 0; il < n_layer; ++il) {
      bool swa = (il + 1) % cfg.value("_sliding_window_pattern", 6) != 0;
      if (cfg.contains("layer_types")) swa = cfg["layer_types"][il] == "sliding_attention";
      pattern.items.push_back(boolean(swa));
    }
    w.set(a + ".attention.sliding_window_pattern", Value{ValueType::ARRAY, std::move(pattern)});
    const double qpas = cfg.value("query_pre_attn_scalar", static_cast<double>(head_dim));
    w.set(a + ".attention.scale", f32(1.0 / std::sqrt(qpas)));
    if (cfg.contains("final_logit_softcapping") && cfg["final_logit_softcapping"].is_number())
      w.set(a + ".final_logit_softcapping", f32(cfg["final_logit_softcapping"].get<double>()));
    if (cfg.contains("attn_logit_softcapping") && cfg["attn_logit_softcapping"].is_number())
      w.set(a + ".attn_logit_softcapping", f32(cfg["attn_logit_softcapping"].get<double>()));
  } else {
    w.set(a + ".rope.freq_base", f32(rope_theta(cfg, nullptr)));
  }
  if (a == "qwen35" || a == "qwen35moe") {
    // Qwen3.5 declares interleaved M-RoPE and llama.cpp requires its sections. For text all
    // sections see the same position, so any split gives the plain NeoX rotation we compute;
    // the config's own mrope_section when it has one, else Qwen3.5's 11:11:10 proportion.
    const json rp = cfg.value("rope_parameters", json::object());
    std::vector<int32_t> sec;
    if (rp.contains("mrope_section") && rp["mrope_section"].is_array())
      for (const auto& v : rp["mrope_section"]) sec.push_back(v.get<int32_t>());
    const int pairs = static_cast<int>(head_dim * partial) / 2;
    if (sec.empty()) {
      const int s0 = (pairs * 11 + 31) / 32;
      sec = {s0, s0, pairs - 2 * s0};
    }
    sec.resize(4, 0);
    std::vector<Value> vals;
    for (int32_t v : sec) vals.push_back(Value::i32(v));
    w.set(a + ".rope.dimension_sections", Value::array(ValueType::INT32, std::move(vals)));
  }
  if (is_hybrid(a)) T9_TRY(write_linear_attention(w, a, cfg, n_layer));
  if (a == "qwen3moe" || cfg.contains("num_experts") || cfg.contains("num_local_experts")) {
    T9_ASSIGN_OR_RETURN(int64_t n_expert, expert_count(cfg));
    T9_ASSIGN_OR_RETURN(int64_t n_used, cfg_int(cfg, "num_experts_per_tok"));
    T9_ASSIGN_OR_RETURN(int64_t n_ff_exp, cfg_int(cfg, "moe_intermediate_size"));
    w.set(a + ".expert_count", u32(n_expert));
    w.set(a + ".expert_used_count", u32(n_used));
    w.set(a + ".expert_feed_forward_length", u32(n_ff_exp));
    w.set(a + ".expert_weights_norm", boolean(cfg.value("norm_topk_prob", true)));
    if (cfg.value("shared_expert_intermediate_size", 0) > 0)
      w.set(a + ".expert_shared_feed_forward_length",
            u32(cfg["shared_expert_intermediate_size"].get<int64_t>()));
  }
  return {};
}

// Stacks model.layers.L.mlp.experts.E.<proj>.weight (E = 0..n-1) into blk.L.ffn_<x>_exps.weight.
Status add_experts(gguf::GgufWriter& w, const SafetensorsFile& st, int64_t n_layer,
                   int64_t n_expert, GgmlType type) {
  static const std::pair<const char*, const char*> kProj[] = {
      {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"}};
  for (int64_t il = 0; il < n_layer; ++il) {
    for (auto [hf, gg] : kProj) {
      std::vector<float> all;
      std::vector<int64_t> shape;
      for (int64_t e = 0; e < n_expert; ++e) {
        const std::string name = fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", il, e, hf);
        const StTensor* t = st.find(name);
        if (!t) return error("safetensors: missing expert tensor '{}'", name);
        if (e == 0) shape = t->shape;
        if (t->shape != shape) return error("safetensors: '{}' has a different shape", name);
        T9_ASSIGN_OR_RETURN(auto v, st.to_f32(name));
        all.insert(all.end(), v.begin(), v.end());
      }
      T9_TRY(add_f32_tensor(w, fmt::format("blk.{}.{}.weight", il, gg),
                            {shape[1], shape[0], n_expert}, all, type));
    }
  }
  return {};
}

// llama.cpp's value transformations of Gated DeltaNet tensors (GGUF names, ggml ne order):
// ssm_a = -exp(A_log), conv1d [C, 1, K] -> [C, K], and for Qwen3.5 the tiled V-head order.
Status transform_linear_attention(const std::string& name, const LinearHeads& h, bool tile,
                                  std::vector<float>& v, std::vector<int64_t>& ne) {
  if (name.ends_with(".ssm_a"))
    for (float& x : v) x = -std::exp(x);
  if (name.ends_with("ssm_conv1d.weight")) {
    if (ne.size() != 3 || ne[1] != 1) return error("{}: conv1d weight must be [C, 1, K]", name);
    ne = {ne[0], ne[2]};
  }
  if (!tile) return {};
  const int64_t cols = ne[0];
  if (name.ends_with("attn_qkv.weight")) {
    tile_v_rows(v.data() + 2 * h.nk * h.dk * cols, h, h.dv, cols);
  } else if (name.ends_with("attn_gate.weight")) {
    tile_v_rows(v.data(), h, h.dv, cols);
  } else if (name.ends_with("ssm_beta.weight") || name.ends_with("ssm_alpha.weight")) {
    tile_v_rows(v.data(), h, 1, cols);
  } else if (name.ends_with(".ssm_a") || name.ends_with("ssm_dt.bias")) {
    tile_v_rows(v.data(), h, 1, 1);
  } else if (name.ends_with("ssm_conv1d.weight")) {
    tile_v_rows(v.data() + 2 * h.nk * h.dk * cols, h, h.dv, cols);
  } else if (name.ends_with("ssm_out.weight")) {
    tile_v_cols(v, h, h.dv, ne[1]);
  }
  return {};
}

}  // namespace

Result<std::string> gguf_arch_for(const std::string& hf_model_type) {
  if (const ArchSpec* a = find_arch(hf_model_type)) return std::string(a->gguf_arch);
  return error("model_type '{}' is not supported by the converter", hf_model_type);
}

Status convert_hf_to_gguf(const ConvertOptions& opt) {
  T9_ASSIGN_OR_RETURN(json cfg, read_config(opt.hf_dir));
  const std::string model_type = cfg.value("model_type", "");
  const ArchSpec* spec = find_arch(model_type);
  if (!spec) return error("{}/config.json: model_type '{}' is not supported", opt.hf_dir, model_type);
  T9_ASSIGN_OR_RETURN(auto st, SafetensorsFile::open(opt.hf_dir + "/model.safetensors"));

  gguf::GgufWriter w;
  T9_TRY(write_metadata(w, *spec, cfg, opt));
  const int64_t n_head = cfg.value("num_attention_heads", 1);
  const int64_t n_head_kv = cfg.value("num_key_value_heads", n_head);

  const std::string arch = spec->gguf_arch;
  LinearHeads heads;
  if (is_hybrid(arch)) {
    T9_ASSIGN_OR_RETURN(heads, linear_heads(cfg));
  }
  // llama.cpp reorders Qwen3.5 (not Qwen3-Next) value heads to the tiled order.
  const bool tile = (arch == "qwen35" || arch == "qwen35moe") && heads.nk != heads.nv;
  int n_mtp = 0;
  for (const auto& [hf, t] : st.tensors()) {
    if (hf.find(".mlp.experts.") != std::string::npos) continue;  // stacked below
    if (hf.starts_with("mtp.")) {  // as llama.cpp's converter: MTP blocks are not converted
      ++n_mtp;
      continue;
    }
    T9_ASSIGN_OR_RETURN(std::vector<float> v, st.to_f32(hf));
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());  // row-major -> ggml order
    if (hf.ends_with("linear_attn.in_proj_qkvz.weight")) {
      std::vector<float> qkv, z;
      split_qkvz(v, heads, t.shape[1], qkv, z);
      const std::string blk = hf.substr(0, hf.find("linear_attn")).replace(0, 13, "blk.");
      const int64_t cols = t.shape[1];
      T9_TRY(add_f32_tensor(w, blk + "attn_qkv.weight",
                            {cols, static_cast<int64_t>(qkv.size()) / cols}, qkv, opt.weight_type));
      T9_TRY(add_f32_tensor(w, blk + "attn_gate.weight",
                            {cols, static_cast<int64_t>(z.size()) / cols}, z, opt.weight_type));
      continue;
    }
    const std::string name = gguf_name(arch, hf);
    if (name.empty()) return error("{}: tensor '{}' has no GGUF mapping", opt.hf_dir, hf);
    if (is_hybrid(arch)) T9_TRY(transform_linear_attention(name, heads, tile, v, ne));
    const bool is_norm = name.find("norm.weight") != std::string::npos &&
                         name.find("ssm_norm") == std::string::npos;
    if (is_norm && spec->norm_shift != 0.0f)
      for (float& x : v) x += spec->norm_shift;
    if (spec->permute_qk && t.shape.size() == 2) {
      if (name.ends_with("attn_q.weight")) v = permute_qk(v, t.shape[0], t.shape[1], n_head);
      if (name.ends_with("attn_k.weight")) v = permute_qk(v, t.shape[0], t.shape[1], n_head_kv);
    }
    const GgmlType type = t.shape.size() >= 2 ? opt.weight_type : GgmlType::F32;
    T9_TRY(add_f32_tensor(w, name, ne, v, type));
  }
  if (cfg.contains("num_experts") || cfg.contains("num_local_experts")) {
    T9_ASSIGN_OR_RETURN(int64_t n_expert, expert_count(cfg));
    T9_TRY(add_experts(w, st, cfg.value("num_hidden_layers", 0), n_expert, opt.weight_type));
  }
  if (n_mtp > 0)
    T9_LOG_WARN("{}: {} MTP (mtp.*) tensors not converted (as llama.cpp)", opt.hf_dir, n_mtp);
  return w.write_file(opt.out_path);
}

}  // namespace t9::convert
