// Portable matmul kernels: the fallback on any x86-64 and the reference the SIMD ones are tested
// against (through the public ops).
#define T9_ISA_NS scalar_isa
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/unpack_impl.h"
#include "backend/cpu/attn_impl.h"
#include "core/check.h"

namespace t9::cpu {
namespace {

using namespace scalar_isa;

float dot_int_pair(const UnpackedRow* w, bool wide, const ActRow& x, int64_t n_in) {
  {
    const int r = 0;
    float acc = 0.0f;
    for (int64_t l = 0; l < n_in / 4; ++l) {  // one int32 sum per 4 elements, as the SIMD lanes
      int32_t s = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = 4 * l + k;
        const int32_t wq = wide ? static_cast<int8_t>(w[r].q[i]) : w[r].q[i];
        s += wq * x.q[i];
      }
      acc += w[r].ls[l / 4] * x.d[l / 8] * static_cast<float>(s);
    }
    if (!wide)
      for (int64_t g = 0; g < n_in / 16; ++g) acc += w[r].mn[g] * x.s16[g];
    return acc;
  }
}

void dot_int_scalar(int n_w, const UnpackedRow* w, bool wide, int n_x, const ActRow* x,
                    int64_t n_in, float* out) {
  for (int c = 0; c < n_x; ++c)
    for (int r = 0; r < n_w; ++r) out[c * kTileRows + r] = dot_int_pair(w + r, wide, x[c], n_in);
}

void dot_f32_scalar(int n_w, const float* const* w, const float* x, int64_t n_in, float* out) {
  for (int r = 0; r < n_w; ++r) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n_in; ++i) acc += w[r][i] * x[i];
    out[r] = acc;
  }
}

}  // namespace

const MatmulKernels& kernels_scalar() {
  static const MatmulKernels k{unpack_row,     quantize_act_row, dot_int_scalar, 1,
                               row_to_f32,     dot_f32_scalar,   attn_task_portable, nullptr,
                               nullptr,        nullptr};
  return k;
}

void unsupported_weight_type(GgmlType t) {
  T9_CHECK(false, "cpu matmul: unsupported weight type {}", type_name(t));
  __builtin_unreachable();
}

bool is_wide_type(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS;
}

}  // namespace t9::cpu
