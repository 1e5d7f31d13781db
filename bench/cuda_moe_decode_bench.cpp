// Where a one-token MoE layer's time goes (issue 9's single stream): Qwen3.5-35B-A3B's MoE
// block at one token (hidden 2048, 256 experts of FFN 512, top 8 normalized, a shared expert of
// FFN 512; Q8_0 weights, an F32 router), each piece timed as a CUDA graph replay of N calls (the
// setting a decode step runs them in: dependent launches, no host in between), beside a dense
// one-row GEMV of the same bytes. The trace puts the experts' gate/up at 13-14 us of chain for
// ~20 MB (run 272) and the down projection of as many bytes at 7-8: this separates the route,
// the by-pair GEMV and the bytes.
//
// Every call reads another row of a ring of R random router logits (so each call routes to other
// experts: the 256 experts' 570 MB of gate/up do not fit L2, as a layer's do not in a step), or
// another set of ids for the by-ids case, and another of four copies of the dense matrix.
//
//   cuda_moe_decode_bench [N [CASE]]   # N calls per window (default 40: a step's MoE layers);
//                                      # CASE: only cases whose name contains it
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/check.h"
#include "cuda_bench_util.h"

namespace {

using t9::Buffer;
using t9::GgmlType;
using t9::Tensor;
using t9::bench::must;

constexpr int64_t kHidden = 2048, kExperts = 256, kTopK = 8, kFfn = 512, kRing = 64;

// Bytes of one Q8_0 row of n inputs (34 bytes a 32-block).
int64_t q8_row(int64_t n) {
  return n / 32 * 34;
}

struct Bench {
  t9::CudaBackend be;
  std::mt19937_64 rng{11};
  std::vector<Buffer*> bufs;
  ~Bench() {
    for (Buffer* b : bufs) be.free(b);
  }
  // Random Q8_0 weights (small finite f16 scales), uploaded once.
  Buffer* q8(int64_t bytes) {
    std::vector<uint8_t> h(static_cast<size_t>(bytes));
    for (auto& x : h) x = static_cast<uint8_t>(rng());
    for (size_t b = 0; b + 34 <= h.size(); b += 34) h[b + 1] = 0x1C;
    bufs.push_back(must(be.upload_weights(h.data(), h.size())));
    return bufs.back();
  }
  // F32 values in [-1, 1] (weights when `weights`, else a device buffer).
  Buffer* f32(int64_t n, bool weights = false) {
    std::vector<float> h(static_cast<size_t>(n));
    for (auto& v : h) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
    if (weights) {
      bufs.push_back(must(be.upload_weights(h.data(), h.size() * 4)));
    } else {
      bufs.push_back(must(be.alloc(h.size() * 4)));
      be.upload(bufs.back(), 0, h.data(), h.size() * 4);
    }
    return bufs.back();
  }
  Buffer* zeros(int64_t bytes) {
    bufs.push_back(must(be.alloc(static_cast<size_t>(bytes))));
    std::vector<uint8_t> h(static_cast<size_t>(bytes));
    be.upload(bufs.back(), 0, h.data(), h.size());
    return bufs.back();
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace t9;
  const int n = argc > 1 ? std::atoi(argv[1]) : 40;
  const std::string only = argc > 2 ? argv[2] : "";
  Bench b;
  Backend& be = b.be;
  std::printf("device: %s, %d calls a window (graph replay)\n", be.name().c_str(), n);

  const int64_t expert_bytes = kFfn * q8_row(kHidden);  // one expert's gate (or up): 1.1 MB
  Buffer* gate = b.q8(kExperts * expert_bytes);
  Buffer* up = b.q8(kExperts * expert_bytes);
  Buffer* down = b.q8(kExperts * kHidden * q8_row(kFfn));
  constexpr int kCopies = 4;  // of the shared expert and the dense matrix: 4 x their bytes > L2
  std::vector<Buffer*> sg, su, sd, dense;
  for (int c = 0; c < kCopies; ++c) {
    sg.push_back(b.q8(expert_bytes));
    su.push_back(b.q8(expert_bytes));
    sd.push_back(b.q8(kHidden * q8_row(kFfn)));
    // The gate/up launch's bytes as one matrix: 8 experts' gate and up and the shared pair.
    dense.push_back(b.q8((2 * kTopK + 2) * expert_bytes));
  }
  Buffer* sgate_w = b.f32(kHidden, true);
  Buffer* logits = b.f32(kRing * kExperts);
  Buffer* x = b.f32(kHidden);
  // Ids for the by-ids case: kTopK distinct experts per ring row.
  std::vector<int32_t> id(kRing * kTopK), perm(kExperts);
  for (int64_t r = 0; r < kRing; ++r) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), b.rng);
    std::copy_n(perm.begin(), kTopK, id.begin() + r * kTopK);
  }
  b.bufs.push_back(must(be.alloc(id.size() * 4)));
  Buffer* ring_ids = b.bufs.back();
  be.upload(ring_ids, 0, id.data(), id.size() * 4);
  Buffer* ids = b.zeros(kTopK * 4);
  Buffer* wts = b.zeros(kTopK * 4);
  Buffer* eg = b.zeros(kTopK * kFfn * 4);
  Buffer* eu = b.zeros(kTopK * kFfn * 4);
  Buffer* ed = b.zeros(kTopK * kHidden * 4);
  Buffer* sgo = b.zeros(kFfn * 4);
  Buffer* suo = b.zeros(kFfn * 4);
  Buffer* so = b.zeros(kHidden * 4);
  Buffer* sgate = b.zeros(4);
  Buffer* out = b.zeros(kHidden * 4);
  Buffer* dense_y = b.zeros((2 * kTopK + 2) * kFfn * 4);

  const Tensor xt = make_tensor(x, 0, GgmlType::F32, kHidden, 1);
  const auto logits_at = [&](int i) {
    return make_tensor(logits, static_cast<size_t>(i % kRing) * kExperts * 4, GgmlType::F32,
                       kExperts, 1);
  };
  const auto ids_t = [&](Buffer* buf, int i) {
    return make_tensor(buf, static_cast<size_t>(i % kRing) * kTopK * 4, GgmlType::I32, kTopK, 1);
  };
  const Tensor idt = ids_t(ids, 0), wt = make_tensor(wts, 0, GgmlType::F32, kTopK, 1);
  const auto experts = [&](Buffer* w) {
    return make_tensor(w, 0, GgmlType::Q8_0, kHidden, kFfn, kExperts);
  };
  const Tensor egt = make_tensor(eg, 0, GgmlType::F32, kFfn, kTopK, 1);
  const Tensor eut = make_tensor(eu, 0, GgmlType::F32, kFfn, kTopK, 1);
  // The experts' gate and up by the ids in `which`, and the shared expert's copy i % kCopies.
  const auto gate_up = [&](const Tensor& which, int i) {
    const int c = i % kCopies;
    return std::vector<Backend::MatmulOut>{{experts(gate), Tensor{}, egt, which},
                                           {experts(up), Tensor{}, eut, which},
                                           {make_tensor(sg[c], 0, GgmlType::Q8_0, kHidden, kFfn),
                                            Tensor{}, make_tensor(sgo, 0, GgmlType::F32, kFfn, 1)},
                                           {make_tensor(su[c], 0, GgmlType::Q8_0, kHidden, kFfn),
                                            Tensor{}, make_tensor(suo, 0, GgmlType::F32, kFfn, 1)}};
  };
  const auto route = [&](int i) {
    return Backend::MoeRoute{logits_at(i), static_cast<int>(kTopK), true, idt, wt};
  };
  const auto moe_down = [&](int i) {
    be.moe_down({.down_exps = make_tensor(down, 0, GgmlType::Q8_0, kFfn, kHidden, kExperts),
                 .eg = egt,
                 .eu = eut,
                 .ids = idt,
                 .wts = wt,
                 .ed = make_tensor(ed, 0, GgmlType::F32, kHidden, kTopK, 1),
                 .out = make_tensor(out, 0, GgmlType::F32, kHidden, 1),
                 .down_shexp = make_tensor(sd[i % kCopies], 0, GgmlType::Q8_0, kFfn, kHidden),
                 .sg = make_tensor(sgo, 0, GgmlType::F32, kFfn, 1),
                 .su = make_tensor(suo, 0, GgmlType::F32, kFfn, 1),
                 .so = make_tensor(so, 0, GgmlType::F32, kHidden, 1),
                 .sgate = make_tensor(sgate, 0, GgmlType::F32, 1, 1)});
  };

  struct Case {
    const char* name;
    double mbytes;  // weight bytes a call reads, MB
    std::function<void(int)> call;
  };
  const double gu_mb = (2.0 * kTopK + 2) * expert_bytes / 1e6;
  const double down_mb = (kTopK + 1.0) * kHidden * q8_row(kFfn) / 1e6;
  const std::vector<Case> cases = {
      {"route (moe_route)", 0.0, [&](int i) { be.moe_route(logits_at(i), kTopK, true, idt, wt); }},
      {"gate/up by ids (matmul_shared_x)", gu_mb,
       [&](int i) {
         const auto outs = gate_up(ids_t(ring_ids, i), i);
         be.matmul_shared_x(xt, outs);
       }},
      {"route + gate/up (moe_route_matmul)", gu_mb,
       [&](int i) {
         const auto outs = gate_up(idt, i);
         be.moe_route_matmul(route(i), xt, outs);
       }},
      {"route + gate/up + down", gu_mb + down_mb,
       [&](int i) {
         const auto outs = gate_up(idt, i);
         be.moe_route_matmul(route(i), xt, outs);
         moe_down(i);
       }},
      {"dense 2048 -> 9216 (gate/up's bytes)", gu_mb,
       [&](int i) {
         be.matmul(
             make_tensor(dense[i % kCopies], 0, GgmlType::Q8_0, kHidden, (2 * kTopK + 2) * kFfn),
             xt, Tensor{}, make_tensor(dense_y, 0, GgmlType::F32, (2 * kTopK + 2) * kFfn, 1));
       }},
      {"shared gate F32 2048 -> 1 (matmul)", 0.0,
       [&](int i) {
         (void)i;
         be.matmul(make_tensor(sgate_w, 0, GgmlType::F32, kHidden, 1), xt, Tensor{},
                   make_tensor(sgate, 0, GgmlType::F32, 1, 1));
       }},
  };
  std::printf("%-40s %10s %10s\n", "case", "us/call", "GB/s");
  for (const Case& c : cases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    const double sec = bench::seconds_per_replayed_call(be, n, c.call);
    std::printf("%-40s %10.2f %10.0f\n", c.name, sec * 1e6,
                c.mbytes > 0 ? c.mbytes / sec / 1e3 : 0.0);
  }
  return 0;
}
