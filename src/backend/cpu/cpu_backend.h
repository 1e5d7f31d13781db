// The CPU backend: host memory, ops run synchronously on the calling thread plus a ThreadPool.
// Kernels are picked at run time: AMX-INT8 (quantized matmuls on the tile unit, AVX-512 for the
// rest) > AVX-512 groups (the AMX kernels' numbers by VNNI) > AVX-512 (F/BW/VL/VNNI, float lanes;
// only when forced) > AVX2+FMA+F16C > portable scalar. The choice can be forced with
// CpuBackendConfig::isa, set_isa(), or TEMPO9_CPU_ISA=scalar|avx2|avx512|avx512-groups|amx (tests
// run every path this way).
//
// Threading never changes results: matmul splits output columns (weight rows) over threads and
// attention splits (query row, head) pairs, never a reduction; chunks of that work go to whichever
// thread claims them first (work_pool.h), which cannot change a value either.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/row_order_probe.h"
#include "backend/cpu/work_pool.h"

namespace t9 {

namespace cpu {
struct AmxActs;
}

using cpu::CpuIsa;

struct CpuBackendConfig {
  int n_threads = 0;          // 0: hardware_concurrency
  std::optional<CpuIsa> isa;  // unset: TEMPO9_CPU_ISA if set, else the best supported
  // How a decode matmul walks its weight rows (cpu/row_order_probe.h): 1 one at a time, 4 the
  // interleaved tile, 0 measured on the first calls (TEMPO9_CPU_DECODE_ROWS=1|4 overrides 0).
  int decode_rows = 0;
};

bool cpu_isa_supported(CpuIsa isa);
CpuIsa best_cpu_isa();
// "scalar", "avx2", "avx512", "avx512-groups", "amx"
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);
std::string_view cpu_isa_name(CpuIsa isa);

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendConfig& cfg = {});
  ~CpuBackend() override;

  // CHECKs that the machine supports `isa`.
  void set_isa(CpuIsa isa);
  CpuIsa isa() const { return isa_; }
  int n_threads() const { return pool_.n_threads(); }

  std::string name() const override;
  Result<Buffer*> alloc(size_t n_bytes) override;
  void free(Buffer* buf) override;
  Result<Buffer*> upload_weights(const void* host, size_t n_bytes) override;
  void upload(Buffer* dst, size_t offset, const void* host, size_t n_bytes) override;
  void download(const Buffer* src, size_t offset, void* host, size_t n_bytes) override;
  void sync() override {}

  void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void take_tokens(const Tensor& prev, const Tensor& ids) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, float weight_bias,
                const Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void mul(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void scale(const Tensor& x, float s, const Tensor& out) override;
  void unary(const Tensor& x, UnaryKind kind, const Tensor& out) override;
  void softcap(const Tensor& x, float c, const Tensor& out) override;
  void glu(const Tensor& gate, const Tensor& up, GluKind kind, const Tensor& out) override;
  void rope(const Tensor& x, const Tensor& positions, const RopeParams& p,
            const Tensor& out) override;
  void matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y) override;
  void write_kv(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                const Tensor& seqs, const Tensor& block_tables, const AttnParams& p) override;
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqs,
                 const Tensor& block_tables, const AttnParams& p, const Tensor& out) override;
  void argmax(const Tensor& logits, const Tensor& out) override;
  void sample(const Tensor& logits, const Tensor& params, const Tensor& out) override;
  void logprobs(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                const Tensor& ids) override;
  void adjust_logits(const Tensor& logits, const Tensor& edits, const Tensor& pending,
                     const Tensor& ids) override;
  void top_k(const Tensor& logits, int k, const Tensor& ids, const Tensor& values) override;
  void softmax(const Tensor& x, const Tensor& out) override;
  void copy(const Tensor& x, const Tensor& out) override;
  // cpu_moe.cpp
  void moe_route(const Tensor& logits, int k, bool normalize, const Tensor& ids,
                 const Tensor& weights) override;
  void matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out) override;
  void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) override;
  void mul_sigmoid(const Tensor& a, const Tensor& g, const Tensor& out) override;
  // cpu_gdn.cpp
  void ssm_conv(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& seqs,
                const Tensor& out) override;
  void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                       const Tensor& b, const Tensor& A, const Tensor& dt_bias, const Tensor& state,
                       const Tensor& seqs, const GdnParams& p, const Tensor& out) override;

 private:
  void matmul_int(const Tensor& w, const Tensor& x, const Tensor& y);
  void matmul_fused(const Tensor& w, const cpu::ActRow& first, int64_t n_tok, const Tensor& y);
  // cpu_matmul_amx.cpp: activation row t quantized at xq + t * n_in, scales xd + t * n_in / 32.
  void matmul_amx(const Tensor& w, const int8_t* xq, const float* xd, int64_t n_tok,
                  const Tensor& y);
  // Its few-row (decode) part: a = the rows packed for matmul_amx.h, n_cols of them (at most 4
  // with tiles, 8 without).
  void matmul_amx_decode(const Tensor& w, const cpu::AmxActs& a, const int8_t* xq, int n_cols,
                         const Tensor& y);
  void matmul_float(const Tensor& w, const Tensor& x, const Tensor& y);
  std::vector<uint8_t>& thread_scratch(int thread, size_t n_bytes);

  cpu::WorkPool pool_;
  CpuIsa isa_ = CpuIsa::kScalar;
  const cpu::MatmulKernels* kernels_ = nullptr;
  std::vector<uint8_t> act_scratch_;                  // quantized activation rows
  std::vector<uint8_t> amx_act_scratch_;              // the same packed for the tiles
  std::vector<std::vector<uint8_t>> thread_scratch_;  // per thread: unpacked weight rows
  cpu::RowOrderProbe row_order_;                      // matmul_fused's order at one row
};

}  // namespace t9
