// CPU backend: memory, ISA selection, and the small row-wise ops (norms, elementwise, sampling).
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include <cpuid.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/cpu/cpu_util.h"
#include "core/argmax.h"
#include "core/log.h"
#include "core/sampling.h"
#include "quant/dequantize.h"
#include "quant/half.h"

namespace t9 {

using cpu::base_ptr;
using cpu::check_f32_rows;
using cpu::check_same_shape;
using cpu::f32_row;

namespace {

// AMX-TILE and AMX-INT8 in CPUID, and Linux's permission to use the tile data state (a 8 KiB
// XSAVE component the kernel enables per process on request). Asked once per process.
bool amx_granted() {
  static const bool granted = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    if (!tile || !int8) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return granted;
}

}  // namespace

bool cpu_isa_supported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
    case CpuIsa::kAvx512:
      return cpu_isa_supported(CpuIsa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
             __builtin_cpu_supports("avx512bf16");
    case CpuIsa::kAmx:
      return cpu_isa_supported(CpuIsa::kAvx512) && amx_granted();
    case CpuIsa::kAvx512Groups:
      return cpu_isa_supported(CpuIsa::kAvx512);
  }
  return false;
}

CpuIsa best_cpu_isa() {
  if (cpu_isa_supported(CpuIsa::kAmx)) return CpuIsa::kAmx;
  // The group order by VNNI over avx512's float lanes: on a 2-core Zen 4 VM, prompts 2.3x as
  // fast, decode the same to 1.3x (docs/PERFORMANCE.md, "Integer group sums").
  if (cpu_isa_supported(CpuIsa::kAvx512Groups)) return CpuIsa::kAvx512Groups;
  if (cpu_isa_supported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  if (name == "scalar") return CpuIsa::kScalar;
  if (name == "avx2") return CpuIsa::kAvx2;
  if (name == "avx512") return CpuIsa::kAvx512;
  if (name == "amx") return CpuIsa::kAmx;
  if (name == "avx512-groups") return CpuIsa::kAvx512Groups;
  return std::nullopt;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAmx:
      return "amx";
    case CpuIsa::kAvx512Groups:
      return "avx512-groups";
  }
  return "?";
}

CpuBackend::CpuBackend(const CpuBackendConfig& cfg) : pool_(cfg.n_threads) {
  CpuIsa isa = best_cpu_isa();
  if (cfg.isa) {
    isa = *cfg.isa;
  } else if (const char* env = std::getenv("TEMPO9_CPU_ISA"); env != nullptr && *env) {
    auto parsed = parse_cpu_isa(env);
    if (parsed && cpu_isa_supported(*parsed))
      isa = *parsed;
    else
      T9_LOG_WARN("TEMPO9_CPU_ISA={} is unknown or unsupported here; using {}", env,
                  cpu_isa_name(isa));
  }
  set_isa(isa);
  thread_scratch_.resize(static_cast<size_t>(pool_.n_threads()));
  int rows = cfg.decode_rows;
  if (const char* env = std::getenv("TEMPO9_CPU_DECODE_ROWS"); rows == 0 && env != nullptr && *env)
    rows = std::atoi(env);
  T9_CHECK(rows == 0 || rows == 1 || rows == 4, "decode rows {}: 0 (measure), 1 or 4", rows);
  using Order = cpu::RowOrderProbe::Order;
  row_order_ = cpu::RowOrderProbe(rows == 1   ? Order::kOneRow
                                  : rows == 4 ? Order::kTile
                                              : Order::kProbing);
}

CpuBackend::~CpuBackend() = default;

void CpuBackend::set_isa(CpuIsa isa) {
  T9_CHECK(cpu_isa_supported(isa), "CPU ISA {} is not supported here", cpu_isa_name(isa));
  isa_ = isa;
  const bool avx512 = isa == CpuIsa::kAvx512 || isa == CpuIsa::kAmx || isa == CpuIsa::kAvx512Groups;
  kernels_ = avx512                 ? &cpu::kernels_avx512()
             : isa == CpuIsa::kAvx2 ? &cpu::kernels_avx2()
                                    : &cpu::kernels_scalar();
}

std::string CpuBackend::name() const {
  return fmt::format("cpu ({}, {} threads)", cpu_isa_name(isa_), n_threads());
}

std::vector<uint8_t>& CpuBackend::thread_scratch(int thread, size_t n_bytes) {
  auto& s = thread_scratch_[static_cast<size_t>(thread)];
  if (s.size() < n_bytes) s.resize(n_bytes);
  return s;
}

// ---- memory ----

Result<Buffer*> CpuBackend::alloc(size_t n_bytes) {
  // Buffers of 2 MiB and more (activations of a prefill) get transparent huge pages: matmul
  // writes y a row (n_out floats, often > 4 KiB) apart per activation row, and with 4 KiB pages
  // nearly every such store missed the TLB.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = n_bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (std::max<size_t>(n_bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p != nullptr && align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // a hint; may fail
  if (p == nullptr) return error("cpu backend: cannot allocate {} bytes", n_bytes);
  return new Buffer{p, n_bytes, true};
}

void CpuBackend::free(Buffer* buf) {
  if (buf == nullptr) return;
  if (buf->owned) std::free(buf->device_ptr);
  delete buf;
}

Result<Buffer*> CpuBackend::upload_weights(const void* host, size_t n_bytes) {
  return new Buffer{const_cast<void*>(host), n_bytes, false,
                    true};  // zero copy; ops never write it
}

void CpuBackend::upload(Buffer* dst, size_t offset, const void* host, size_t n_bytes) {
  T9_CHECK(dst != nullptr && offset + n_bytes <= dst->n_bytes, "upload past the buffer end");
  std::memcpy(static_cast<uint8_t*>(dst->device_ptr) + offset, host, n_bytes);
}

void CpuBackend::download(const Buffer* src, size_t offset, void* host, size_t n_bytes) {
  T9_CHECK(src != nullptr && offset + n_bytes <= src->n_bytes, "download past the buffer end");
  std::memcpy(host, static_cast<const uint8_t*>(src->device_ptr) + offset, n_bytes);
}

// ---- row ops ----

void CpuBackend::take_tokens(const Tensor& prev, const Tensor& ids) {
  T9_CHECK(prev.type == GgmlType::I32 && prev.is_contiguous() && ids.type == GgmlType::I32 &&
               ids.is_contiguous(),
           "take_tokens: prev and ids must be contiguous I32");
  const auto* p = reinterpret_cast<const int32_t*>(base_ptr(prev));
  auto* id = reinterpret_cast<int32_t*>(base_ptr(ids));
  for (int64_t i = 0; i < ids.n_elements(); ++i) {
    if (id[i] >= 0) continue;
    const int64_t r = -1 - static_cast<int64_t>(id[i]);
    T9_CHECK(r < prev.n_elements(), "take_tokens: row {} of {}", r, prev.n_elements());
    id[i] = p[r];
  }
}

void CpuBackend::get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) {
  T9_CHECK(ids.type == GgmlType::I32 && ids.nb[0] == 4, "get_rows: ids must be I32");
  check_f32_rows(out, "get_rows out");
  T9_CHECK(out.ne[0] == table.ne[0] && out.n_rows() == ids.n_elements(), "get_rows: shapes");
  const auto* id = reinterpret_cast<const int32_t*>(base_ptr(ids));
  for (int64_t i = 0; i < ids.n_elements(); ++i) {
    T9_CHECK(id[i] >= 0 && id[i] < table.ne[1], "get_rows: id {} of {} rows", id[i], table.ne[1]);
    dequantize_row(table.type, cpu::row_ptr(table, id[i]), f32_row(out, i), table.ne[0]);
  }
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, float weight_bias,
                          const Tensor& out) {
  check_f32_rows(x, "rms_norm x");
  check_f32_rows(out, "rms_norm out");
  check_same_shape(x, out, "rms_norm");
  const int64_t n = x.ne[0];
  const float* w = nullptr;
  if (weight.valid()) {
    check_f32_rows(weight, "rms_norm weight");
    T9_CHECK(weight.ne[0] == n, "rms_norm weight has {} elements, rows {}", weight.ne[0], n);
    w = reinterpret_cast<const float*>(base_ptr(weight));
  }
  for (int64_t r = 0; r < x.n_rows(); ++r) {
    const float* xr = f32_row(x, r);
    float* yr = f32_row(out, r);
    double ss = 0.0;  // double: the row sum must not lose the small elements of long rows
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * (w ? w[i] + weight_bias : 1.0f);
  }
}

namespace {

template <typename Fn>
void binary_op(const Tensor& a, const Tensor& b, const Tensor& out, const char* what, Fn fn) {
  check_f32_rows(a, what);
  check_f32_rows(b, what);
  check_f32_rows(out, what);
  check_same_shape(a, out, what);
  const bool bcast = b.n_rows() == 1;
  T9_CHECK(b.ne[0] == a.ne[0] && (bcast || b.ne == a.ne), "{}: b must be a's shape or one row",
           what);
  for (int64_t r = 0; r < a.n_rows(); ++r) {
    const float* ar = f32_row(a, r);
    const float* br = f32_row(b, bcast ? 0 : r);
    float* yr = f32_row(out, r);
    for (int64_t i = 0; i < a.ne[0]; ++i) yr[i] = fn(ar[i], br[i]);
  }
}

template <typename Fn>
void unary_op(const Tensor& x, const Tensor& out, const char* what, Fn fn) {
  check_f32_rows(x, what);
  check_f32_rows(out, what);
  check_same_shape(x, out, what);
  for (int64_t r = 0; r < x.n_rows(); ++r) {
    const float* xr = f32_row(x, r);
    float* yr = f32_row(out, r);
    for (int64_t i = 0; i < x.ne[0]; ++i) yr[i] = fn(xr[i]);
  }
}

inline float silu(float v) {
  return v / (1.0f + std::exp(-v));
}

// ggml's GELU tanh approximation.
inline float gelu_tanh(float v) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + kCoef * v * v)));
}

}  // namespace

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  binary_op(a, b, out, "add", [](float p, float q) { return p + q; });
}

void CpuBackend::mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  binary_op(a, b, out, "mul", [](float p, float q) { return p * q; });
}

void CpuBackend::scale(const Tensor& x, float s, const Tensor& out) {
  unary_op(x, out, "scale", [s](float v) { return v * s; });
}

void CpuBackend::unary(const Tensor& x, UnaryKind kind, const Tensor& out) {
  if (kernels_->glu_row != nullptr) {
    check_f32_rows(x, "unary x");
    check_f32_rows(out, "unary out");
    check_same_shape(x, out, "unary");
    for (int64_t r = 0; r < x.n_rows(); ++r)
      kernels_->glu_row(kind == UnaryKind::kGeluTanh, f32_row(x, r), nullptr, x.ne[0],
                        f32_row(out, r));
    return;
  }
  if (kind == UnaryKind::kSilu)
    unary_op(x, out, "silu", silu);
  else
    unary_op(x, out, "gelu", gelu_tanh);
}

void CpuBackend::softcap(const Tensor& x, float c, const Tensor& out) {
  T9_CHECK(c > 0.0f, "softcap {} must be positive", c);
  unary_op(x, out, "softcap", [c](float v) { return c * std::tanh(v / c); });
}

void CpuBackend::glu(const Tensor& gate, const Tensor& up, GluKind kind, const Tensor& out) {
  T9_CHECK(up.ne == gate.ne, "glu: gate and up shapes differ");
  if (kernels_->glu_row != nullptr) {
    for (const Tensor* t : {&gate, &up, &out}) check_f32_rows(*t, "glu");
    check_same_shape(gate, out, "glu");
    for (int64_t r = 0; r < gate.n_rows(); ++r)
      kernels_->glu_row(kind == GluKind::kGeGLU, f32_row(gate, r), f32_row(up, r), gate.ne[0],
                        f32_row(out, r));
    return;
  }
  if (kind == GluKind::kSwiGLU)
    binary_op(gate, up, out, "swiglu", [](float g, float u) { return silu(g) * u; });
  else
    binary_op(gate, up, out, "geglu", [](float g, float u) { return gelu_tanh(g) * u; });
}

// ---- sampling helpers ----

void CpuBackend::argmax(const Tensor& logits, const Tensor& out) {
  check_f32_rows(logits, "argmax logits");
  T9_CHECK(out.type == GgmlType::I32 && out.n_elements() == logits.n_rows(), "argmax: out");
  auto* o = reinterpret_cast<int32_t*>(base_ptr(out));
  for (int64_t r = 0; r < logits.n_rows(); ++r) {
    o[r] = static_cast<int32_t>(first_argmax(f32_row(logits, r), logits.ne[0]));
  }
}

// The host sampler's own functions: the CPU backend never answers -1.
void CpuBackend::sample(const Tensor& logits, const Tensor& params, const Tensor& out) {
  check_f32_rows(logits, "sample logits");
  const int64_t n = logits.n_rows();
  T9_CHECK(params.type == GgmlType::I32 && params.ne[0] == 6 && params.n_rows() == n &&
               params.is_contiguous(),
           "sample: params must be I32 [{}, 6]", n);
  T9_CHECK(out.type == GgmlType::I32 && out.n_elements() == n, "sample: out");
  const auto* ps = reinterpret_cast<const RowSampling*>(base_ptr(params));
  auto* o = reinterpret_cast<int32_t*>(base_ptr(out));
  for (int64_t r = 0; r < n; ++r)
    o[r] = sample_row({f32_row(logits, r), static_cast<size_t>(logits.ne[0])}, ps[r]);
}

void CpuBackend::logprobs(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                          const Tensor& ids) {
  check_f32_rows(logits, "logprobs logits");
  check_f32_rows(out, "logprobs out");
  check_logprobs_args(logits, tokens, k, out, ids);
  const int64_t n = logits.n_rows();
  const auto* t = reinterpret_cast<const int32_t*>(base_ptr(tokens));
  for (int64_t r = 0; r < n; ++r) {
    float* o = f32_row(out, r);
    row_logprobs({f32_row(logits, r), static_cast<size_t>(logits.ne[0])}, t[r], k, o,
                 k > 0 ? reinterpret_cast<int32_t*>(base_ptr(ids)) + r * k : nullptr, o + 1);
  }
}

void CpuBackend::adjust_logits(const Tensor& logits, const Tensor& edits, const Tensor& pending,
                               const Tensor& ids) {
  check_f32_rows(logits, "adjust_logits logits");
  T9_CHECK(edits.type == GgmlType::I32 && edits.ne[0] == 8 && edits.is_contiguous(),
           "adjust_logits: edits must be I32 [n, 8]");
  std::span<const PendingEdit> p;
  std::span<const int32_t> id;
  if (pending.valid()) {
    T9_CHECK(pending.type == GgmlType::I32 && pending.ne[0] == 4 && pending.is_contiguous(),
             "adjust_logits: pending must be I32 [n, 4]");
    T9_CHECK(ids.valid() && ids.type == GgmlType::I32 && ids.is_contiguous(),
             "adjust_logits: pending edits need the call's ids (I32)");
    p = {reinterpret_cast<const PendingEdit*>(base_ptr(pending)),
         static_cast<size_t>(pending.n_rows())};
    id = {reinterpret_cast<const int32_t*>(base_ptr(ids)), static_cast<size_t>(ids.n_elements())};
  }
  // Rows one stride apart (a view of rows of a matrix, as the model's logits are).
  T9_CHECK(logits.nb[1] % 4 == 0 &&
               (logits.ne[2] == 1 || logits.nb[2] == logits.ne[1] * logits.nb[1]) &&
               (logits.ne[3] == 1 || logits.nb[3] == logits.ne[2] * logits.nb[2]),
           "adjust_logits: logits rows must be evenly spaced");
  const LogitRowsView rows{f32_row(logits, 0), logits.n_rows(), logits.ne[0],
                           static_cast<int64_t>(logits.nb[1] / 4)};
  const bool ok = apply_logit_edits(
      rows,
      {reinterpret_cast<const LogitEdit*>(base_ptr(edits)), static_cast<size_t>(edits.n_rows())}, p,
      id);
  T9_CHECK(ok, "adjust_logits: an edit names a row, token or input out of range");
}

void CpuBackend::top_k(const Tensor& logits, int k, const Tensor& ids, const Tensor& values) {
  check_f32_rows(logits, "top_k logits");
  check_f32_rows(values, "top_k values");
  T9_CHECK(k > 0 && k <= logits.ne[0], "top_k: k {} of {}", k, logits.ne[0]);
  T9_CHECK(ids.type == GgmlType::I32 && ids.ne[0] == k && ids.n_rows() == logits.n_rows() &&
               values.ne[0] == k && values.n_rows() == logits.n_rows(),
           "top_k: out shapes");
  std::vector<int32_t> idx(static_cast<size_t>(logits.ne[0]));
  for (int64_t r = 0; r < logits.n_rows(); ++r) {
    const float* x = f32_row(logits, r);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [x](int32_t p, int32_t q) { return x[p] > x[q] || (x[p] == x[q] && p < q); });
    auto* io = reinterpret_cast<int32_t*>(cpu::row_ptr(ids, r));
    float* vo = f32_row(values, r);
    for (int i = 0; i < k; ++i) {
      io[i] = idx[static_cast<size_t>(i)];
      vo[i] = x[idx[static_cast<size_t>(i)]];
    }
  }
}

void CpuBackend::softmax(const Tensor& x, const Tensor& out) {
  check_f32_rows(x, "softmax x");
  check_f32_rows(out, "softmax out");
  check_same_shape(x, out, "softmax");
  for (int64_t r = 0; r < x.n_rows(); ++r) {
    const float* xr = f32_row(x, r);
    float* yr = f32_row(out, r);
    const float mx = *std::max_element(xr, xr + x.ne[0]);
    double sum = 0.0;
    for (int64_t i = 0; i < x.ne[0]; ++i) {
      yr[i] = std::exp(xr[i] - mx);
      sum += yr[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < x.ne[0]; ++i) yr[i] *= inv;
  }
}

void CpuBackend::copy(const Tensor& x, const Tensor& out) {
  T9_CHECK(x.n_elements() == out.n_elements() && x.ne[0] == out.ne[0], "copy: shapes differ");
  auto load = [&](const uint8_t* p, int64_t i) -> float {
    switch (x.type) {
      case GgmlType::F32:
        return reinterpret_cast<const float*>(p)[i];
      case GgmlType::F16:
        return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      case GgmlType::BF16:
        return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      default:
        T9_CHECK(false, "copy from {}", type_name(x.type));
    }
    return 0.0f;
  };
  for (int64_t r = 0; r < x.n_rows(); ++r) {
    const uint8_t* src = cpu::row_ptr(x, r);
    uint8_t* dst = cpu::row_ptr(out, r);
    for (int64_t i = 0; i < x.ne[0]; ++i) {
      const float v = load(src, i);
      switch (out.type) {
        case GgmlType::F32:
          reinterpret_cast<float*>(dst)[i] = v;
          break;
        case GgmlType::F16:
          reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(v);
          break;
        case GgmlType::BF16:
          reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(v);
          break;
        default:
          T9_CHECK(false, "copy to {}", type_name(out.type));
      }
    }
  }
}

}  // namespace t9
