#include "model/moe.h"

namespace t9::model {

std::span<const Backend::MatmulOut> moe_gates(const LayerWeights& L, const ExtraScratch& s,
                                              std::array<Backend::MatmulOut, 2>& outs) {
  // The router beside the shared expert's one-output gate (both usually F32: one CUDA launch).
  outs[0] = {L.ffn_gate_inp, Tensor{}, s.router};
  outs[1] = {L.ffn_gate_inp_shexp, Tensor{}, s.sgate};
  return std::span<const Backend::MatmulOut>(outs.data(), L.ffn_gate_shexp.valid() ? 2 : 1);
}

void moe_ffn(Backend& be, const HParams& hp, const LayerWeights& L, const ExtraScratch& s,
             const Tensor& h, const Tensor& out) {
  const bool shared = L.ffn_gate_shexp.valid();
  // The routing, then every other matmul of h in one call (CUDA rounds h to int8 once for all of
  // them, and routes a decode step's tokens inside the experts' launch).
  const Backend::MatmulOut of_h[] = {{L.ffn_gate_exps, Tensor{}, s.eg, s.ids},
                                     {L.ffn_up_exps, Tensor{}, s.eu, s.ids},
                                     {L.ffn_gate_shexp, Tensor{}, s.sg},
                                     {L.ffn_up_shexp, Tensor{}, s.su}};
  be.moe_route_matmul({s.router, hp.n_expert_used, hp.expert_weights_norm, s.ids, s.wts}, h,
                      std::span(of_h, shared ? 4 : 2));
  be.moe_down({.down_exps = L.ffn_down_exps,
               .eg = s.eg,
               .eu = s.eu,
               .ids = s.ids,
               .wts = s.wts,
               .ed = s.ed,
               .out = out,
               .down_shexp = shared ? L.ffn_down_shexp : Tensor{},
               .sg = s.sg,
               .su = s.su,
               .so = s.so,
               .sgate = s.sgate});
}

}  // namespace t9::model
