#include "model/synth/synth_plan.h"

#include <fmt/format.h>

#include <cmath>

namespace t9::synth {
namespace {

class Planner {
 public:
  explicit Planner(const SynthShape& s) : s_(s) {}

  std::vector<TensorPlan> build() {
    const int64_t E = s_.n_embd, V = s_.n_vocab;
    // Tied embeddings double as the output matrix: rows of std 1/sqrt(E) give unit-scale logits
    // (gemma3 scales the looked-up rows by sqrt(E) back to unit scale). Untied input rows are
    // unit scale, like the residual stream the first norm sees.
    matrix("token_embd.weight", {E, V}, s_.tied_embeddings ? inv_sqrt(E) : 1.0f);
    for (int il = 0; il < s_.n_layer; ++il) layer(il);
    norm("output_norm.weight", E);
    if (!s_.tied_embeddings) matrix("output.weight", {E, V}, inv_sqrt(E));
    return std::move(out_);
  }

 private:
  static float inv_sqrt(int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); }

  void add(std::string name, std::vector<int64_t> ne, Init init, float scale) {
    TensorPlan t;
    t.name = std::move(name);
    t.ne = std::move(ne);
    t.init = init;
    t.scale = scale;
    out_.push_back(std::move(t));
  }
  void matrix(std::string name, std::vector<int64_t> ne, float scale) {
    add(std::move(name), std::move(ne), Init::kMatrix, scale);
  }
  // A projection [fan_in, n_out]: std 1/sqrt(fan_in) keeps its outputs at the input's scale.
  void proj(std::string name, int64_t fan_in, int64_t n_out) {
    matrix(std::move(name), {fan_in, n_out}, inv_sqrt(fan_in));
  }
  void norm(std::string name, int64_t n) { add(std::move(name), {n}, Init::kNorm, 0.1f); }

  std::string blk(int il, const char* what) const { return fmt::format("blk.{}.{}", il, what); }

  void layer(int il) {
    const int64_t E = s_.n_embd;
    norm(blk(il, "attn_norm.weight"), E);
    if (s_.is_recurrent(il))
      gated_deltanet(il);
    else
      attention(il);
    if (s_.is_hybrid()) {
      norm(blk(il, "post_attention_norm.weight"), E);
    } else if (s_.arch == "gemma3") {
      norm(blk(il, "post_attention_norm.weight"), E);
      norm(blk(il, "ffn_norm.weight"), E);
    } else {
      norm(blk(il, "ffn_norm.weight"), E);
    }
    if (s_.n_expert > 0)
      moe(il);
    else
      dense_ffn(il, s_.n_ff, "");
    if (s_.arch == "gemma3") norm(blk(il, "post_ffw_norm.weight"), E);
  }

  void attention(int il) {
    const int64_t E = s_.n_embd, d = s_.head_dim;
    const int64_t nq = s_.n_head * d, nkv = s_.n_head_kv * d;
    // Gated attention (hybrids): per head [query(d), gate(d)] rows.
    proj(blk(il, "attn_q.weight"), E, s_.is_hybrid() ? 2 * nq : nq);
    proj(blk(il, "attn_k.weight"), E, nkv);
    proj(blk(il, "attn_v.weight"), E, nkv);
    if (s_.arch == "qwen2") {
      add(blk(il, "attn_q.bias"), {nq}, Init::kBias, 0.1f);
      add(blk(il, "attn_k.bias"), {nkv}, Init::kBias, 0.1f);
      add(blk(il, "attn_v.bias"), {nkv}, Init::kBias, 0.1f);
    }
    if (s_.arch != "llama" && s_.arch != "qwen2") {
      norm(blk(il, "attn_q_norm.weight"), d);
      norm(blk(il, "attn_k_norm.weight"), d);
    }
    proj(blk(il, "attn_output.weight"), nq, E);
  }

  void gated_deltanet(int il) {
    const int64_t E = s_.n_embd, nk = s_.ssm_n_group, nv = s_.ssm_dt_rank, dk = s_.ssm_d_state;
    const int64_t vd = nv * dk, conv_ch = 2 * nk * dk + vd;
    proj(blk(il, "attn_qkv.weight"), E, conv_ch);
    proj(blk(il, "attn_gate.weight"), E, vd);
    if (s_.arch == "qwen3next") {
      proj(blk(il, "ssm_ba.weight"), E, 2 * nv);
    } else {
      proj(blk(il, "ssm_beta.weight"), E, nv);
      proj(blk(il, "ssm_alpha.weight"), E, nv);
    }
    // Depthwise causal conv: each channel mixes d_conv taps.
    matrix(blk(il, "ssm_conv1d.weight"), {s_.ssm_d_conv, conv_ch}, inv_sqrt(s_.ssm_d_conv));
    add(blk(il, "ssm_a"), {nv}, Init::kSsmA, 0.0f);
    add(blk(il, "ssm_dt.bias"), {nv}, Init::kDtBias, 0.0f);
    norm(blk(il, "ssm_norm.weight"), dk);
    proj(blk(il, "ssm_out.weight"), vd, E);
  }

  void dense_ffn(int il, int64_t F, const char* suffix) {
    const int64_t E = s_.n_embd;
    proj(blk(il, fmt::format("ffn_gate{}.weight", suffix).c_str()), E, F);
    proj(blk(il, fmt::format("ffn_up{}.weight", suffix).c_str()), E, F);
    proj(blk(il, fmt::format("ffn_down{}.weight", suffix).c_str()), F, E);
  }

  void moe(int il) {
    const int64_t E = s_.n_embd, X = s_.n_expert, Fe = s_.n_ff_exp;
    proj(blk(il, "ffn_gate_inp.weight"), E, X);
    matrix(blk(il, "ffn_gate_exps.weight"), {E, Fe, X}, inv_sqrt(E));
    matrix(blk(il, "ffn_up_exps.weight"), {E, Fe, X}, inv_sqrt(E));
    matrix(blk(il, "ffn_down_exps.weight"), {Fe, E, X}, inv_sqrt(Fe));
    if (s_.n_ff_shexp > 0) {
      // llama.cpp creates the shared-expert gate as a vector [E].
      matrix(blk(il, "ffn_gate_inp_shexp.weight"), {E}, inv_sqrt(E));
      dense_ffn(il, s_.n_ff_shexp, "_shexp");
    }
  }

  const SynthShape& s_;
  std::vector<TensorPlan> out_;
};

struct QuantName {
  SynthQuant q;
  const char* name;
  uint32_t ftype;  // llama_ftype
};

constexpr QuantName kQuants[] = {
    {SynthQuant::F32, "F32", 0},        {SynthQuant::F16, "F16", 1},
    {SynthQuant::BF16, "BF16", 32},     {SynthQuant::Q8_0, "Q8_0", 7},
    {SynthQuant::Q4_0, "Q4_0", 2},      {SynthQuant::Q6_K, "Q6_K", 18},
    {SynthQuant::Q4_K_M, "Q4_K_M", 15}, {SynthQuant::Q3_K_M, "Q3_K_M", 12},
    {SynthQuant::Q5_K_M, "Q5_K_M", 17},
};

}  // namespace

Result<SynthQuant> quant_from_name(std::string_view name) {
  std::string names;
  for (const QuantName& q : kQuants) {
    if (name == q.name) return q.q;
    names += (names.empty() ? "" : ", ") + std::string(q.name);
  }
  return error("synth: unknown --quant '{}' (one of {})", name, names);
}

std::string_view quant_name(SynthQuant q) {
  for (const QuantName& x : kQuants)
    if (x.q == q) return x.name;
  return "?";
}

uint32_t llama_ftype(SynthQuant q) {
  for (const QuantName& x : kQuants)
    if (x.q == q) return x.ftype;
  return 0;
}

int64_t TensorPlan::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

uint64_t TensorPlan::n_bytes() const {
  return static_cast<uint64_t>(n_elements() / ne[0]) * row_bytes(type, ne[0]);
}

Result<std::vector<TensorPlan>> make_plan(const SynthShape& shape, SynthQuant quant) {
  T9_TRY(validate_shape(shape));
  std::vector<TensorPlan> plan = Planner(shape).build();
  assign_types(shape, quant, plan);
  return plan;
}

}  // namespace t9::synth
