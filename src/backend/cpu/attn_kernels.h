// Internal to the CPU backend: one attention task, the unit each ISA's attention kernel computes.
//
// A task is up to kAttnMaxQ query vectors of ONE sequence that read ONE KV head (the query heads
// of a GQA group, for one or more query rows), so every key and value row is loaded and converted
// once per task instead of once per query. The kernel transposes the queries into lanes
// (Qt[d][lane]) and walks the keys in position order:
//   pass 1: s[k][lane] = scale * sum_d K[k][d] * Qt[d][lane]   (an FMA chain over d, d ascending)
//           (softcap: s = c * tanh(s / c)); m[lane] = max over the lane's visible keys
//   pass 2: w = exp(s - m) for visible keys, else 0; sum[lane] += w (keys ascending);
//           acc[q] += w[k][q] * V[k] per 16-key tile (keys ascending); out = acc / sum
// Every query's arithmetic depends only on its own position, its visible key range and the
// key/value rows — never on the other queries of the task, on the task split or on threads — so
// attention stays batch- and thread-invariant (docs/ARCHITECTURE.md rule 7).
#pragma once

#include <cstddef>
#include <cstdint>

namespace t9::cpu {

inline constexpr int kAttnMaxQ = 64;   // query vectors per task

struct AttnTask {
  int n_q = 0;                     // query vectors, 1..kAttnMaxQ
  const float* q[kAttnMaxQ] = {};  // [head_dim] each, F32
  float* out[kAttnMaxQ] = {};      // [head_dim] each
  int32_t lo[kAttnMaxQ] = {};      // query i sees keys lo[i]..pos[i] (inclusive)
  int32_t pos[kAttnMaxQ] = {};
  int64_t head_dim = 0;
  // Key position kp lives in pool slot block_ids[kp / block_size] * block_size + kp % block_size
  // (ids checked by the caller for every key the task reads).
  const int32_t* block_ids = nullptr;
  int block_size = 0;
  int block_shift = -1;  // log2(block_size) when it is a power of two (no division per key)
  const uint8_t* k_base = nullptr;  // slot 0 of this KV head in the K pool
  const uint8_t* v_base = nullptr;
  size_t k_stride = 0;  // bytes between consecutive pool slots
  size_t v_stride = 0;
  bool k_f16 = false;  // else F32
  bool v_f16 = false;
  float scale = 1.0f;
  float softcap = 0.0f;  // > 0: logits = softcap * tanh(logits / softcap)

  const uint8_t* k_row(int64_t kp) const { return k_base + slot(kp) * k_stride; }
  const uint8_t* v_row(int64_t kp) const { return v_base + slot(kp) * v_stride; }
  int64_t slot(int64_t kp) const {
    if (block_shift >= 0)
      return (static_cast<int64_t>(block_ids[kp >> block_shift]) << block_shift) +
             (kp & (block_size - 1));
    return static_cast<int64_t>(block_ids[kp / block_size]) * block_size + kp % block_size;
  }
};

// attn_impl.h (plain loops, per-ISA copies) and the AVX-512 kernel.
void attn_task_avx512(const AttnTask& t);

}  // namespace t9::cpu
