// CUDA paged attention timing at the model shapes the agents workload runs (Qwen3.5-35B-A3B: 16 q
// heads, 2 KV heads, head_dim 256; Qwen3-8B: 32 / 8 / 128): long prefill chunks over a cached
// prefix and decode rows over long contexts. Per case: us per call, eager (host clock around N
// enqueued calls between two syncs) and replayed (the same N calls as one CUDA graph), the kernel
// path (CudaAttnPath: fold or split), TFLOP/s (4 * rows * q heads * head_dim * visible keys, the
// causal triangle counted exactly) and GB/s of unique K/V bytes (each sequence's keys once per KV
// head; shared pages counted once per sequence), both from the replayed time. Built by
// scripts/device_test_ops.sh.
//
//   cuda_attention_bench [ITERS [CASE]]   # default 20 calls per case; CASE: only the cases whose
//                                         # name contains it
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/check.h"
#include "cuda_bench_util.h"

namespace {

using t9::GgmlType;
using t9::bench::must;

struct Case {
  const char* name;
  int n_head, n_kv_head, head_dim;
  int n_seqs, n_past, n_q;  // every sequence alike
  int shared = 0;           // leading keys on the same pages in every sequence (whole blocks)
};

}  // namespace

int main(int argc, char** argv) {
  using namespace t9;
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::string only = argc > 2 ? argv[2] : "";  // run the cases whose name contains it
  CudaBackend be;
  std::printf("device: %s, %d calls per case\n", be.name().c_str(), iters);
  const Case cases[] = {
      {"35B warm turn: 2048 rows over 12k", 16, 2, 256, 1, 10240, 2048},
      // One agent's warm turn: a tool result's ~160 new rows after a 10k-token prompt.
      {"35B warm turn: 160 rows over 10.3k", 16, 2, 256, 1, 10140, 160},
      {"35B 8 agents x 256 rows over 12k", 16, 2, 256, 8, 12032, 256},
      {"35B prefill chunk 512 at 4k", 16, 2, 256, 1, 3584, 512},
      {"35B decode 1 row at 640", 16, 2, 256, 1, 639, 1},
      {"35B decode 8 rows at 15k", 16, 2, 256, 8, 15000, 1},
      // 8 agents over one 10k system prompt (the prefix cache's shared pages): cohort tiles.
      {"35B decode 8 rows at 11k, 10k shared", 16, 2, 256, 8, 11000, 1, 10000},
      {"35B decode 8 rows at 11k, none shared", 16, 2, 256, 8, 11000, 1},
      {"8B prefill chunk 512 at 8k", 32, 8, 128, 1, 7680, 512},
      {"8B decode 1 row at 640", 32, 8, 128, 1, 639, 1},
      {"8B decode 32 rows at 4k", 32, 8, 128, 32, 4096, 1},
  };
  constexpr int kBlock = 16;
  std::mt19937_64 rng(7);
  std::printf("%-36s %5s %9s %9s %9s %8s\n", "case", "path", "us/call", "replayed", "TFLOP/s",
              "GB/s");
  for (const Case& c : cases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    const int ctx = c.n_past + c.n_q;
    const int blocks_per_seq = (ctx + kBlock - 1) / kBlock;
    const int64_t slots = int64_t{blocks_per_seq} * c.n_seqs * kBlock;
    const size_t pool_bytes = static_cast<size_t>(slots) * c.n_kv_head * c.head_dim * 2;
    Buffer* kb = must(be.alloc(pool_bytes));
    Buffer* vb = must(be.alloc(pool_bytes));
    std::vector<uint16_t> junk(pool_bytes / 2);
    for (auto& x : junk) x = static_cast<uint16_t>(0x3000 | (rng() & 0x83FF));  // |x| < 1, finite
    be.upload(kb, 0, junk.data(), pool_bytes);
    be.upload(vb, 0, junk.data(), pool_bytes);
    // Each sequence's blocks shuffled over the pool, as after a while of serving.
    std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq) * c.n_seqs);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    std::shuffle(table.begin(), table.end(), rng);
    for (int s = 1; s < c.n_seqs; ++s)  // the shared blocks: sequence 0's
      for (int b = 0; b < c.shared / kBlock; ++b)
        table[static_cast<size_t>(s * blocks_per_seq + b)] = table[static_cast<size_t>(b)];
    std::vector<AttnSeq> seqs;
    for (int s = 0; s < c.n_seqs; ++s)
      seqs.push_back({s * c.n_q, c.n_q, c.n_past, s * blocks_per_seq});
    const int64_t rows = int64_t{c.n_q} * c.n_seqs;
    std::vector<float> q(static_cast<size_t>(rows) * c.n_head * c.head_dim);
    for (auto& x : q) x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.0f;
    Buffer* qb = must(be.alloc(q.size() * 4));
    Buffer* ob = must(be.alloc(q.size() * 4));
    Buffer* tb = must(be.alloc(table.size() * 4));
    Buffer* sb = must(be.alloc(seqs.size() * sizeof(AttnSeq)));
    be.upload(qb, 0, q.data(), q.size() * 4);
    be.upload(tb, 0, table.data(), table.size() * 4);
    be.upload(sb, 0, seqs.data(), seqs.size() * sizeof(AttnSeq));
    AttnParams p;
    p.n_head = c.n_head;
    p.n_kv_head = c.n_kv_head;
    p.head_dim = c.head_dim;
    p.block_size = kBlock;
    p.n_seqs = c.n_seqs;
    p.max_ctx = ctx;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const Tensor tq = make_tensor(qb, 0, GgmlType::F32, c.head_dim, c.n_head, rows);
    const Tensor to = make_tensor(ob, 0, GgmlType::F32, c.head_dim, c.n_head, rows);
    const Tensor tk = make_tensor(kb, 0, GgmlType::F16, c.head_dim, c.n_kv_head, slots);
    const Tensor tv = make_tensor(vb, 0, GgmlType::F16, c.head_dim, c.n_kv_head, slots);
    const Tensor tt = make_tensor(tb, 0, GgmlType::I32, static_cast<int64_t>(table.size()));
    const Tensor ts = make_tensor(sb, 0, GgmlType::I32, 4, c.n_seqs);
    const auto call = [&](int) { be.attention(tq, tk, tv, ts, tt, p, to); };
    const double sec = bench::seconds_per_call(be, iters, call);
    // A chain of calls as one graph replay: the device's time a call, host launches left out
    // (a decode call's few µs are otherwise the host's launch rate).
    const double replayed = bench::seconds_per_replayed_call(be, iters, call);
    // Visible keys summed over a sequence's rows: row j sees n_past + j + 1 keys.
    const double keys = double(c.n_q) * c.n_past + double(c.n_q) * (c.n_q + 1) / 2;
    const double flops = 4.0 * c.n_seqs * keys * c.n_head * c.head_dim;
    const double kv_bytes = 2.0 * c.n_seqs * ctx * c.n_kv_head * c.head_dim * 2;
    const CudaAttnPath path = cuda_attention_path(p, GgmlType::F16, rows);
    std::printf("%-36s %5s %9.1f %9.1f %9.2f %8.0f\n", c.name,
                path == CudaAttnPath::kTensorFold    ? "fold"
                : path == CudaAttnPath::kTensorSplit ? "split"
                                                     : "fp32",
                sec * 1e6, replayed * 1e6, flops / replayed / 1e12, kv_bytes / replayed / 1e9);
    for (Buffer* b : {kb, vb, qb, ob, tb, sb}) be.free(b);
  }
  return 0;
}
