// The small ops of a decode step, each repeated N times in one window and timed as a CUDA graph
// replay (seconds_per_replayed_call): µs per call in the setting a decode step runs them, to read
// beside the launch floor of dev/kernels/cuda_chain_floor.cu (0.4-1.1 µs per launch for kernels
// of these shapes on the H200, runs 118-119). A call that sits far above its launches' floor
// spends its time in its own prologue, serial chains or epilogue (docs/CUDA.md, stage 20).
// Consecutive calls read what the previous one wrote (two buffers in turn), so the chain is
// dependent like a step's. Shapes: Qwen3-8B (rows of 4096, FFN 12288) and Qwen3.5-35B-A3B
// (rows of 2048, 256 experts' router). Built by scripts/device_test_ops.sh.
//
//   cuda_op_chain_bench [N [CASE]]   # N calls per window (default 200); CASE: only the cases
//                                    # whose name contains it
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/check.h"
#include "cuda_bench_util.h"
#include "quant/types.h"

namespace {

using t9::Buffer;
using t9::GgmlType;
using t9::Tensor;
using t9::bench::must;

// Float tensors of one backend, filled with values in [-1, 1].
struct Floats {
  explicit Floats(t9::CudaBackend& b) : be(b) {}
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  t9::CudaBackend& be;
  std::mt19937_64 rng{7};
  std::vector<Buffer*> bufs;
  // weights: through upload_weights, as a model's norm weights (kernels may read them early).
  Tensor make(int64_t ne0, int64_t ne1 = 1, bool weights = false) {
    std::vector<float> h(static_cast<size_t>(ne0 * ne1));
    for (auto& v : h) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
    if (weights) {
      bufs.push_back(must(be.upload_weights(h.data(), h.size() * 4)));
    } else {
      bufs.push_back(must(be.alloc(h.size() * 4)));
      be.upload(bufs.back(), 0, h.data(), h.size() * 4);
    }
    return t9::make_tensor(bufs.back(), 0, GgmlType::F32, ne0, ne1);
  }
  Tensor weights(GgmlType t, int64_t n_in, int64_t n_out) {
    std::vector<uint8_t> h(t9::row_bytes(t, n_in) * static_cast<size_t>(n_out));
    for (auto& b : h) b = static_cast<uint8_t>(rng() & 0x3B);  // finite fp16 scales
    bufs.push_back(must(be.upload_weights(h.data(), h.size())));
    return t9::make_tensor(bufs.back(), 0, t, n_in, n_out);
  }
  ~Floats() {
    for (Buffer* b : bufs) be.free(b);
  }
};

struct Case {
  std::string name;
  int launches;  // kernels per call
  std::function<void(int)> call;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace t9;
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::string only = argc > 2 ? argv[2] : "";
  CudaBackend be;
  std::printf("device: %s; %d calls per window, timed as a graph replay\n", be.name().c_str(), n);
  Floats f(be);
  std::vector<Case> cases;
  for (const int64_t d : {int64_t{4096}, int64_t{2048}}) {
    const std::string D = std::to_string(d);
    const Tensor x0 = f.make(d), x1 = f.make(d), b = f.make(d), w = f.make(d, 1, true);
    const Tensor h0 = f.make(d), h1 = f.make(d), s0 = f.make(d), s1 = f.make(d);
    const auto pick = [](int i, const Tensor& a, const Tensor& c) { return i % 2 ? c : a; };
    cases.push_back({"rms_norm " + D + " in place (one block)", 1, [=, &be](int i) {
                       be.rms_norm(pick(i, x0, x1), w, 1e-6f, 0.0f, pick(i, x0, x1));
                     }});
    cases.push_back({"rms_norm " + D + " apart (k blocks + codes)", 1, [=, &be](int i) {
                       be.rms_norm(pick(i, x0, x1), w, 1e-6f, 0.0f, pick(i, x1, x0));
                     }});
    cases.push_back({"add_rms_norm " + D + " apart (k blocks + codes)", 1, [=, &be](int i) {
                       be.add_rms_norm(pick(i, s0, s1), b, w, 1e-6f, 0.0f, pick(i, s1, s0),
                                       pick(i, h0, h1));
                     }});
    cases.push_back(
        {"add " + D, 1, [=, &be](int i) { be.add(pick(i, x0, x1), b, pick(i, x1, x0)); }});
  }
  {
    const Tensor g = f.make(12288), u = f.make(12288), o = f.make(12288);
    cases.push_back(
        {"glu 12288 (+ codes)", 1, [=, &be](int) { be.glu(g, u, GluKind::kSwiGLU, o); }});
  }
  {
    // Qwen3.5-35B-A3B's router: one row of 256 expert logits, top 8, normalized.
    const Tensor logits = f.make(256), wts = f.make(8);
    Tensor ids = f.make(8);
    ids.type = GgmlType::I32;
    cases.push_back({"moe_route 256 experts top 8", 1,
                     [=, &be](int) { be.moe_route(logits, 8, true, ids, wts); }});
  }
  struct Mm {
    GgmlType t;
    int64_t n_in, n_out;
  };
  for (const Mm m : {Mm{GgmlType::Q4_K, 4096, 64}, Mm{GgmlType::Q4_K, 4096, 1024},
                     Mm{GgmlType::Q4_K, 4096, 4096}, Mm{GgmlType::Q4_K, 4096, 12288},
                     Mm{GgmlType::Q8_0, 2048, 64}, Mm{GgmlType::Q8_0, 2048, 1024},
                     Mm{GgmlType::Q8_0, 4096, 2048}, Mm{GgmlType::F32, 2048, 256}}) {
    const Tensor wt = f.weights(m.t, m.n_in, m.n_out);
    const Tensor x = f.make(m.n_in), y = f.make(m.n_out);
    const bool int8 = cuda_matmul_int8_activations(m.t);
    cases.push_back(
        {fmt::format("matmul {} {} -> {} (x rounded per call)", type_name(m.t), m.n_in, m.n_out),
         int8 ? 2 : 1, [=, &be](int) { be.matmul(wt, x, Tensor{}, y); }});
  }
  std::printf("%-52s %9s %12s\n", "case", "us/call", "us/launch");
  for (const Case& c : cases) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    const double us = 1e6 * bench::seconds_per_replayed_call(be, n, c.call);
    std::printf("%-52s %9.2f %12.2f\n", c.name.c_str(), us, us / c.launches);
  }
  return 0;
}
