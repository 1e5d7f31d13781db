// Tensor types per --quant, following llama.cpp's llama-quantize (src/llama-quant.cpp of the
// llama.cpp vendored by llama-cpp-python 0.3.36: tensor_allows_quantization,
// llama_tensor_get_type_impl, tensor_type_fallback) for the ftypes synth offers, so that a
// synthetic Q4_K_M file has the same per-tensor types as one llama-quantize would make from the
// same shapes. The rules are restated in docs/SYNTH.md.
#include <algorithm>
#include <cstdio>

#include "model/synth/synth_plan.h"

namespace t9::synth {
namespace {

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// llama.cpp quantizes only 2-D/3-D "*weight" tensors, never norms, routers or conv1d kernels
// (converters keep those F32 too).
bool quantizable(const TensorPlan& t) {
  int n_dims = static_cast<int>(t.ne.size());
  while (n_dims > 1 && t.ne[static_cast<size_t>(n_dims) - 1] == 1) --n_dims;
  if (n_dims < 2 || !t.name.ends_with("weight")) return false;
  return !has(t.name, "_norm.weight") && !has(t.name, "ffn_gate_inp.weight") &&
         !has(t.name, "ssm_conv1d");
}

enum class Category {
  kOutput,
  kTokenEmbd,
  kAttnQkv,
  kAttnV,
  kAttnK,
  kAttnQ,
  kAttnOut,
  kFfnDown,
  kOther
};

Category category(const std::string& n) {
  if (n == "output.weight") return Category::kOutput;
  if (n == "token_embd.weight") return Category::kTokenEmbd;
  if (has(n, "attn_qkv.weight")) return Category::kAttnQkv;
  if (has(n, "attn_v.weight")) return Category::kAttnV;
  if (has(n, "attn_k.weight")) return Category::kAttnK;
  if (has(n, "attn_q.weight")) return Category::kAttnQ;
  if (has(n, "attn_output.weight")) return Category::kAttnOut;
  if (has(n, "ffn_up")) return Category::kOther;  // (only IQ mixes change ffn_up/gate)
  if (has(n, "ffn_gate")) return Category::kOther;
  if (has(n, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

GgmlType default_type(SynthQuant q) {
  switch (q) {
    case SynthQuant::F32:
      return GgmlType::F32;
    case SynthQuant::F16:
      return GgmlType::F16;
    case SynthQuant::BF16:
      return GgmlType::BF16;
    case SynthQuant::Q8_0:
      return GgmlType::Q8_0;
    case SynthQuant::Q4_0:
      return GgmlType::Q4_0;
    case SynthQuant::Q6_K:
      return GgmlType::Q6_K;
    case SynthQuant::Q4_K_M:
      return GgmlType::Q4_K;
    case SynthQuant::Q3_K_M:
      return GgmlType::Q3_K;
    case SynthQuant::Q5_K_M:
      return GgmlType::Q5_K;
  }
  return GgmlType::F32;
}

struct MixState {
  SynthQuant q;
  int n_layer = 0;
  int n_expert = 0;
  int n_attention_wv = 0;  // attn_v-like tensors (attn_v, attn_qkv) in the file
  int i_attention_wv = 0;
  int i_ffn_down = 0;
};

// Layer of an FFN-down tensor: llama.cpp parses blk.N from the name for MoE models (experts and
// shared experts of one layer share N) and counts tensors for dense ones.
int ffn_down_layer(const MixState& st, const std::string& name) {
  if (st.n_expert > 1) {
    int il = 0;
    if (std::sscanf(name.c_str(), "blk.%d.", &il) == 1) return il;
  }
  return st.i_ffn_down;
}

GgmlType attn_v_type(MixState& st, GgmlType t) {
  if (st.q == SynthQuant::Q3_K_M) t = st.i_attention_wv < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
  if ((st.q == SynthQuant::Q4_K_M || st.q == SynthQuant::Q5_K_M) &&
      use_more_bits(st.i_attention_wv, st.n_attention_wv))
    t = GgmlType::Q6_K;
  if (st.n_expert == 8) t = GgmlType::Q8_0;
  ++st.i_attention_wv;
  return t;
}

GgmlType ffn_down_type(MixState& st, const std::string& name, GgmlType t) {
  const int il = ffn_down_layer(st, name), n = st.n_layer;
  if (st.q == SynthQuant::Q3_K_M)
    t = il < n / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;  // (non-Falcon: Q4_K for the rest)
  if ((st.q == SynthQuant::Q4_K_M || st.q == SynthQuant::Q5_K_M) && use_more_bits(il, n))
    t = GgmlType::Q6_K;
  ++st.i_ffn_down;
  return t;
}

GgmlType mixed_type(MixState& st, const TensorPlan& tp, bool tied, GgmlType t) {
  switch (category(tp.name)) {
    case Category::kOutput:
      return t == GgmlType::Q8_0 ? t : GgmlType::Q6_K;
    case Category::kTokenEmbd:
      return tied && t != GgmlType::Q8_0 ? GgmlType::Q6_K : t;
    case Category::kAttnV:
    case Category::kAttnQkv:  // llama.cpp tests attn_v-like (QKV too) before its QKV rule
      return attn_v_type(st, t);
    case Category::kAttnK:
      return st.n_expert == 8 ? GgmlType::Q8_0 : t;
    case Category::kAttnOut:
      if (st.n_expert == 8)
        return st.q == SynthQuant::Q3_K_M || st.q == SynthQuant::Q4_K_M ? GgmlType::Q5_K : t;
      return st.q == SynthQuant::Q3_K_M ? GgmlType::Q4_K : t;
    case Category::kFfnDown:
      return ffn_down_type(st, tp.name, t);
    default:
      return t;
  }
}

// A type whose block does not divide the row length falls back as llama.cpp does.
GgmlType fallback(GgmlType t, int64_t ne0) {
  if (ne0 % traits(t).block_elems == 0) return t;
  switch (t) {
    case GgmlType::Q3_K:
      t = GgmlType::Q4_0;
      break;
    case GgmlType::Q4_K:
      t = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      t = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      t = GgmlType::Q8_0;
      break;
    default:
      break;
  }
  return ne0 % traits(t).block_elems == 0 ? t : GgmlType::F16;
}

}  // namespace

void assign_types(const SynthShape& shape, SynthQuant quant, std::vector<TensorPlan>& plan) {
  MixState st;
  st.q = quant;
  st.n_layer = shape.n_layer;
  st.n_expert = shape.n_expert;
  const bool tied = std::none_of(plan.begin(), plan.end(),
                                 [](const TensorPlan& t) { return t.name == "output.weight"; });
  for (const TensorPlan& t : plan) {
    const Category c = category(t.name);
    if (c == Category::kAttnV || c == Category::kAttnQkv) ++st.n_attention_wv;
  }
  const GgmlType base = default_type(quant);
  const bool is_quant = traits(base).quantized;
  for (TensorPlan& t : plan) {
    if (!quantizable(t)) {
      t.type = GgmlType::F32;
      continue;
    }
    GgmlType type = base;
    if (is_quant) type = fallback(mixed_type(st, t, tied, base), t.ne[0]);
    t.type = type;
  }
}

}  // namespace t9::synth
