#include "model/moe.h"

namespace t9::model {

void moe_ffn(Backend& be, const HParams& hp, const LayerWeights& L, const ExtraScratch& s,
             const Tensor& h, const Tensor& out) {
  const bool shared = L.ffn_gate_shexp.valid();
  // The router beside the shared expert's one-output gate (both usually F32: one CUDA launch).
  const Backend::MatmulOut gates[] = {{L.ffn_gate_inp, Tensor{}, s.router},
                                      {L.ffn_gate_inp_shexp, Tensor{}, s.sgate}};
  be.matmul_shared_x(h, std::span(gates, shared ? 2 : 1));
  be.moe_route(s.router, hp.n_expert_used, hp.expert_weights_norm, s.ids, s.wts);
  // Every other matmul of h in one call (CUDA rounds h to int8 once for all of them).
  const Backend::MatmulOut of_h[] = {{L.ffn_gate_exps, Tensor{}, s.eg, s.ids},
                                     {L.ffn_up_exps, Tensor{}, s.eu, s.ids},
                                     {L.ffn_gate_shexp, Tensor{}, s.sg},
                                     {L.ffn_up_shexp, Tensor{}, s.su}};
  be.matmul_shared_x(h, std::span(of_h, shared ? 4 : 2));
  be.glu(s.eg, s.eu, GluKind::kSwiGLU, s.eg);
  be.matmul_id(L.ffn_down_exps, s.eg, s.ids, s.ed);
  if (!shared) return be.moe_combine(s.ed, s.wts, out);
  be.glu(s.sg, s.su, GluKind::kSwiGLU, s.sg);
  be.matmul(L.ffn_down_shexp, s.sg, Tensor{}, s.so);
  // out = routed sum + so * sigmoid(sgate) (one pass on CUDA; same bits as the three ops).
  be.moe_combine_shared(s.ed, s.wts, s.so, s.sgate, out);
}

}  // namespace t9::model
