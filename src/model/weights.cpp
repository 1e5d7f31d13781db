#include "model/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"

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
};

Status check_tensor(const gguf::GgufFile& f, const gguf::TensorInfo& t, const Wanted& w) {
  const int64_t ne1 = t.ne.size() > 1 ? t.ne[1] : 1;
  for (size_t i = 2; i < t.ne.size(); ++i)
    if (t.ne[i] != 1)
      return error("{}: tensor '{}' has {} dims, expected 2", f.name(), w.name, t.ne.size());
  if (t.ne.empty() || t.ne[0] != w.ne0 || ne1 != w.ne1)
    return error("{}: tensor '{}' has shape [{}], expected [{}, {}] (ne0, ne1)", f.name(), w.name,
                 fmt::join(t.ne, ", "), w.ne0, w.ne1);
  if (w.kind == Kind::kVector && t.type != GgmlType::F32)
    return error("{}: tensor '{}' has type {}, expected F32", f.name(), w.name, type_name(t.type));
  if (w.kind == Kind::kMatrix && !backend_supports_weight_type(t.type))
    return error("{}: tensor '{}' has type {}, which no backend supports", f.name(), w.name,
                 type_name(t.type));
  return {};
}

std::vector<Wanted> wanted_tensors(const HParams& hp, const ArchSpec& spec, Weights& w) {
  const int64_t E = hp.n_embd, F = hp.n_ff, d = hp.head_dim;
  const int64_t nq = hp.n_head * d, nkv = hp.n_head_kv * d;
  std::vector<Wanted> out{
      {"token_embd.weight", &w.token_embd, Kind::kMatrix, E, hp.n_vocab},
      {"output_norm.weight", &w.output_norm, Kind::kVector, E, 1},
      {"output.weight", &w.output, Kind::kMatrix, E, hp.n_vocab, /*optional=*/true},
  };
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    auto n = [il](const char* s) { return fmt::format("blk.{}.{}", il, s); };
    out.push_back({n("attn_norm.weight"), &l.attn_norm, Kind::kVector, E, 1});
    out.push_back({n("attn_q.weight"), &l.wq, Kind::kMatrix, E, nq});
    out.push_back({n("attn_k.weight"), &l.wk, Kind::kMatrix, E, nkv});
    out.push_back({n("attn_v.weight"), &l.wv, Kind::kMatrix, E, nkv});
    out.push_back({n("attn_output.weight"), &l.wo, Kind::kMatrix, nq, E});
    out.push_back({n("ffn_norm.weight"), &l.ffn_norm, Kind::kVector, E, 1});
    out.push_back({n("ffn_gate.weight"), &l.ffn_gate, Kind::kMatrix, E, F});
    out.push_back({n("ffn_up.weight"), &l.ffn_up, Kind::kMatrix, E, F});
    out.push_back({n("ffn_down.weight"), &l.ffn_down, Kind::kMatrix, F, E});
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

}  // namespace

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
      auto buf = backend.upload_weights(f.tensor_data(*t), t->n_bytes);
      if (!buf.ok()) {
        free_weights(w, backend);
        return error("uploading tensor '{}': {}", t->name, buf.message());
      }
      w.buffers.push_back(*buf);
      const Wanted& x = wanted[static_cast<size_t>(i)];
      *x.dst = make_tensor(*buf, 0, t->type, x.ne0, x.ne1);
    }
    if (progress) progress(i + 1, total);
  }
  if (!w.output.valid()) w.output = w.token_embd;  // tied embeddings
  return w;
}

void free_weights(Weights& w, Backend& backend) {
  for (Buffer* b : w.buffers) backend.free(b);
  w.buffers.clear();
}

}  // namespace t9::model
