// Attention throughput of the CPU backend at model shapes: a prefill chunk over a long cached
// context (the agent case: a new message after a re-sent history) and batched decode. Prints CPU
// time per call, GFLOP/s (4 * head_dim per visible (query, key) pair per head: q.k and w*v) and,
// as the oracle, the max |error| of two query rows vs a double-precision reference on the same F16
// pool. Built by dev/kernels/build_test_ops.sh.
// Usage: attn_bench [threads]   (T9_BENCH_ITERS=n calls per shape, default 3)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/half.h"

using namespace t9;

namespace {

double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Shape {
  const char* name;
  int n_head, n_kv_head, head_dim;
  int n_seqs, n_past, n_q;  // every sequence: n_q new rows after n_past cached tokens
};

void run(CpuBackend& be, const Shape& s, int iters) {
  const int bs = 16, ctx = s.n_past + s.n_q, blocks_per_seq = (ctx + bs - 1) / bs;
  const int n_blocks = blocks_per_seq * s.n_seqs, n_rows = s.n_q * s.n_seqs;
  const int64_t kv_row = int64_t{s.n_kv_head} * s.head_dim;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint16_t> kh(static_cast<size_t>(n_blocks) * bs * kv_row),
      vh(static_cast<size_t>(n_blocks) * bs * kv_row);
  for (auto& x : kh) x = f32_to_f16(u(rng));
  for (auto& x : vh) x = f32_to_f16(u(rng));
  std::vector<float> q(static_cast<size_t>(n_rows) * s.n_head * s.head_dim);
  for (auto& x : q) x = 2.0f * u(rng);
  std::vector<int32_t> tables(static_cast<size_t>(n_blocks)), meta;
  for (int b = 0; b < n_blocks; ++b) tables[b] = (b * 7919) % n_blocks;  // scattered blocks
  for (int i = 0; i < s.n_seqs; ++i)
    meta.insert(meta.end(), {i * s.n_q, s.n_q, s.n_past, i * blocks_per_seq});
  auto buf = [&](const void* p, size_t n) {
    Buffer* b = *be.alloc(n);
    be.upload(b, 0, p, n);
    return b;
  };
  Buffer *kb = buf(kh.data(), kh.size() * 2), *vb = buf(vh.data(), vh.size() * 2),
         *qb = buf(q.data(), q.size() * 4), *tb = buf(tables.data(), tables.size() * 4),
         *mb = buf(meta.data(), meta.size() * 4), *ob = *be.alloc(q.size() * 4);
  const Tensor kc = make_tensor(kb, 0, GgmlType::F16, s.head_dim, s.n_kv_head, n_blocks * bs),
               vc = make_tensor(vb, 0, GgmlType::F16, s.head_dim, s.n_kv_head, n_blocks * bs),
               qt = make_tensor(qb, 0, GgmlType::F32, s.head_dim, s.n_head, n_rows),
               ot = make_tensor(ob, 0, GgmlType::F32, s.head_dim, s.n_head, n_rows),
               bt = make_tensor(tb, 0, GgmlType::I32, n_blocks),
               st = make_tensor(mb, 0, GgmlType::I32, 4, s.n_seqs);
  AttnParams p;
  p.n_head = s.n_head;
  p.n_kv_head = s.n_kv_head;
  p.head_dim = s.head_dim;
  p.block_size = bs;
  p.n_seqs = s.n_seqs;
  p.max_ctx = ctx;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  be.attention(qt, kc, vc, st, bt, p, ot);  // warm up
  const double c0 = cpu_s();
  for (int it = 0; it < iters; ++it) be.attention(qt, kc, vc, st, bt, p, ot);
  const double sec = (cpu_s() - c0) / iters;
  double pairs = 0;  // visible (query row, key) pairs per sequence
  for (int j = 0; j < s.n_q; ++j) pairs += s.n_past + j + 1;
  const double flop = 4.0 * s.head_dim * s.n_head * pairs * s.n_seqs;
  // Oracle: the first and last row of sequence 0, head 0 and the last head.
  std::vector<float> out(q.size());
  be.download(ob, 0, out.data(), out.size() * 4);
  double max_err = 0;
  for (int j : {0, s.n_q - 1})
    for (int h : {0, s.n_head - 1}) {
      const int kvh = h / (s.n_head / s.n_kv_head), pos = s.n_past + j;
      const float* qr = &q[(static_cast<size_t>(j) * s.n_head + h) * s.head_dim];
      std::vector<double> sc(static_cast<size_t>(pos + 1)), acc(static_cast<size_t>(s.head_dim));
      double mx = -1e300, sum = 0;
      auto row = [&](const std::vector<uint16_t>& pool, int kp) {
        const int64_t slot = int64_t{tables[kp / bs]} * bs + kp % bs;
        return &pool[static_cast<size_t>(slot * kv_row + int64_t{kvh} * s.head_dim)];
      };
      for (int kp = 0; kp <= pos; ++kp) {
        double d = 0;
        for (int e = 0; e < s.head_dim; ++e) d += double(qr[e]) * f16_to_f32(row(kh, kp)[e]);
        sc[kp] = d * p.scale;
        mx = std::max(mx, sc[kp]);
      }
      for (int kp = 0; kp <= pos; ++kp) {
        const double w = std::exp(sc[kp] - mx);
        sum += w;
        for (int e = 0; e < s.head_dim; ++e) acc[e] += w * f16_to_f32(row(vh, kp)[e]);
      }
      for (int e = 0; e < s.head_dim; ++e)
        max_err = std::max(max_err, std::abs(acc[e] / sum -
                                              out[(static_cast<size_t>(j) * s.n_head + h) *
                                                      s.head_dim + e]));
    }
  std::printf("%-34s %9.2f ms  %7.1f GFLOP/s  max|err| %.1e\n", s.name, sec * 1e3,
              flop / sec * 1e-9, max_err);
  for (Buffer* b : {kb, vb, qb, tb, mb, ob}) be.free(b);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int iters = std::getenv("T9_BENCH_ITERS") ? std::atoi(std::getenv("T9_BENCH_ITERS")) : 3;
  CpuBackendConfig cfg;
  cfg.n_threads = threads;
  CpuBackend be(cfg);
  std::printf("CPU attention, %d thread(s), CPU time per call\n", threads);
  const Shape shapes[] = {
      {"SmolLM2 9/3x64, 256 new after 2048", 9, 3, 64, 1, 2048, 256},
      {"Qwen2.5 12/2x128, 256 new after 2048", 12, 2, 128, 1, 2048, 256},
      {"SmolLM2 decode, 8 seqs at 4096", 9, 3, 64, 8, 4096, 1},
      {"Qwen2.5 decode, 8 seqs at 4096", 12, 2, 128, 8, 4096, 1},
  };
  for (const Shape& s : shapes) run(be, s, iters);
}
