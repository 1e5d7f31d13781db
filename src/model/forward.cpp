// The shared forward pass: every architecture is this sequence of backend ops, switched by the
// ArchSpec flags (pre-norm attention and GLU MLP blocks, optional biases, head norms and
// gemma-style sandwich norms).
#include <algorithm>
#include <array>
#include <cmath>

#include "model/gated_deltanet.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/scratch.h"

namespace t9::model {
namespace {

// [T, n_heads, d] viewed as [T, n_heads * d] for a matmul.
Tensor flat(const Tensor& t) {
  return reshape(t, t.ne[0] * t.ne[1], t.ne[2]);
}

}  // namespace

void Model::run_layer(int il, int n_tokens, int n_seqs, int max_ctx) {
  (void)n_tokens;
  const LayerWeights& L = w_.layers[static_cast<size_t>(il)];
  Scratch& s = *s_;
  Backend& be = backend_;
  const float eps = hp_.rms_eps, nb = spec_.norm_weight_bias;

  // ---- attention or Gated DeltaNet block ----
  // Later layers get s.h from the previous layer's last residual add (add_rms_norm).
  if (il == 0) be.rms_norm(s.x, L.attn_norm, eps, nb, s.h);
  if (const int ri = rec_index_[static_cast<size_t>(il)]; ri >= 0) {
    GdnSplit split;
    if (!mid_snaps_.empty()) {
      split.tail = gdn_tail_;
      split.at_snapshot = [this, ri] {
        for (const auto& [slot, snap] : mid_snaps_) rs_->snapshot_layer(slot, ri, *snap);
      };
    }
    gated_deltanet(be, hp_, spec_, L, *xs_, rs_->conv(ri), rs_->delta(ri), s.h,
                   cfg_.gdn_min_chunked_tokens, mid_snaps_.empty() ? nullptr : &split, s.o);
  } else {
    run_attention(il, n_seqs, max_ctx);
  }
  if (spec_.sandwich_norms) be.rms_norm(s.o, L.post_attn_norm, eps, nb, s.o);

  // ---- MLP block ----
  // The residual adds are out of place (s.x -> s.x2 here, back to s.x below), so a backend may
  // write the sum from some blocks while others still read the old stream (CUDA's few-row norm
  // writes its codes that way, rms_norm_codes_kernel).
  if (spec_.moe) {  // the pre-norm beside the router's matmuls (one launch on CUDA's decode)
    std::array<Backend::MatmulOut, 2> gates;
    be.add_rms_norm_matmul({s.x, s.o, L.ffn_norm, eps, nb, s.x2, s.h}, moe_gates(L, *xs_, gates));
    moe_ffn(be, hp_, L, *xs_, s.h, s.o);
  } else {
    be.add_rms_norm(s.x, s.o, L.ffn_norm, eps, nb, s.x2, s.h);
    be.matmul_glu(s.h, L.ffn_gate, L.ffn_up, spec_.glu, s.gate, s.up);
    be.matmul(L.ffn_down, s.gate, Tensor{}, s.o);
  }
  if (spec_.sandwich_norms) be.rms_norm(s.o, L.post_ffw_norm, eps, nb, s.o);
  if (il + 1 < hp_.n_layer_main())  // the next layer's pre-norm, fused with the residual add
    be.add_rms_norm(s.x2, s.o, w_.layers[static_cast<size_t>(il) + 1].attn_norm, eps, nb, s.x, s.h);
  else
    be.add(s.x2, s.o, s.x);
}

// Attention over s.h into s.o (before the residual add).
void Model::run_attention(int il, int n_seqs, int max_ctx) {
  const LayerWeights& L = w_.layers[static_cast<size_t>(il)];
  const LayerSpec& ls = spec_.layers[static_cast<size_t>(il)];
  Scratch& s = *s_;
  Backend& be = backend_;
  const float eps = hp_.rms_eps, nb = spec_.norm_weight_bias;
  Tensor gate;    // gated attention: [T, n_head, d] view of the gate halves
  Tensor q_from;  // gated attention: the query halves (qk_norm_rope copies them into s.q)
  const Backend::MatmulOut qkv[] = {{L.wq, L.bq, spec_.gated_attn ? xs_->qg : flat(s.q)},
                                    {L.wk, L.bk, flat(s.k)},
                                    {L.wv, L.bv, flat(s.v)}};
  be.matmul_shared_x(s.h, qkv);
  if (spec_.gated_attn) {
    // attn_q rows hold [query(d), gate(d)] per head: split by strided views.
    Tensor qv = s.q;
    qv.buf = xs_->qg.buf;
    qv.offset = xs_->qg.offset;
    qv.nb[1] = static_cast<size_t>(2 * hp_.head_dim) * 4;
    qv.nb[2] = xs_->qg.nb[1];
    qv.nb[3] = qv.nb[2] * static_cast<size_t>(qv.ne[2]);
    q_from = qv;
    gate = qv;
    gate.offset += static_cast<size_t>(hp_.head_dim) * 4;
  }
  RopeParams rp;
  rp.layout = spec_.rope_layout;
  rp.n_rot = hp_.n_rot;
  rp.freq_base = ls.rope_freq_base;
  rp.freq_scale = ls.rope_freq_scale;
  if (hp_.rope_yarn && ls.rope_freq_scale != 1.0f) {
    rp.ext_factor = 1.0f;
    rp.attn_factor = hp_.rope_attn_factor;
    rp.beta_fast = hp_.yarn_beta_fast;
    rp.beta_slow = hp_.yarn_beta_slow;
    rp.n_ctx_orig = hp_.rope_n_ctx_orig;
  }
  AttnParams ap;
  ap.n_head = hp_.n_head;
  ap.n_kv_head = hp_.n_head_kv;
  ap.head_dim = hp_.head_dim;
  ap.block_size = cfg_.kv_block_size;
  ap.n_seqs = n_seqs;
  ap.max_ctx = max_ctx;
  ap.scale = spec_.attn_scale > 0.0f ? spec_.attn_scale
                                     : 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  ap.softcap = hp_.attn_softcap;
  ap.sliding_window = ls.sliding_window;
  // QK-norm (when the architecture has it), RoPE of q and k, this step's K/V rows into the pool
  // and the attention: one op (on CUDA one launch for decode rows, two otherwise).
  Backend::RopeAttention ra;
  ra.q = s.q;
  ra.k = s.k;
  ra.q_norm = spec_.qk_norm ? L.q_norm : Tensor{};
  ra.k_norm = spec_.qk_norm ? L.k_norm : Tensor{};
  ra.positions = s.pos;
  ra.eps = eps;
  ra.weight_bias = nb;
  ra.rope = rp;
  ra.kv = {s.v, kv_.k(ls.kv_layer), kv_.v(ls.kv_layer), s.seqs, s.tables, ap};
  ra.q_from = q_from.valid() ? &q_from : nullptr;
  ra.gate = gate.valid() ? &gate : nullptr;
  ra.out = s.attn;
  be.rope_attention(ra);
  be.matmul(L.wo, flat(s.attn), Tensor{}, s.o);
}

// The edits and pending tokens of logit rows [first, first + n) on lg (whose row 0 is `first`):
// uploaded padded to powers of two (>= 64 edits, >= 8 pending, rows -1), so that decode steps
// keep their copy sizes and replay as graphs while the edit count grows.
Status Model::apply_edits(const Batch& b, int first, int n, const Tensor& lg, Tensor* raw) {
  auto by_row = [](const auto& e, int r) { return e.row < r; };
  const auto* lo = std::lower_bound(b.edits.data(), b.edits.data() + b.edits.size(), first, by_row);
  const auto* hi = std::lower_bound(lo, b.edits.data() + b.edits.size(), first + n, by_row);
  const auto* plo =
      std::lower_bound(b.pending.data(), b.pending.data() + b.pending.size(), first, by_row);
  const auto* phi = std::lower_bound(plo, b.pending.data() + b.pending.size(), first + n, by_row);
  if (lo == hi && plo == phi) return {};
  Scratch& s = *s_;
  if (raw != nullptr) {  // the rows before the edits, for their logprobs
    if (s.raw_buf == nullptr) {
      const size_t bytes = static_cast<size_t>(cfg_.max_logit_rows_per_call) *
                           static_cast<size_t>(hp_.n_vocab) * sizeof(float);
      T9_ASSIGN_OR_RETURN(s.raw_buf, backend_.alloc(bytes));
    }
    *raw = make_tensor(s.raw_buf, 0, GgmlType::F32, lg.ne[0], lg.ne[1]);
    backend_.copy(lg, *raw);
  }
  auto padded = [](size_t count, size_t at_least) {
    while (at_least < count) at_least *= 2;
    return at_least;
  };
  const size_t cap = padded(static_cast<size_t>(hi - lo), 64);
  const size_t cap_p = plo == phi ? 0 : padded(static_cast<size_t>(phi - plo), 8);
  edit_staging_.assign(lo, hi);
  for (LogitEdit& e : edit_staging_) e.row -= first;
  edit_staging_.resize(cap);  // default LogitEdit: row -1, padding
  pending_staging_.assign(plo, phi);
  for (PendingEdit& p : pending_staging_) p.row -= first;
  pending_staging_.resize(cap_p);
  const size_t edit_bytes = cap * sizeof(LogitEdit),
               bytes = edit_bytes + cap_p * sizeof(PendingEdit);
  if (s.edit_buf == nullptr || s.edit_bytes < bytes) {
    if (s.edit_buf != nullptr) backend_.free(s.edit_buf);
    s.edit_buf = nullptr;
    T9_ASSIGN_OR_RETURN(s.edit_buf, backend_.alloc(bytes));
    s.edit_bytes = bytes;
  }
  backend_.upload(s.edit_buf, 0, edit_staging_.data(), edit_bytes);
  Tensor pending;
  if (cap_p > 0) {
    backend_.upload(s.edit_buf, edit_bytes, pending_staging_.data(), cap_p * sizeof(PendingEdit));
    pending = make_tensor(s.edit_buf, edit_bytes, GgmlType::I32, 4, static_cast<int64_t>(cap_p));
  }
  backend_.adjust_logits(lg,
                         make_tensor(s.edit_buf, 0, GgmlType::I32, 8, static_cast<int64_t>(cap)),
                         pending, cap_p > 0 ? s.ids : Tensor{});
  return {};
}

Result<Logits> Model::compute_logits(const Batch& b, int* check_slot) {
  *check_slot = -1;
  std::vector<int32_t> rows;  // token rows of the batch whose logits are wanted, in order
  for (const SeqInput& q : b.seqs) {
    if (q.logits == LogitRows::kLast) rows.push_back(q.first_token + q.n_tokens - 1);
    if (q.logits == LogitRows::kAll)
      for (int j = 0; j < q.n_tokens; ++j) rows.push_back(q.first_token + j);
  }
  Logits out;
  out.n_rows = static_cast<int>(rows.size());
  out.n_vocab = hp_.n_vocab;
  const bool decided = b.argmax_only || !b.sampling.empty();
  T9_CHECK(b.sampling.empty() || b.sampling.size() == rows.size(),
           "forward: {} sampling rows for {} logit rows", b.sampling.size(), rows.size());
  const size_t row_floats = static_cast<size_t>(hp_.n_vocab);
  if (decided)
    out.tokens.resize(rows.size());
  else
    out.data.resize(rows.size() * row_floats);
  const int k = b.n_top_logprobs;  // >= 0: the sampled rows' logprobs too
  T9_CHECK(k < 0 || (!b.sampling.empty() && k <= kMaxTopLogprobs && k <= hp_.n_vocab),
           "forward: {} top logprobs without sampling, or past the limit", k);
  if (k >= 0) {
    out.n_top = k;
    out.logprobs.resize(rows.size() * static_cast<size_t>(1 + k));
    out.top_ids.resize(rows.size() * static_cast<size_t>(k));
  }
  Scratch& s = *s_;
  const int R = cfg_.max_logit_rows_per_call;
  for (int first = 0; first < out.n_rows; first += R) {
    const int n = std::min(R, out.n_rows - first);
    backend_.upload(s.logit_buf, s.row_ids.offset, rows.data() + first, n * sizeof(int32_t));
    const Tensor ids = make_tensor(s.logit_buf, s.row_ids.offset, GgmlType::I32, n);
    const Tensor sel = view_rows(s.sel, 0, n), lg = view_rows(s.logits, 0, n);
    backend_.get_rows(s.x, ids, sel);
    backend_.rms_norm(sel, w_.output_norm, hp_.rms_eps, spec_.norm_weight_bias, sel);
    backend_.matmul(w_.output, sel, Tensor{}, lg);
    if (hp_.final_softcap > 0.0f) backend_.softcap(lg, hp_.final_softcap, lg);
    if (!decided) {
      backend_.download(s.logit_buf, lg.offset, out.data.data() + first * row_floats,
                        static_cast<size_t>(n) * row_floats * sizeof(float));
      continue;
    }
    const Tensor tok = make_tensor(s.logit_buf, s.row_max.offset, GgmlType::I32, n);
    if (b.argmax_only) {
      backend_.argmax(lg, tok);
    } else {
      Tensor raw = lg;  // logprobs are of the rows before the edits (a copy when there are some)
      T9_TRY(apply_edits(b, first, n, lg, k >= 0 ? &raw : nullptr));
      backend_.upload(s.logit_buf, s.row_params.offset, b.sampling.data() + first,
                      static_cast<size_t>(n) * sizeof(RowSampling));
      backend_.sample(lg, make_tensor(s.logit_buf, s.row_params.offset, GgmlType::I32, 6, n), tok);
      if (k >= 0) {
        const Tensor lp = make_tensor(s.logit_buf, s.row_logprobs.offset, GgmlType::F32, 1 + k, n);
        const Tensor ids =
            k > 0 ? make_tensor(s.logit_buf, s.row_top_ids.offset, GgmlType::I32, k, n) : Tensor{};
        backend_.logprobs(raw, tok, k, lp, ids);
        backend_.download(s.logit_buf, lp.offset, out.logprobs.data() + first * (1 + k),
                          static_cast<size_t>(n) * (1 + k) * sizeof(float));
        if (k > 0)
          backend_.download(s.logit_buf, ids.offset, out.top_ids.data() + first * k,
                            static_cast<size_t>(n) * k * sizeof(int32_t));
      }
    }
    backend_.download(s.logit_buf, s.row_max.offset, out.tokens.data() + first,
                      static_cast<size_t>(n) * sizeof(int32_t));
    // Rows the backend may leave undecided (-1) or the check may refuse need their logits: wait
    // for the tokens here. When every row settles on the backend (Backend::settles) and none is
    // checked, the step is not waited for here, so a pipelined step can be recorded behind it.
    if ((b.sampling.empty() || settles(b)) && !b.accepts) continue;
    if (b.check_at_wait) {  // the check in wait(): keep the rows in a slot until then
      if (*check_slot < 0) {
        *check_slot = next_check_slot_;
        next_check_slot_ ^= 1;
        const size_t need = rows.size() * row_floats * sizeof(float);
        Buffer*& buf = check_buf_[*check_slot];
        if (check_cap_[*check_slot] < need) {
          if (buf != nullptr) backend_.free(buf);
          buf = nullptr;
          T9_ASSIGN_OR_RETURN(buf, backend_.alloc(need));
          check_cap_[*check_slot] = need;
        }
      }
      backend_.copy(lg, make_tensor(check_buf_[*check_slot], first * row_floats * sizeof(float),
                                    GgmlType::F32, hp_.n_vocab, n));
      continue;
    }
    backend_.sync();  // the tokens are on the host: a row the backend left (-1) needs its logits
    auto* t = out.tokens.data() + first;
    if (b.accepts)
      for (int r = 0; r < n; ++r)
        if (t[r] >= 0 && !b.accepts(first + r, t[r])) t[r] = -1;
    // Only those rows' logits come back (a vocabulary row is ~1 MB on a 248k-entry vocabulary).
    for (int r = 0; r < n; ++r) {
      if (t[r] != -1) continue;
      if (out.data.empty()) out.data.resize(rows.size() * row_floats);
      backend_.download(s.logit_buf,
                        lg.offset + static_cast<size_t>(r) * row_floats * sizeof(float),
                        out.data.data() + (first + r) * row_floats, row_floats * sizeof(float));
    }
  }
  return out;
}

}  // namespace t9::model
