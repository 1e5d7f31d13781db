// Metadata keys of synthetic files: llama.cpp's names, as its converter writes them for each
// family (and as model/hparams.cpp reads them).
#include <cmath>

#include "model/synth/synth.h"
#include "model/synth/synth_vocab.h"
#include "model/synth/synth_vocab_json.h"

namespace t9::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

Value u32(int64_t v) {
  return Value::u32(static_cast<uint32_t>(v));
}

void add_moe_keys(gguf::GgufWriter& w, const std::string& a, const SynthShape& s) {
  w.set(a + ".expert_count", u32(s.n_expert));
  w.set(a + ".expert_used_count", u32(s.n_expert_used));
  w.set(a + ".expert_feed_forward_length", u32(s.n_ff_exp));
  w.set(a + ".expert_weights_norm", Value::boolean(true));
  if (s.n_ff_shexp > 0) w.set(a + ".expert_shared_feed_forward_length", u32(s.n_ff_shexp));
}

void add_hybrid_keys(gguf::GgufWriter& w, const std::string& a, const SynthShape& s) {
  w.set(a + ".ssm.conv_kernel", u32(s.ssm_d_conv));
  w.set(a + ".ssm.state_size", u32(s.ssm_d_state));
  w.set(a + ".ssm.group_count", u32(s.ssm_n_group));
  w.set(a + ".ssm.time_step_rank", u32(s.ssm_dt_rank));
  w.set(a + ".ssm.inner_size", u32(int64_t{s.ssm_dt_rank} * s.ssm_d_state));
  w.set(a + ".full_attention_interval", u32(s.full_attn_interval));
  if (a == "qwen35" || a == "qwen35moe") {
    // Qwen3.5 uses interleaved M-RoPE; llama.cpp requires the sections. Text positions are equal
    // in every section, which makes it the plain NeoX rotation over rope.dimension_count dims.
    // Split n_rot / 2 pairs like Qwen3.5's [11, 11, 10] (of 32).
    const int pairs = s.n_rot / 2, s0 = (pairs * 11 + 31) / 32, s1 = s0;
    std::vector<Value> sec{Value::i32(s0), Value::i32(s1), Value::i32(pairs - s0 - s1),
                           Value::i32(0)};
    w.set(a + ".rope.dimension_sections", Value::array(ValueType::INT32, std::move(sec)));
  }
}

}  // namespace

Status add_model_metadata(gguf::GgufWriter& w, const SynthShape& s, SynthQuant q,
                          const std::string& tokenizer_json) {
  const std::string& a = s.arch;
  w.set("general.architecture", Value::str(a));
  w.set("general.name", Value::str(s.name));
  w.set("general.file_type", u32(llama_ftype(q)));
  w.set("general.quantization_version", u32(2));
  w.set(a + ".block_count", u32(s.n_layer));
  w.set(a + ".context_length", u32(s.n_ctx_train));
  w.set(a + ".embedding_length", u32(s.n_embd));
  if (s.n_ff > 0) w.set(a + ".feed_forward_length", u32(s.n_ff));
  w.set(a + ".attention.head_count", u32(s.n_head));
  w.set(a + ".attention.head_count_kv", u32(s.n_head_kv));
  w.set(a + ".attention.key_length", u32(s.head_dim));
  w.set(a + ".attention.value_length", u32(s.head_dim));
  w.set(a + ".attention.layer_norm_rms_epsilon", Value::f32(s.rms_eps));
  w.set(a + ".rope.dimension_count", u32(s.n_rot));
  w.set(a + ".rope.freq_base", Value::f32(s.rope_freq_base));
  w.set(a + ".vocab_size", u32(s.n_vocab));
  if (a == "gemma3") {
    w.set(a + ".attention.sliding_window", u32(s.sliding_window));
    w.set(a + ".rope.freq_base_swa", Value::f32(s.rope_freq_base_swa));
    w.set(a + ".attention.scale", Value::f32(1.0f / std::sqrt(static_cast<float>(s.head_dim))));
  }
  if (s.n_expert > 0) add_moe_keys(w, a, s);
  if (s.is_hybrid()) add_hybrid_keys(w, a, s);
  if (!tokenizer_json.empty()) return add_tokenizer_json_metadata(w, tokenizer_json, s.n_vocab);
  return add_tokenizer_metadata(w, s.n_vocab);
}

}  // namespace t9::synth
