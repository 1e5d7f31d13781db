#include "model/extra_scratch.h"

#include <algorithm>

namespace t9::model {
namespace {

constexpr size_t kAlign = 64;

// Back-to-back slots sized for the capacities; tensors shaped for the actual counts.
struct Slots {
  Buffer* buf;
  size_t offset = 0;
  // [rows, ne0] when ne1 == 1, else [rows, ne1, ne0].
  Tensor take(GgmlType type, int64_t ne0, int64_t ne1, int64_t cap_rows, int64_t rows) {
    const size_t n = row_bytes(type, ne0) * static_cast<size_t>(ne1 * cap_rows);
    Tensor t = ne1 == 1 ? make_tensor(nullptr, offset, type, ne0, rows)
                        : make_tensor(nullptr, offset, type, ne0, ne1, rows);
    t.buf = buf;
    offset += (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign;
    return t;
  }
};

}  // namespace

size_t ExtraScratch::layout(const HParams& hp, const ArchSpec& spec, int n_tokens, int n_seqs) {
  const int64_t T = n_tokens, Tc = cap_tokens, E = hp.n_embd;
  Slots s{buf};
  rseqs = s.take(GgmlType::I32, 4, 1, cap_seqs, n_seqs);
  rseqs_tail = s.take(GgmlType::I32, 4, 1, cap_seqs, n_seqs);
  if (spec.gated_attn) qg = s.take(GgmlType::F32, 2 * hp.n_head * hp.head_dim, 1, Tc, T);
  if (hp.full_attn_interval > 0) {
    const int64_t nk = hp.ssm_n_group, nv = hp.ssm_dt_rank, dk = hp.ssm_d_state;
    const int64_t vd = hp.ssm_d_inner, Cd = 2 * nk * dk + vd;
    mixed = s.take(GgmlType::F32, Cd, 1, Tc, T);
    conv = s.take(GgmlType::F32, Cd, 1, Tc, T);
    z = s.take(GgmlType::F32, vd, 1, Tc, T);
    ba = s.take(GgmlType::F32, 2 * nv, 1, Tc, T);
    bb = s.take(GgmlType::F32, nv, 1, Tc, T);
    aa = s.take(GgmlType::F32, nv, 1, Tc, T);
    core = s.take(GgmlType::F32, vd / nv, nv, Tc, T);
  }
  if (spec.moe) {
    const int64_t X = hp.n_expert, k = hp.n_expert_used;
    router = s.take(GgmlType::F32, X, 1, Tc, T);
    ids = s.take(GgmlType::I32, k, 1, Tc, T);
    wts = s.take(GgmlType::F32, k, 1, Tc, T);
    eg = s.take(GgmlType::F32, hp.n_ff_exp, k, Tc, T);
    eu = s.take(GgmlType::F32, hp.n_ff_exp, k, Tc, T);
    ed = s.take(GgmlType::F32, E, k, Tc, T);
    if (hp.n_ff_shexp > 0) {
      sg = s.take(GgmlType::F32, hp.n_ff_shexp, 1, Tc, T);
      su = s.take(GgmlType::F32, hp.n_ff_shexp, 1, Tc, T);
      so = s.take(GgmlType::F32, E, 1, Tc, T);
      sgate = s.take(GgmlType::F32, 1, 1, Tc, T);
    }
  }
  return s.offset;
}

Status ExtraScratch::reserve(Backend& be, const HParams& hp, const ArchSpec& spec, int n_tokens,
                             int n_seqs) {
  if (!buf || n_tokens > cap_tokens || n_seqs > cap_seqs) {
    const int old_t = cap_tokens, old_s = cap_seqs;
    cap_tokens = std::max(n_tokens, cap_tokens + cap_tokens / 2);
    cap_seqs = std::max({n_seqs, cap_seqs * 2, 16});
    Buffer* old = buf;
    buf = nullptr;
    auto nb = be.alloc(layout(hp, spec, 1, 1));
    if (!nb.ok()) {
      buf = old;
      cap_tokens = old_t;
      cap_seqs = old_s;
      return error("scratch for {} tokens: {}", n_tokens, nb.message());
    }
    if (old) be.free(old);
    buf = *nb;
  }
  layout(hp, spec, n_tokens, n_seqs);
  return {};
}

void ExtraScratch::release(Backend& be) {
  if (buf) be.free(buf);
  buf = nullptr;
}

}  // namespace t9::model
