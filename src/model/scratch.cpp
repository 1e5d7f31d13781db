#include "model/scratch.h"

#include <algorithm>

namespace t9::model {
namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Lays out slots back to back; each slot is sized for `cap_rows` rows but the returned tensor
// has `rows` rows, so offsets depend only on capacities. With buf == nullptr it only measures.
struct Layout {
  Buffer* buf;
  size_t offset = 0;
  Tensor take(GgmlType type, int64_t ne0, int64_t ne1, int64_t cap_rows, int64_t rows) {
    const size_t slot = row_bytes(type, ne0) * static_cast<size_t>(ne1 * cap_rows);
    Tensor t = make_tensor(nullptr, offset, type, ne0, ne1, rows);
    t.buf = buf;
    offset += align_up(slot);
    return t;
  }
};

}  // namespace

size_t Model::Scratch::shape(int n_tokens, int n_seqs, int n_block_ids) {
  const int64_t T = n_tokens, E = hp->n_embd, d = hp->head_dim, Tc = cap_tokens;
  Layout l{buf};
  ids = l.take(GgmlType::I32, 1, 1, Tc, T);
  ids = make_tensor(nullptr, ids.offset, GgmlType::I32, T);
  ids.buf = buf;
  pos = l.take(GgmlType::I32, 1, 1, Tc, T);
  pos = make_tensor(nullptr, pos.offset, GgmlType::I32, T);
  pos.buf = buf;
  seqs = l.take(GgmlType::I32, 4, 1, cap_seqs, n_seqs);
  seqs = make_tensor(nullptr, seqs.offset, GgmlType::I32, 4, n_seqs);
  seqs.buf = buf;
  tables = l.take(GgmlType::I32, 1, 1, cap_block_ids, n_block_ids);
  tables = make_tensor(nullptr, tables.offset, GgmlType::I32, n_block_ids);
  tables.buf = buf;
  x = reshape_rows(l.take(GgmlType::F32, E, 1, Tc, T));
  x2 = reshape_rows(l.take(GgmlType::F32, E, 1, Tc, T));
  h = reshape_rows(l.take(GgmlType::F32, E, 1, Tc, T));
  q = l.take(GgmlType::F32, d, hp->n_head, Tc, T);
  k = l.take(GgmlType::F32, d, hp->n_head_kv, Tc, T);
  v = l.take(GgmlType::F32, d, hp->n_head_kv, Tc, T);
  attn = l.take(GgmlType::F32, d, hp->n_head, Tc, T);
  o = reshape_rows(l.take(GgmlType::F32, E, 1, Tc, T));
  gate = reshape_rows(l.take(GgmlType::F32, hp->n_ff, 1, Tc, T));
  up = reshape_rows(l.take(GgmlType::F32, hp->n_ff, 1, Tc, T));
  if (buf) T9_CHECK(l.offset <= buf->n_bytes, "scratch layout exceeds its buffer");
  return l.offset;
}

// [rows, 1, ne0] -> [rows, ne0] (2-D, as matmul and rms_norm expect).
Tensor Model::Scratch::reshape_rows(const Tensor& t) {
  Tensor r = make_tensor(nullptr, t.offset, t.type, t.ne[0], t.ne[2]);
  r.buf = t.buf;
  return r;
}

Status Model::Scratch::reserve(Backend& be, const HParams& hp_in, const ModelConfig& cfg,
                               int n_tokens, int n_seqs, int n_block_ids) {
  hp = &hp_in;
  if (!logit_buf) {
    const int64_t R = cfg.max_logit_rows_per_call;
    Layout l{nullptr};
    l.take(GgmlType::I32, R, 1, 1, 1);
    l.take(GgmlType::I32, R, 1, 1, 1);
    l.take(GgmlType::I32, 6 * R, 1, 1, 1);
    l.take(GgmlType::F32, (1 + kMaxTopLogprobs) * R, 1, 1, 1);
    l.take(GgmlType::I32, kMaxTopLogprobs * R, 1, 1, 1);
    l.take(GgmlType::F32, hp->n_embd, 1, R, R);
    l.take(GgmlType::F32, hp->n_vocab, 1, R, R);
    T9_ASSIGN_OR_RETURN(logit_buf, be.alloc(l.offset));
    Layout m{logit_buf};
    row_ids = m.take(GgmlType::I32, R, 1, 1, 1);
    row_ids = make_tensor(logit_buf, row_ids.offset, GgmlType::I32, R);
    row_max = m.take(GgmlType::I32, R, 1, 1, 1);
    row_max = make_tensor(logit_buf, row_max.offset, GgmlType::I32, R);
    row_params = m.take(GgmlType::I32, 6 * R, 1, 1, 1);
    row_params = make_tensor(logit_buf, row_params.offset, GgmlType::I32, 6, R);
    row_logprobs = m.take(GgmlType::F32, (1 + kMaxTopLogprobs) * R, 1, 1, 1);
    row_top_ids = m.take(GgmlType::I32, kMaxTopLogprobs * R, 1, 1, 1);
    sel = reshape_rows(m.take(GgmlType::F32, hp->n_embd, 1, R, R));
    logits = reshape_rows(m.take(GgmlType::F32, hp->n_vocab, 1, R, R));
  }
  if (buf && n_tokens <= cap_tokens && n_seqs <= cap_seqs && n_block_ids <= cap_block_ids)
    return {};
  // Grow with headroom so that a run of slightly larger batches does not reallocate each time.
  const int old_tokens = cap_tokens, old_seqs = cap_seqs, old_ids = cap_block_ids;
  cap_tokens = std::max(n_tokens, cap_tokens + cap_tokens / 2);
  cap_seqs = std::max({n_seqs, cap_seqs * 2, 16});
  cap_block_ids = std::max({n_block_ids, cap_block_ids * 2, 256});
  Buffer* old = buf;
  buf = nullptr;
  const size_t n_bytes = shape(1, 1, 1);
  auto nb = be.alloc(n_bytes);
  if (!nb.ok()) {
    buf = old;
    cap_tokens = old_tokens;
    cap_seqs = old_seqs;
    cap_block_ids = old_ids;
    return error("scratch for {} tokens: {}", n_tokens, nb.message());
  }
  if (old) be.free(old);
  buf = *nb;
  return {};
}

void Model::Scratch::release(Backend& be) {
  if (buf) be.free(buf);
  if (logit_buf) be.free(logit_buf);
  if (edit_buf) be.free(edit_buf);
  if (raw_buf) be.free(raw_buf);
  buf = logit_buf = edit_buf = raw_buf = nullptr;
  edit_bytes = 0;
}

}  // namespace t9::model
