// CUDA expert and dense matmul timing at Qwen3.5-35B-A3B's shapes (hidden 2048, expert FFN 512,
// 256 experts, 8 per token; Q8_0 weights) for the step sizes the engine runs: decode rows of 8
// agents, a 512-token prompt chunk, and a 2048-token step (the agents workload's prefill). The
// routing is uniform at random (8 distinct experts per token), as on the synthetic files. Host
// clock around N enqueued calls between two syncs. Per case: us per call and GFLOP/s of useful
// products (2 * pairs * n_in * n_out; tile padding not counted). Built by
// scripts/device_test_ops.sh; `scripts/device_test_ops.sh gemm` runs it and profiles the
// 2048-token calls with ncu.
//
//   cuda_moe_bench [ITERS [CASE]]   # default 20 calls per case; CASE: only cases whose name
//                                   # contains it (for ncu)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/check.h"
#include "cuda_bench_util.h"

namespace {

struct Case {
  const char* name;
  int64_t n_in, n_out, n_tok;
  int n_expert;  // 0: a dense matmul
  bool x_per_rank;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace t9;
  using bench::must;
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::string only = argc > 2 ? argv[2] : "";
  CudaBackend be;
  std::printf("device: %s, %d calls per case\n", be.name().c_str(), iters);
  constexpr int kTopK = 8;
  const Case cases[] = {
      {"expert gate/up, 8 rows", 2048, 512, 8, 256, false},
      {"expert down, 8 rows", 512, 2048, 8, 256, true},
      // A warm agent turn's suffix (~160 new tokens): ~5 rows per expert, every expert touched.
      {"expert gate/up, 160 rows", 2048, 512, 160, 256, false},
      {"expert down, 160 rows", 512, 2048, 160, 256, true},
      {"expert gate/up, 512 rows", 2048, 512, 512, 256, false},
      {"expert down, 512 rows", 512, 2048, 512, 256, true},
      {"expert gate/up, 2048 rows", 2048, 512, 2048, 256, false},
      {"expert down, 2048 rows", 512, 2048, 2048, 256, true},
      {"dense 2048->8192, 2048 rows", 2048, 8192, 2048, 0, false},
      {"dense 4096->2048, 2048 rows", 4096, 2048, 2048, 0, false},
      {"dense 2048->512, 2048 rows", 2048, 512, 2048, 0, false},
  };
  std::mt19937_64 rng(5);
  std::printf("%-30s %10s %9s\n", "case", "us/call", "GFLOP/s");
  for (const Case& c : cases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    const int64_t n_mat = std::max(c.n_expert, 1);
    const size_t wbytes = row_bytes(GgmlType::Q8_0, c.n_in) * static_cast<size_t>(c.n_out * n_mat);
    std::vector<uint8_t> host(wbytes);
    for (auto& x : host) x = static_cast<uint8_t>(rng());
    // Q8_0 blocks: 2-byte f16 scale (kept small and finite) + 32 int8 codes.
    for (size_t b = 0; b + 34 <= host.size(); b += 34) host[b + 1] = 0x1C;
    std::vector<Buffer*> bufs;
    bufs.push_back(must(be.upload_weights(host.data(), wbytes)));
    const Tensor w = c.n_expert > 0
                         ? make_tensor(bufs.back(), 0, GgmlType::Q8_0, c.n_in, c.n_out, c.n_expert)
                         : make_tensor(bufs.back(), 0, GgmlType::Q8_0, c.n_in, c.n_out);
    const int64_t xk = c.x_per_rank ? kTopK : 1;
    const int64_t x_rows = c.n_expert > 0 ? c.n_tok * xk : c.n_tok;
    const int64_t y_rows = c.n_expert > 0 ? c.n_tok * kTopK : c.n_tok;
    std::vector<float> x(static_cast<size_t>(x_rows * c.n_in));
    for (auto& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
    bufs.push_back(must(be.alloc(x.size() * 4)));
    be.upload(bufs.back(), 0, x.data(), x.size() * 4);
    const Tensor xt = c.n_expert > 0
                          ? make_tensor(bufs.back(), 0, GgmlType::F32, c.n_in, xk, c.n_tok)
                          : make_tensor(bufs.back(), 0, GgmlType::F32, c.n_in, c.n_tok);
    bufs.push_back(must(be.alloc(static_cast<size_t>(y_rows * c.n_out) * 4)));
    const Tensor yt = c.n_expert > 0
                          ? make_tensor(bufs.back(), 0, GgmlType::F32, c.n_out, kTopK, c.n_tok)
                          : make_tensor(bufs.back(), 0, GgmlType::F32, c.n_out, c.n_tok);
    Tensor ids;
    if (c.n_expert > 0) {
      std::vector<int32_t> id(static_cast<size_t>(c.n_tok * kTopK)), perm(c.n_expert);
      for (int64_t t = 0; t < c.n_tok; ++t) {
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::copy_n(perm.begin(), kTopK, id.begin() + t * kTopK);
      }
      bufs.push_back(must(be.alloc(id.size() * 4)));
      be.upload(bufs.back(), 0, id.data(), id.size() * 4);
      ids = make_tensor(bufs.back(), 0, GgmlType::I32, kTopK, c.n_tok);
    }
    const double sec = bench::seconds_per_call(be, iters, [&](int) {
      if (c.n_expert > 0)
        be.matmul_id(w, xt, ids, yt);
      else
        be.matmul(w, xt, Tensor{}, yt);
    });
    const double flops = 2.0 * static_cast<double>(y_rows) * c.n_in * c.n_out;
    std::printf("%-30s %10.1f %9.0f\n", c.name, sec * 1e6, flops / sec / 1e9);
    for (Buffer* b : bufs) be.free(b);
  }
  return 0;
}
