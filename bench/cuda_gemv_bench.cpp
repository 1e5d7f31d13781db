// CUDA matmul timing (stage 1, one batched run, no tuning): decode GEMV per weight type against
// the measured device-to-device copy bandwidth, plus a few multi-row shapes. Host clock around N
// enqueued calls between two syncs (each call is >10 us, above the launch rate), weights rotated
// over enough copies to exceed the 60 MB L2. Built by scripts/device_test_ops.sh.
//
//   cuda_gemv_bench [copy_ceiling_GBps [TYPE [SHAPES]]]  # %copy column relative to it
//                                               # (default: 4263, a 4 GiB torch device-to-device
//                                               # copy on an H200 here); TYPE: only that weight
//                                               # type (for ncu); SHAPES: N_INxN_OUT[xN_TOK],...
//                                               # instead of the built-in list.
//                                               # T9_BENCH_REPLAY=1: time CUDA graph replays
//                                               # T9_BENCH_BF16=1: the bf16 tensor-core path
//                                               # for the matrices it takes (Q4_K, Q6_K:
//                                               # cuda_bf16_matmul.cuh; their type shows as
//                                               # "Q4_K/b"), the int8 path for the rest
// Lines with n_out 64 time a call whose weights are ~0.1-0.3 MB: what one matmul costs beside its
// bytes (launches, the activation quantizer, one DRAM round trip). Q4_K, Q6_K and Q8_0 also run
// 16..2048 rows: from 16 rows the int8 tensor-core kernel (cuda_mma.cu), GFLOP/s the figure to
// read there.
#include <algorithm>
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
using t9::bench::seconds_per_call;
using t9::bench::seconds_per_replayed_call;

}  // namespace

int main(int argc, char** argv) {
  using namespace t9;
  const char* bf16_env = std::getenv("T9_BENCH_BF16");
  CudaBackendConfig cfg;
  cfg.bf16_matmul = bf16_env != nullptr && std::strcmp(bf16_env, "0") != 0;
  cfg.bf16_q8_0 = cfg.bf16_matmul;
  CudaBackend be(cfg);
  std::printf("device: %s\n", be.name().c_str());
  std::mt19937_64 rng(12345);

  // Copy ceiling: 2 GiB device to device, bytes read + written.
  const size_t copy_bytes = size_t{2} << 30;
  Buffer* a = must(be.alloc(copy_bytes));
  Buffer* b = must(be.alloc(copy_bytes));
  Tensor ta = make_tensor(a, 0, GgmlType::F16, copy_bytes / 2 / 4096, 4096);
  Tensor tb = make_tensor(b, 0, GgmlType::F16, copy_bytes / 2 / 4096, 4096);
  std::vector<uint8_t> junk(copy_bytes / 64);
  for (auto& x : junk) x = static_cast<uint8_t>(rng() & 0x3B);  // finite fp16 values
  for (size_t off = 0; off < copy_bytes; off += junk.size())
    be.upload(a, off, junk.data(), junk.size());
  const double t_copy = seconds_per_call(be, 10, [&](int) { be.copy(ta, tb); });
  const double copy_op_gbs = 2.0 * copy_bytes / t_copy / 1e9;
  const double copy_gbs = argc > 1 ? std::atof(argv[1]) : 4263.0;
  std::printf("copy op (F16->F16) 2 GiB: %.3f ms, %.0f GB/s (read + write); ceiling %.0f GB/s\n",
              t_copy * 1e3, copy_op_gbs, copy_gbs);
  be.free(a);
  be.free(b);

  struct Shape {
    int64_t n_in, n_out, n_tok;
  };
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16,
                            GgmlType::BF16, GgmlType::F32};
  std::printf("%-6s %6s %6s %4s %10s %9s %7s %9s\n", "type", "n_in", "n_out", "tok", "us/call",
              "GB/s", "%copy", "GFLOP/s");
  const std::string only = argc > 2 ? argv[2] : "";
  // T9_BENCH_REPLAY=1: time graph replays of the calls (seconds_per_replayed_call).
  const char* replay_env = std::getenv("T9_BENCH_REPLAY");
  const bool replay = replay_env != nullptr && std::strcmp(replay_env, "0") != 0;
  std::vector<Shape> shapes = {
      Shape{4096, 14336, 1},   Shape{14336, 4096, 1},   Shape{4096, 4096, 1},
      Shape{4096, 64, 1},      Shape{4096, 14336, 8},   Shape{4096, 14336, 16},
      Shape{4096, 14336, 32},  Shape{4096, 14336, 64},  Shape{4096, 14336, 512},
      Shape{14336, 4096, 512}, Shape{4096, 14336, 2048}};
  if (argc > 3) {  // SHAPES: N_INxN_OUT[xN_TOK],... instead of the list above
    shapes.clear();
    for (const char* p = argv[3]; *p != '\0';) {
      char* end = nullptr;
      Shape s{std::strtoll(p, &end, 10), 0, 1};
      s.n_out = std::strtoll(end + 1, &end, 10);
      if (*end == 'x') s.n_tok = std::strtoll(end + 1, &end, 10);
      shapes.push_back(s);
      p = *end == ',' ? end + 1 : end;
    }
  }
  for (GgmlType t : types) {
    if (!only.empty() && only != type_name(t)) continue;
    // Q4_K, Q6_K, Q8_0 from 16 rows: the tensor-core kernel (cuda_mma.cu)
    const bool sliced = t == GgmlType::Q4_K || t == GgmlType::Q6_K || t == GgmlType::Q8_0;
    for (const Shape s : shapes) {
      const bool mma_shape = s.n_tok >= 16 && s.n_tok != 512;
      if (mma_shape && !sliced) continue;
      if (s.n_tok == 512 && !sliced && t != GgmlType::F16) continue;
      if (s.n_tok == 512 && s.n_in == 14336 && !sliced) continue;
      const size_t wbytes = row_bytes(t, s.n_in) * static_cast<size_t>(s.n_out);
      const int copies = static_cast<int>(std::clamp<size_t>((200u << 20) / wbytes + 1, 2, 64));
      std::vector<uint8_t> host(wbytes);
      for (auto& x : host) x = static_cast<uint8_t>(rng());
      if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16)
        for (size_t i = 0; i + 1 < host.size(); i += 2) host[i + 1] &= 0x3B;  // finite values
      std::vector<Buffer*> wb;
      std::vector<Tensor> w;
      for (int c = 0; c < copies; ++c) {
        wb.push_back(must(be.upload_matmul_weights(host.data(), wbytes, t, s.n_in, s.n_out)));
        w.push_back(make_tensor(wb.back(), 0, t, s.n_in, s.n_out));
      }
      Buffer* xb = must(be.alloc(static_cast<size_t>(s.n_in * s.n_tok) * 4));
      Buffer* yb = must(be.alloc(static_cast<size_t>(s.n_out * s.n_tok) * 4));
      std::vector<float> x(static_cast<size_t>(s.n_in * s.n_tok));
      for (auto& v : x) v = static_cast<float>(rng() % 2001) / 1000.0f - 1.0f;
      be.upload(xb, 0, x.data(), x.size() * 4);
      Tensor xt = make_tensor(xb, 0, GgmlType::F32, s.n_in, s.n_tok);
      Tensor yt = make_tensor(yb, 0, GgmlType::F32, s.n_out, s.n_tok);
      const int n = s.n_tok >= 512 ? 10 : 60;
      const auto call = [&](int i) {
        be.matmul(w[static_cast<size_t>(i % copies)], xt, Tensor{}, yt);
      };
      const double sec =
          replay ? seconds_per_replayed_call(be, n, call) : seconds_per_call(be, n, call);
      const double bytes = static_cast<double>(wbytes) + 4.0 * s.n_tok * (s.n_in + s.n_out);
      const double gbs = bytes / sec / 1e9;
      const double gflops = 2.0 * s.n_in * s.n_out * s.n_tok / sec / 1e9;
      const std::string label =
          std::string(type_name(t)) + (wb[0]->layout == WeightLayout::kFrag ? "/b" : "");
      std::printf("%-6s %6lld %6lld %4lld %10.1f %9.0f %6.0f%% %9.0f\n", label.c_str(),
                  static_cast<long long>(s.n_in), static_cast<long long>(s.n_out),
                  static_cast<long long>(s.n_tok), sec * 1e6, gbs, 100.0 * gbs / copy_gbs, gflops);
      for (Buffer* p : wb) be.free(p);
      be.free(xb);
      be.free(yb);
    }
  }
  return 0;
}
