// Checks that the fused few-rows matmul path (1..4 activation rows) equals the unpack path (9
// rows) bit for bit, for every weight type, 1 and 2 threads, n_out with a partial row tile.
// Build: g++ -std=c++20 -O2 -Isrc dev/kernels/fused_check.cpp BUILD/src/libtempo9_backend.a
//   BUILD/src/libtempo9_quant.a BUILD/src/libtempo9_core.a -lfmt -lpthread
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "quant/half.h"

using namespace t9;

int main() {
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                            GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K};
  const int64_t n_in = 1024, n_out = 23, n_all = 9;
  std::mt19937 rng(7);
  int bad = 0;
  for (GgmlType t : types) {
    std::vector<uint8_t> wb(row_bytes(t, n_in) * n_out);
    for (auto& b : wb) b = static_cast<uint8_t>(rng());
    const size_t bb = traits(t).block_bytes;
    const uint16_t d = f32_to_f16(0.02f);
    for (size_t i = 0; i < wb.size(); i += bb) {  // finite fp16 scales where each format has them
      if (t == GgmlType::Q6_K)
        std::memcpy(&wb[i + 208], &d, 2);
      else
        std::memcpy(&wb[i], &d, 2);
      if (t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q4_1 || t == GgmlType::Q5_1)
        std::memcpy(&wb[i + 2], &d, 2);
    }
    std::vector<float> x(n_in * n_all);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-2, 2)(rng);
    for (int threads : {1, 2}) {
      CpuBackend be(CpuBackendConfig{threads, CpuIsa::kAvx512});
      Buffer* wbuf = *be.upload_weights(wb.data(), wb.size());
      Buffer* xbuf = *be.alloc(x.size() * 4);
      Buffer* ybuf = *be.alloc(n_out * n_all * 4);
      be.upload(xbuf, 0, x.data(), x.size() * 4);
      const Tensor w = make_tensor(wbuf, 0, t, n_in, n_out);
      be.matmul(w, make_tensor(xbuf, 0, GgmlType::F32, n_in, n_all), Tensor{},
                make_tensor(ybuf, 0, GgmlType::F32, n_out, n_all));
      std::vector<float> ref(n_out * n_all), part(n_out * 4);
      be.download(ybuf, 0, ref.data(), ref.size() * 4);
      for (int64_t n = 1; n <= 4; ++n) {
        for (int64_t r0 = 0; r0 + n <= n_all; r0 += 3) {
          be.matmul(w, make_tensor(xbuf, r0 * n_in * 4, GgmlType::F32, n_in, n), Tensor{},
                    make_tensor(ybuf, 0, GgmlType::F32, n_out, n));
          be.download(ybuf, 0, part.data(), n * n_out * 4);
          if (std::memcmp(part.data(), ref.data() + r0 * n_out, n * n_out * 4) != 0) {
            std::printf("MISMATCH %s threads %d rows %ld..+%ld\n",
                        std::string(type_name(t)).c_str(), threads, r0, n);
            ++bad;
          }
        }
      }
      be.free(wbuf), be.free(xbuf), be.free(ybuf);
    }
  }
  // The AVX-512 activation quantizer must write the portable one's bytes (ties included: inputs
  // that are multiples of 0.5 after scaling by 127 / amax).
  {
    const int64_t n = 4096;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = i % 3 ? std::uniform_real_distribution<float>(-5, 5)(rng)
                   : static_cast<float>(static_cast<int>(rng() % 255) - 127) * 0.5f;
    std::vector<int8_t> qa(n), qb(n);
    std::vector<float> da(n / 32), db(n / 32), sa(n / 16), sb(n / 16);
    cpu::kernels_scalar().quantize_act(x.data(), n, qa.data(), da.data(), sa.data());
    cpu::kernels_avx512().quantize_act(x.data(), n, qb.data(), db.data(), sb.data());
    if (qa != qb || std::memcmp(da.data(), db.data(), da.size() * 4) != 0 ||
        std::memcmp(sa.data(), sb.data(), sa.size() * 4) != 0) {
      std::printf("MISMATCH quantize_act avx512 vs scalar\n");
      ++bad;
    }
  }
  std::printf(bad ? "FAIL: %d mismatches\n" : "OK: fused == unpack bitwise\n", bad);
  return bad != 0;
}
