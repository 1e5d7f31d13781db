#include "model/gated_deltanet.h"

namespace t9::model {
namespace {

// Columns [first, first + n_heads * d) of a [T, C] tensor as a [T, n_heads, d] view.
Tensor head_view(const Tensor& t, int64_t first, int64_t n_heads, int64_t d) {
  Tensor v = t;
  v.offset = t.offset + static_cast<size_t>(first) * 4;
  v.ne = {d, n_heads, t.ne[1], 1};
  v.nb = {4, static_cast<size_t>(d) * 4, t.nb[1], t.nb[1] * static_cast<size_t>(t.ne[1])};
  return v;
}

}  // namespace

void gated_deltanet(Backend& be, const HParams& hp, const ArchSpec& spec, const LayerWeights& L,
                    const ExtraScratch& s, const Tensor& conv_state, const Tensor& delta_state,
                    const Tensor& h, int min_chunked_tokens, const GdnSplit* split,
                    const Tensor& out) {
  const int64_t nk = hp.ssm_n_group, nv = hp.ssm_dt_rank, dk = hp.ssm_d_state;
  const int64_t dv = hp.ssm_d_inner / nv, r = nv / nk;
  // The input projections share h: one call (CUDA rounds h to int8 once).
  if (spec.gdn_fused_ba) {
    const Backend::MatmulOut in[] = {
        {L.ssm_qkv, Tensor{}, s.mixed}, {L.ssm_z, Tensor{}, s.z}, {L.ssm_ba, Tensor{}, s.ba}};
    be.matmul_shared_x(h, in);
  } else {
    const Backend::MatmulOut in[] = {{L.ssm_qkv, Tensor{}, s.mixed},
                                     {L.ssm_z, Tensor{}, s.z},
                                     {L.ssm_beta, Tensor{}, s.bb},
                                     {L.ssm_alpha, Tensor{}, s.aa}};
    be.matmul_shared_x(h, in);
  }
  Tensor b, a;
  if (spec.gdn_fused_ba) {
    // Per key head: b for its r value heads, then a for them ([T, nk, r] views).
    b = head_view(s.ba, 0, nk, r);
    b.nb[1] = static_cast<size_t>(2 * r) * 4;
    a = b;
    a.offset += static_cast<size_t>(r) * 4;
  } else {
    b = head_view(s.bb, 0, 1, nv);
    a = head_view(s.aa, 0, 1, nv);
  }
  const Tensor q = head_view(s.conv, 0, nk, dk);
  const Tensor k = head_view(s.conv, nk * dk, nk, dk);
  const Tensor v = head_view(s.conv, 2 * nk * dk, nv, dv);
  GdnParams p;
  p.n_k_heads = static_cast<int>(nk);
  p.n_v_heads = static_cast<int>(nv);
  p.d_k = static_cast<int>(dk);
  p.d_v = static_cast<int>(dv);
  p.v_heads_tiled = spec.gdn_v_heads_tiled;
  p.min_chunked_tokens = min_chunked_tokens;
  if (split == nullptr) {
    // Conv and delta rule as one call: a backend may run them as one launch.
    Backend::GdnChain c;
    c.mixed = s.mixed, c.conv_w = L.ssm_conv1d, c.conv_state = conv_state, c.conv = s.conv;
    c.q = q, c.k = k, c.v = v, c.a = a, c.b = b, c.A = L.ssm_a, c.dt_bias = L.ssm_dt;
    c.delta_state = delta_state, c.seqs = s.rseqs, c.p = p, c.core = s.core;
    be.gdn_chain(c);
  } else {
    be.ssm_conv(s.mixed, L.ssm_conv1d, conv_state, s.rseqs, s.conv);
    be.gated_delta_net(q, k, v, a, b, L.ssm_a, L.ssm_dt, delta_state, s.rseqs, p, s.core);
    split->at_snapshot();
    be.ssm_conv(s.mixed, L.ssm_conv1d, conv_state, split->tail, s.conv);
    be.gated_delta_net(q, k, v, a, b, L.ssm_a, L.ssm_dt, delta_state, split->tail, p, s.core);
  }
  // The gated RMSNorm per value head (norm(core) * w * silu(z)) in place, then the output
  // projection.
  const Tensor rows = reshape(s.core, dv, nv * s.core.ne[2]);
  be.rms_norm_gated(rows, L.ssm_norm, hp.rms_eps, reshape(s.z, dv, rows.ne[1]), rows);
  be.matmul(L.ssm_out, reshape(s.core, nv * dv, s.core.ne[2]), Tensor{}, out);
}

}  // namespace t9::model
