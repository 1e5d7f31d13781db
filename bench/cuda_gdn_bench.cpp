// CUDA Gated DeltaNet (gated_delta_net, token by token) timing at Qwen3.5-35B-A3B's shape (16 key
// heads, 32 value heads, 128 x 128 state per value head, tiled heads) for the step shapes the
// engine runs: one sequence's long prompt chunk (first come, first served), several prompt
// chunks side by side, and decode rows. Host clock around N enqueued calls between two syncs.
// Per case: us per call, ns per token of the longest sequence (the serial chain), and GB/s of
// state read + written. Built by scripts/device_test_ops.sh.
//
//   cuda_gdn_bench [ITERS]   # default 20 calls per case
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/check.h"
#include "cuda_bench_util.h"

namespace {

struct Case {
  const char* name;
  int n_seqs, n_q;  // every sequence alike
};

}  // namespace

int main(int argc, char** argv) {
  using namespace t9;
  using bench::must;
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  CudaBackend be;
  std::printf("device: %s, %d calls per case\n", be.name().c_str(), iters);
  constexpr int kNk = 16, kNv = 32, kDk = 128, kDv = 128;
  const Case cases[] = {
      {"35B 1 seq x 2048 tokens", 1, 2048}, {"35B 1 seq x 512 tokens", 1, 512},
      {"35B 4 seqs x 512 tokens", 4, 512},  {"35B 8 seqs x 256 tokens", 8, 256},
      {"35B decode 8 seqs x 1", 8, 1},      {"35B decode 1 seq x 1", 1, 1},
  };
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const auto fill = [&](std::vector<float>& v, float lo, float hi) {
    for (auto& x : v) x = lo + (hi - lo) * (uni(rng) + 1.0f) / 2.0f;
  };
  std::printf("%-28s %9s %12s %8s\n", "case", "us/call", "ns/token", "GB/s");
  for (const Case& c : cases) {
    const int64_t n = int64_t{c.n_seqs} * c.n_q;
    std::vector<float> q(static_cast<size_t>(n) * kNk * kDk), k(q.size());
    std::vector<float> v(static_cast<size_t>(n) * kNv * kDv), a(static_cast<size_t>(n) * kNv),
        b(a.size()), A(kNv), dt(kNv);
    std::vector<float> st(static_cast<size_t>(c.n_seqs) * kNv * kDk * kDv);
    fill(q, -1, 1), fill(k, -1, 1), fill(v, -1, 1), fill(a, -3, 3), fill(b, -3, 3);
    fill(A, -4, -0.05f), fill(dt, -1, 1), fill(st, -0.5f, 0.5f);
    std::vector<RecurrentSeq> seqs;
    for (int s = 0; s < c.n_seqs; ++s) seqs.push_back({s * c.n_q, c.n_q, s, 0});
    std::vector<Buffer*> bufs;
    const auto up = [&](const void* data, size_t bytes) {
      Buffer* buf = must(be.alloc(bytes));
      be.upload(buf, 0, data, bytes);
      bufs.push_back(buf);
      return buf;
    };
    const Tensor tq = make_tensor(up(q.data(), q.size() * 4), 0, GgmlType::F32, kDk, kNk, n);
    const Tensor tk = make_tensor(up(k.data(), k.size() * 4), 0, GgmlType::F32, kDk, kNk, n);
    const Tensor tv = make_tensor(up(v.data(), v.size() * 4), 0, GgmlType::F32, kDv, kNv, n);
    const Tensor ta = make_tensor(up(a.data(), a.size() * 4), 0, GgmlType::F32, kNv, 1, n);
    const Tensor tb = make_tensor(up(b.data(), b.size() * 4), 0, GgmlType::F32, kNv, 1, n);
    const Tensor tA = make_tensor(up(A.data(), A.size() * 4), 0, GgmlType::F32, kNv);
    const Tensor tdt = make_tensor(up(dt.data(), dt.size() * 4), 0, GgmlType::F32, kNv);
    const Tensor ts =
        make_tensor(up(st.data(), st.size() * 4), 0, GgmlType::F32, kDv, kDk, kNv, c.n_seqs);
    const Tensor tseq = make_tensor(up(seqs.data(), seqs.size() * sizeof(RecurrentSeq)), 0,
                                    GgmlType::I32, 4, c.n_seqs);
    const Tensor to = make_tensor(must(be.alloc(v.size() * 4)), 0, GgmlType::F32, kDv, kNv, n);
    bufs.push_back(to.buf);
    GdnParams p;
    p.n_k_heads = kNk, p.n_v_heads = kNv, p.d_k = kDk, p.d_v = kDv, p.v_heads_tiled = true;
    p.min_chunked_tokens = 1 << 30;  // the recurrence (CUDA has only that form)
    const double sec = bench::seconds_per_call(
        be, iters, [&](int) { be.gated_delta_net(tq, tk, tv, ta, tb, tA, tdt, ts, tseq, p, to); });
    const double state_bytes = 2.0 * static_cast<double>(st.size()) * 4;
    std::printf("%-28s %9.1f %12.1f %8.0f\n", c.name, sec * 1e6, sec * 1e9 / c.n_q,
                state_bytes / sec / 1e9);
    for (Buffer* buf : bufs) be.free(buf);
  }
  return 0;
}
