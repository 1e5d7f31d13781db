// The attention task (attn_kernels.h) written as plain loops, included by each ISA's kernel file
// so the compiler vectorizes it for that ISA (T9_ISA_NS gives every ISA its own copy, as in
// unpack_impl.h). The lane loops always run all kAttnMaxQ lanes, so a lane's instruction sequence
// never depends on how many queries share the task.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attn_kernels.h"
#include "quant/half.h"

#ifndef T9_ISA_NS
#error define T9_ISA_NS before including attn_impl.h
#endif

namespace t9::cpu::T9_ISA_NS {

inline void attn_load_row(const uint8_t* row, bool f16, int64_t n, float* dst) {
  if (f16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  } else {
    std::memcpy(dst, row, static_cast<size_t>(n) * sizeof(float));
  }
}

inline void attn_task_portable(const AttnTask& t) {
  constexpr int M = kAttnMaxQ;
  const int64_t hd = t.head_dim;
  const int nq = t.n_q;
  int32_t kmin = std::numeric_limits<int32_t>::max(), kmax = -1;
  for (int i = 0; i < nq; ++i) {
    kmin = std::min(kmin, t.lo[i]);
    kmax = std::max(kmax, t.pos[i]);
  }
  const int64_t nk = kmax - kmin + 1;
  thread_local std::vector<float> qt, s, row, acc;
  qt.assign(static_cast<size_t>(hd * M), 0.0f);
  for (int i = 0; i < nq; ++i)
    for (int64_t d = 0; d < hd; ++d) qt[static_cast<size_t>(d * M + i)] = t.q[i][d];
  s.resize(static_cast<size_t>(nk * M));
  row.resize(static_cast<size_t>(hd));
  float mx[M];
  std::fill(mx, mx + M, -INFINITY);
  for (int64_t kp = kmin; kp <= kmax; ++kp) {
    attn_load_row(t.k_row(kp), t.k_f16, hd, row.data());
    float* sk = s.data() + (kp - kmin) * M;
    float lane[M] = {};
    for (int64_t d = 0; d < hd; ++d) {
      const float kd = row[static_cast<size_t>(d)];
      const float* qd = qt.data() + d * M;
      for (int i = 0; i < M; ++i) lane[i] += kd * qd[i];
    }
    for (int i = 0; i < nq; ++i) {
      float v = lane[i] * t.scale;
      if (t.softcap > 0.0f) v = t.softcap * std::tanh(v / t.softcap);
      sk[i] = v;
      if (kp >= t.lo[i] && kp <= t.pos[i]) mx[i] = std::max(mx[i], v);
    }
  }
  acc.assign(static_cast<size_t>(nq * hd), 0.0f);
  float sum[M] = {};
  for (int64_t kp = kmin; kp <= kmax; ++kp) {
    attn_load_row(t.v_row(kp), t.v_f16, hd, row.data());
    const float* sk = s.data() + (kp - kmin) * M;
    for (int i = 0; i < nq; ++i) {
      if (kp < t.lo[i] || kp > t.pos[i]) continue;
      const float w = std::exp(sk[i] - mx[i]);
      sum[i] += w;
      float* a = acc.data() + i * hd;
      for (int64_t d = 0; d < hd; ++d) a[d] += w * row[static_cast<size_t>(d)];
    }
  }
  for (int i = 0; i < nq; ++i)
    for (int64_t d = 0; d < hd; ++d) t.out[i][d] = acc[static_cast<size_t>(i * hd + d)] / sum[i];
}

}  // namespace t9::cpu::T9_ISA_NS
