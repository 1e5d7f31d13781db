#include "model/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "core/log.h"
#include "gguf/gguf_file.h"

#include <array>
#include <cstdio>

namespace t9::model {
namespace {

enum class Kind { kMatrix, kVector };  // matmul/get_rows weight, or an F32 norm/bias

// One tensor to load: where it goes and what it must look like (ne innermost first).
struct Wanted {
  std::string name;
  Tensor* dst;
  Kind kind;
  int64_t ne0, ne1;
  bool optional = false;
  int64_t ne2 = 1;  // experts
};

Status check_tensor(const gguf::GgufFile& f, const gguf::TensorInfo& t, const Wanted& w) {
  const int64_t ne1 = t.ne.size() > 1 ? t.ne[1] : 1;
  const int64_t ne2 = t.ne.size() > 2 ? t.ne[2] : 1;
  for (size_t i = 3; i < t.ne.size(); ++i)
    if (t.ne[i] != 1)
      return error("{}: tensor '{}' has {} dims, expected 2 or 3", f.name(), w.name, t.ne.size());
  if (t.ne.empty() || t.ne[0] != w.ne0 || ne1 != w.ne1 || ne2 != w.ne2)
    return error("{}: tensor '{}' has shape [{}], expected [{}, {}, {}] (ne0, ne1, ne2)", f.name(),
                 w.name, fmt::join(t.ne, ", "), w.ne0, w.ne1, w.ne2);
  if (w.kind == Kind::kVector && t.type != GgmlType::F32)
    return error("{}: tensor '{}' has type {}, expected F32", f.name(), w.name, type_name(t.type));
  if (w.kind == Kind::kMatrix && !backend_supports_weight_type(t.type))
    return error("{}: tensor '{}' has type {}, which no backend supports", f.name(), w.name,
                 type_name(t.type));
  return {};
}

void add_moe(std::vector<Wanted>& out, const HParams& hp, LayerWeights& l, int il) {
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  const int64_t E = hp.n_embd, X = hp.n_expert, Fe = hp.n_ff_exp, Fs = hp.n_ff_shexp;
  out.push_back({n("ffn_gate_inp.weight"), &l.ffn_gate_inp, Kind::kMatrix, E, X});
  out.push_back({n("ffn_gate_exps.weight"), &l.ffn_gate_exps, Kind::kMatrix, E, Fe, false, X});
  out.push_back({n("ffn_up_exps.weight"), &l.ffn_up_exps, Kind::kMatrix, E, Fe, false, X});
  out.push_back({n("ffn_down_exps.weight"), &l.ffn_down_exps, Kind::kMatrix, Fe, E, false, X});
  if (Fs > 0) {
    out.push_back({n("ffn_gate_shexp.weight"), &l.ffn_gate_shexp, Kind::kMatrix, E, Fs});
    out.push_back({n("ffn_up_shexp.weight"), &l.ffn_up_shexp, Kind::kMatrix, E, Fs});
    out.push_back({n("ffn_down_shexp.weight"), &l.ffn_down_shexp, Kind::kMatrix, Fs, E});
    out.push_back({n("ffn_gate_inp_shexp.weight"), &l.ffn_gate_inp_shexp, Kind::kMatrix, E, 1});
  }
}

void add_gdn(std::vector<Wanted>& out, const HParams& hp, const ArchSpec& spec, LayerWeights& l,
             int il) {
  auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
  const int64_t E = hp.n_embd, nk = hp.ssm_n_group, nv = hp.ssm_dt_rank, dk = hp.ssm_d_state;
  const int64_t vd = hp.ssm_d_inner, dv = vd / nv, Cd = 2 * nk * dk + vd;
  out.push_back({n("attn_qkv.weight"), &l.ssm_qkv, Kind::kMatrix, E, Cd});
  out.push_back({n("attn_gate.weight"), &l.ssm_z, Kind::kMatrix, E, vd});
  if (spec.gdn_fused_ba) {
    out.push_back({n("ssm_ba.weight"), &l.ssm_ba, Kind::kMatrix, E, 2 * nv});
  } else {
    out.push_back({n("ssm_beta.weight"), &l.ssm_beta, Kind::kMatrix, E, nv});
    out.push_back({n("ssm_alpha.weight"), &l.ssm_alpha, Kind::kMatrix, E, nv});
  }
  out.push_back({n("ssm_conv1d.weight"), &l.ssm_conv1d, Kind::kVector, hp.ssm_d_conv, Cd});
  out.push_back({n("ssm_a"), &l.ssm_a, Kind::kVector, nv, 1});
  out.push_back({n("ssm_dt.bias"), &l.ssm_dt, Kind::kVector, nv, 1});
  out.push_back({n("ssm_norm.weight"), &l.ssm_norm, Kind::kVector, dv, 1});
  out.push_back({n("ssm_out.weight"), &l.ssm_out, Kind::kMatrix, vd, E});
}

std::vector<Wanted> wanted_tensors(const HParams& hp, const ArchSpec& spec, Weights& w) {
  const int64_t E = hp.n_embd, F = hp.n_ff, d = hp.head_dim;
  const int64_t nq = hp.n_head * d, nkv = hp.n_head_kv * d;
  std::vector<Wanted> out{
      {"token_embd.weight", &w.token_embd, Kind::kMatrix, E, hp.n_vocab},
      {"output_norm.weight", &w.output_norm, Kind::kVector, E, 1},
      {"output.weight", &w.output, Kind::kMatrix, E, hp.n_vocab, /*optional=*/true},
  };
  w.layers.resize(static_cast<size_t>(hp.n_layer_main()));
  for (int il = 0; il < hp.n_layer_main(); ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
    out.push_back({n("attn_norm.weight"), &l.attn_norm, Kind::kVector, E, 1});
    out.push_back({n(spec.ffn_norm_is_post_attn ? "post_attention_norm.weight" : "ffn_norm.weight"),
                   &l.ffn_norm, Kind::kVector, E, 1});
    if (spec.moe) {
      add_moe(out, hp, l, il);
    } else {
      out.push_back({n("ffn_gate.weight"), &l.ffn_gate, Kind::kMatrix, E, F});
      out.push_back({n("ffn_up.weight"), &l.ffn_up, Kind::kMatrix, E, F});
      out.push_back({n("ffn_down.weight"), &l.ffn_down, Kind::kMatrix, F, E});
    }
    if (spec.layers[static_cast<size_t>(il)].recurrent) {
      add_gdn(out, hp, spec, l, il);
      continue;
    }
    out.push_back({n("attn_q.weight"), &l.wq, Kind::kMatrix, E, spec.gated_attn ? 2 * nq : nq});
    out.push_back({n("attn_k.weight"), &l.wk, Kind::kMatrix, E, nkv});
    out.push_back({n("attn_v.weight"), &l.wv, Kind::kMatrix, E, nkv});
    out.push_back({n("attn_output.weight"), &l.wo, Kind::kMatrix, nq, E});
    if (spec.qkv_bias) {
      out.push_back({n("attn_q.bias"), &l.bq, Kind::kVector, nq, 1});
      out.push_back({n("attn_k.bias"), &l.bk, Kind::kVector, nkv, 1});
      out.push_back({n("attn_v.bias"), &l.bv, Kind::kVector, nkv, 1});
    }
    if (spec.qk_norm) {
      out.push_back({n("attn_q_norm.weight"), &l.q_norm, Kind::kVector, d, 1});
      out.push_back({n("attn_k_norm.weight"), &l.k_norm, Kind::kVector, d, 1});
    }
    if (spec.sandwich_norms) {
      out.push_back({n("post_attention_norm.weight"), &l.post_attn_norm, Kind::kVector, E, 1});
      out.push_back({n("post_ffw_norm.weight"), &l.post_ffw_norm, Kind::kVector, E, 1});
    }
  }
  return out;
}

// MTP (nextn) blocks: the trailing nextn_predict_layers blocks. Kept as they are (by name) for a
// later speculative-decoding head and logged, never dropped silently.
Status load_nextn(const gguf::GgufFile& f, const HParams& hp, Backend& backend, Weights& w) {
  if (hp.n_nextn == 0) return {};
  size_t n_bytes = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    int il = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &il) != 1 || il < hp.n_layer_main()) continue;
    auto buf = backend.upload_weights(f.tensor_data(t), t.n_bytes);
    if (!buf.ok()) {
      free_weights(w, backend);
      return error("uploading tensor '{}': {}", t.name, buf.message());
    }
    w.buffers.push_back(*buf);
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    for (size_t i = 0; i < t.ne.size() && i < 4; ++i) ne[i] = t.ne[i];
    w.nextn.emplace_back(t.name, make_tensor(*buf, 0, t.type, ne[0], ne[1], ne[2], ne[3]));
    n_bytes += t.n_bytes;
  }
  T9_LOG_INFO(
      "{}: loaded {} MTP (nextn) tensors of {} block(s), {:.1f} MiB; forward() does not run "
      "them yet",
      f.name(), w.nextn.size(), hp.n_nextn, n_bytes / 1048576.0);
  return {};
}

}  // namespace

bool rides_with_experts(std::string_view gguf_name) {
  return gguf_name.ends_with("ffn_gate_shexp.weight") || gguf_name.ends_with("ffn_up_shexp.weight");
}

Result<Weights> load_weights(const gguf::GgufFile& f, const HParams& hp, const ArchSpec& spec,
                             Backend& backend, const LoadProgress& progress) {
  Weights w;
  const std::vector<Wanted> wanted = wanted_tensors(hp, spec, w);
  // Validate everything before the first upload, so a bad file allocates nothing.
  std::vector<const gguf::TensorInfo*> infos;
  for (const Wanted& x : wanted) {
    const gguf::TensorInfo* t = f.find_tensor(x.name);
    if (!t && !x.optional) return error("{}: tensor '{}' is missing", f.name(), x.name);
    if (t) T9_TRY(check_tensor(f, *t, x));
    infos.push_back(t);
  }
  const int total = static_cast<int>(wanted.size());
  for (int i = 0; i < total; ++i) {
    const gguf::TensorInfo* t = infos[static_cast<size_t>(i)];
    if (t) {
      const Wanted& want = wanted[static_cast<size_t>(i)];
      // 2-D matrices other than the embedding table (get_rows reads it; a tied output shares it)
      // are read by matmuls only: the backend may keep them in a layout of its own, but for
      // those that ride with the experts.
      const bool matmul_only = want.kind == Kind::kMatrix && want.ne2 == 1 &&
                               want.dst != &w.token_embd && !rides_with_experts(want.name);
      auto buf = matmul_only ? backend.upload_matmul_weights(f.tensor_data(*t), t->n_bytes, t->type,
                                                             want.ne0, want.ne1)
                             : backend.upload_weights(f.tensor_data(*t), t->n_bytes);
      if (!buf.ok()) {
        free_weights(w, backend);
        return error("uploading tensor '{}': {}", t->name, buf.message());
      }
      w.buffers.push_back(*buf);
      *want.dst = make_tensor(*buf, 0, t->type, want.ne0, want.ne1, want.ne2);
    }
    if (progress) progress(i + 1, total);
  }
  if (!w.output.valid()) w.output = w.token_embd;  // tied embeddings
  T9_TRY(load_nextn(f, hp, backend, w));
  return w;
}

void free_weights(Weights& w, Backend& backend) {
  for (Buffer* b : w.buffers) backend.free(b);
  w.buffers.clear();
}

}  // namespace t9::model
