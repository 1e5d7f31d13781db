// Matmul throughput of the CPU backend: decode (1 row) and prefill (512 rows) at model shapes,
// 1 and 2 threads, every ISA. Prints GFLOP/s (2 * n_in * n_out * n_tok / s) and, for decode, the
// weight bytes streamed per second. Built by dev/kernels/build_test_ops.sh.
// Usage: matmul_bench [isa...] [decode|prefill|tok=N] [type] [1t] [cold] [shape=INxOUT]
//        (default: best ISA, both, 3 types, 1 and 2 threads, weights cached)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/half.h"

using namespace t9;

namespace {

std::vector<uint8_t> random_weights(GgmlType t, int64_t n_in, int64_t n_out) {
  std::minstd_rand rng(42);
  std::vector<uint8_t> w(row_bytes(t, n_in) * n_out);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const auto& tr = traits(t);
  const uint16_t d = f32_to_f16(0.01f);  // sane fp16 scales at the block start (Q4_K d, dmin)
  for (size_t i = 0; i < w.size(); i += tr.block_bytes) {
    std::memcpy(&w[i], &d, 2);
    if (t == GgmlType::Q4_K || t == GgmlType::Q4_1) std::memcpy(&w[i + 2], &d, 2);
  }
  return w;
}

double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// cold: the weights are copied into enough buffers to fill ~1.2 GB, and each call reads the next
// one, so every call streams its weights from DRAM (the dev VM's L3 is 480 MiB: a single copy of
// a model-shaped matrix stays in it and the decode numbers would be L3 numbers).
double bench(CpuBackend& be, GgmlType t, int64_t n_in, int64_t n_out, int64_t n_tok, bool cold) {
  const auto wb = random_weights(t, n_in, n_out);
  const size_t n_copies = cold ? (size_t{1200} << 20) / wb.size() + 1 : 1;
  // upload_weights wraps host memory (zero copy): each copy needs its own host bytes.
  std::vector<std::vector<uint8_t>> host(n_copies, wb);
  std::vector<Buffer*> wbufs;
  for (const auto& h : host) wbufs.push_back(*be.upload_weights(h.data(), h.size()));
  Buffer* xbuf = *be.alloc(n_in * n_tok * 4);
  Buffer* ybuf = *be.alloc(n_out * n_tok * 4);
  std::vector<float> x(n_in * n_tok);
  std::mt19937 rng(1);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  be.upload(xbuf, 0, x.data(), x.size() * 4);
  std::vector<Tensor> ws;
  for (Buffer* b : wbufs) ws.push_back(make_tensor(b, 0, t, n_in, n_out));
  size_t next = 0;
  auto w_next = [&]() -> const Tensor& { return ws[next++ % ws.size()]; };
  const Tensor w = ws[0], xt = make_tensor(xbuf, 0, GgmlType::F32, n_in, n_tok),
               y = make_tensor(ybuf, 0, GgmlType::F32, n_out, n_tok);
  be.matmul(w, xt, Tensor{}, y);  // warm up
  // T9_BENCH_ITERS=n: exactly n calls, timed in process CPU time (all threads), which unlike
  // wall time hardly moves when other jobs load the machine (the dev VM has no cycle counters).
  if (const char* n = std::getenv("T9_BENCH_ITERS")) {
    const int iters = std::atoi(n);
    const double c0 = cpu_s();
    for (int it = 0; it < iters; ++it) be.matmul(w_next(), xt, Tensor{}, y);
    for (Buffer* b : wbufs) be.free(b);
    be.free(xbuf), be.free(ybuf);
    return (cpu_s() - c0) / iters;
  }
  int iters = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double secs = 0;
  do {
    be.matmul(w_next(), xt, Tensor{}, y);
    ++iters;
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (secs < 0.4);
  for (Buffer* b : wbufs) be.free(b);
  be.free(xbuf), be.free(ybuf);
  return secs / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<CpuIsa> isas;
  std::vector<int64_t> toks = {1, 512};
  std::vector<GgmlType> types = {GgmlType::Q4_K, GgmlType::Q4_1, GgmlType::Q8_0};
  std::vector<int> threads_list = {1, 2};
  bool only_shape = false, cold = false;
  int64_t shape_in = 0, shape_out = 0;
  for (int i = 1; i < argc; ++i) {
    if (auto isa = parse_cpu_isa(argv[i])) isas.push_back(*isa);
    if (std::strcmp(argv[i], "decode") == 0) toks = {1};
    if (std::strcmp(argv[i], "prefill") == 0) toks = {512};
    if (auto t = type_from_name(argv[i])) types = {*t};
    if (std::strcmp(argv[i], "1t") == 0) threads_list = {1};
    if (std::strcmp(argv[i], "cold") == 0) cold = true;  // weights from DRAM (see bench())
    if (std::strncmp(argv[i], "tok=", 4) == 0) toks = {std::atol(argv[i] + 4)};  // batch rows
    if (std::strncmp(argv[i], "shape=", 6) == 0) {                               // shape=N_INxN_OUT
      only_shape = true;
      std::sscanf(argv[i] + 6, "%ldx%ld", &shape_in, &shape_out);
    }
  }
  if (isas.empty()) isas.push_back(best_cpu_isa());
  struct Shape {
    int64_t n_in, n_out;
  };
  std::vector<Shape> shapes = {{576, 1536}, {1536, 576},  {1536, 8960}, {8960, 1536},
                               {640, 2048}, {576, 49152}, {640, 262144}};
  if (only_shape) shapes = {{shape_in, shape_out}};  // any shape
  std::printf("%-7s %-6s %5s %5s %4s %3s %10s %9s %8s\n", "isa", "type", "n_in", "n_out", "tok",
              "thr", "ms", "GFLOP/s", "GB/s(W)");
  for (CpuIsa isa : isas) {
    for (GgmlType t : types) {
      for (const Shape& s : shapes) {
        if (s.n_in % traits(t).block_elems) continue;
        for (int64_t n_tok : toks) {
          for (int threads : threads_list) {
            CpuBackend be(CpuBackendConfig{threads, isa});
            const double sec = bench(be, t, s.n_in, s.n_out, n_tok, cold);
            const double gflops = 2.0 * s.n_in * s.n_out * n_tok / sec * 1e-9;
            const double gbs = row_bytes(t, s.n_in) * s.n_out / sec * 1e-9;
            std::printf("%-7s %-6s %5ld %5ld %4ld %3d %10.3f %9.1f %8.1f\n",
                        std::string(cpu_isa_name(isa)).c_str(), std::string(type_name(t)).c_str(),
                        s.n_in, s.n_out, n_tok, threads, sec * 1e3, gflops, gbs);
          }
        }
      }
    }
  }
}
