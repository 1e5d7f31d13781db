// CPU RoPE, KV writes and paged attention.
//
// Attention runs in tasks of up to 64 query vectors of one sequence that share a KV head
// (attn_kernels.h): each key and value row is read once per task. Each query's arithmetic is
// fixed by its own position and keys, whatever task or thread it lands in, so the result is
// batch-invariant and thread-invariant.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"
#include "quant/half.h"

namespace t9 {
namespace {

// ---- RoPE (ggml's rope_yarn, so GGUF metadata applies unchanged) ----

float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, int i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

// cos/sin of each rotated pair for one position: cs[2 * i] = cos, cs[2 * i + 1] = sin.
void rope_cache(const RopeParams& p, int32_t pos, float* cs) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float low = 0.0f, high = 0.0f;
  if (p.ext_factor != 0.0f) {
    low =
        std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    high = std::min(static_cast<float>(p.n_rot - 1),
                    std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  float theta_extrap = static_cast<float>(pos);
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp, mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float mix = yarn_ramp(low, high, i0) * p.ext_factor;
      theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cs[i0] = std::cos(theta) * mscale;
    cs[i0 + 1] = std::sin(theta) * mscale;
    theta_extrap *= theta_scale;
  }
}

const AttnSeq* seq_table(const Tensor& seqs, const AttnParams& p) {
  T9_CHECK(seqs.type == GgmlType::I32 && seqs.ne[0] == 4 && seqs.n_rows() == p.n_seqs &&
               seqs.is_contiguous(),
           "seqs must be I32 [n_seqs={}, 4]", p.n_seqs);
  return reinterpret_cast<const AttnSeq*>(cpu::base_ptr(seqs));
}

// Pool row of the token at `pos` of sequence s; CHECKs the block table and the pool bounds.
int64_t kv_slot(const AttnSeq& s, const int32_t* tables, int64_t n_tables, int64_t n_slots,
                const AttnParams& p, int64_t pos) {
  const int64_t ti = s.block_table_offset + pos / p.block_size;
  T9_CHECK(ti >= 0 && ti < n_tables, "block table index {} of {}", ti, n_tables);
  const int64_t slot = static_cast<int64_t>(tables[ti]) * p.block_size + pos % p.block_size;
  T9_CHECK(slot >= 0 && slot < n_slots, "kv slot {} of {}", slot, n_slots);
  return slot;
}

void check_cache(const Tensor& c, const AttnParams& p, const char* what) {
  T9_CHECK(c.type == GgmlType::F16 || c.type == GgmlType::F32, "{} must be F16 or F32", what);
  T9_CHECK(c.ne[0] == p.head_dim && c.ne[1] == p.n_kv_head && c.is_contiguous(),
           "{} must be [slots, n_kv_head={}, head_dim={}]", what, p.n_kv_head, p.head_dim);
  T9_CHECK(p.block_size > 0 && c.ne[2] % p.block_size == 0, "{}: slots not whole blocks", what);
}

}  // namespace

void CpuBackend::rope(const Tensor& x, const Tensor& positions, const RopeParams& p,
                      const Tensor& out) {
  cpu::check_f32_rows(x, "rope x");
  cpu::check_f32_rows(out, "rope out");
  cpu::check_same_shape(x, out, "rope");
  const int64_t head_dim = x.ne[0], n_heads = x.ne[1], n_tok = x.ne[2];
  T9_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim, "rope: n_rot {}", p.n_rot);
  T9_CHECK(positions.type == GgmlType::I32 && positions.n_elements() == n_tok,
           "rope: positions must be I32 [{}]", n_tok);
  const auto* pos = reinterpret_cast<const int32_t*>(cpu::base_ptr(positions));
  std::vector<float> cs(static_cast<size_t>(p.n_rot));
  for (int64_t t = 0; t < n_tok; ++t) {
    rope_cache(p, pos[t], cs.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t r = t * n_heads + h;
      const float* xr = cpu::f32_row(x, r);
      float* yr = cpu::f32_row(out, r);
      const int half = p.n_rot / 2;
      for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
        const int a = p.layout == RopeLayout::kNeox ? i0 / 2 : i0;
        const int b = p.layout == RopeLayout::kNeox ? i0 / 2 + half : i0 + 1;
        const float x0 = xr[a], x1 = xr[b], c = cs[i0], s = cs[i0 + 1];
        yr[a] = x0 * c - x1 * s;
        yr[b] = x0 * s + x1 * c;
      }
      if (yr != xr) std::copy(xr + p.n_rot, xr + head_dim, yr + p.n_rot);
    }
  }
}

void CpuBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& k_cache,
                          const Tensor& v_cache, const Tensor& seqs, const Tensor& block_tables,
                          const AttnParams& p) {
  check_cache(k_cache, p, "k_cache");
  check_cache(v_cache, p, "v_cache");
  cpu::check_f32_rows(k, "write_kv k");
  cpu::check_f32_rows(v, "write_kv v");
  T9_CHECK(k.ne[0] == p.head_dim && k.ne[1] == p.n_kv_head && v.ne == k.ne, "write_kv: k/v shape");
  const AttnSeq* s = seq_table(seqs, p);
  const auto* tables = reinterpret_cast<const int32_t*>(cpu::base_ptr(block_tables));
  const int64_t row_floats = p.n_kv_head * p.head_dim;
  for (int i = 0; i < p.n_seqs; ++i) {
    T9_CHECK(s[i].q_begin >= 0 && s[i].n_q >= 0 && s[i].q_begin + s[i].n_q <= k.ne[2],
             "seq {}: rows [{}, +{}) of {}", i, s[i].q_begin, s[i].n_q, k.ne[2]);
    for (int j = 0; j < s[i].n_q; ++j) {
      const int64_t slot =
          kv_slot(s[i], tables, block_tables.n_elements(), k_cache.ne[2], p, s[i].n_past + j);
      for (const auto& [src, dst] : {std::pair{&k, &k_cache}, std::pair{&v, &v_cache}}) {
        const float* from = cpu::f32_row(*src, (s[i].q_begin + j) * p.n_kv_head);
        uint8_t* to = cpu::base_ptr(*dst) + slot * dst->nb[2];
        for (int64_t e = 0; e < row_floats; ++e) {
          if (dst->type == GgmlType::F16)
            reinterpret_cast<uint16_t*>(to)[e] = f32_to_f16(from[e]);
          else
            reinterpret_cast<float*>(to)[e] = from[e];
        }
      }
    }
  }
}

void CpuBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                           const Tensor& out) {
  check_cache(k_cache, p, "k_cache");
  check_cache(v_cache, p, "v_cache");
  cpu::check_f32_rows(q, "attention q");
  cpu::check_f32_rows(out, "attention out");
  cpu::check_same_shape(q, out, "attention");
  T9_CHECK(q.ne[0] == p.head_dim && q.ne[1] == p.n_head, "attention: q must be [n, {}, {}]",
           p.n_head, p.head_dim);
  T9_CHECK(p.n_kv_head > 0 && p.n_head % p.n_kv_head == 0, "attention: n_head {} n_kv_head {}",
           p.n_head, p.n_kv_head);
  const AttnSeq* s = seq_table(seqs, p);
  const auto* tables = reinterpret_cast<const int32_t*>(cpu::base_ptr(block_tables));
  const int64_t n_tables = block_tables.n_elements();
  const int64_t group = p.n_head / p.n_kv_head;
  T9_CHECK(v_cache.ne[2] == k_cache.ne[2], "attention: k_cache and v_cache slot counts differ");
  const int64_t n_blocks_k = k_cache.ne[2] / p.block_size;
  // Tasks (attn_kernels.h): one sequence, one KV head, `rows` query rows x `heads` of its query
  // heads. The split never changes a result; it only sizes the work: whole GQA groups and
  // several rows share each key row load, unless that leaves too few tasks for the threads
  // (single-sequence decode), then one head per task.
  struct TaskRef {
    int seq;
    int32_t row0, n_rows;
    int32_t kv_head, head0, n_heads;
  };
  std::vector<TaskRef> tasks;
  int64_t n_rows_total = 0;
  for (int i = 0; i < p.n_seqs; ++i) {
    T9_CHECK(s[i].q_begin >= 0 && s[i].n_q >= 0 && s[i].q_begin + s[i].n_q <= q.ne[2],
             "seq {}: rows [{}, +{}) of {}", i, s[i].q_begin, s[i].n_q, q.ne[2]);
    if (s[i].n_q == 0) continue;
    n_rows_total += s[i].n_q;
    // Every block the sequence's keys live in, checked once here (the kernels do not check).
    const int64_t n_keys = s[i].n_past + s[i].n_q;
    for (int64_t b = 0; b < (n_keys + p.block_size - 1) / p.block_size; ++b) {
      const int64_t ti = s[i].block_table_offset + b;
      T9_CHECK(ti >= 0 && ti < n_tables, "block table index {} of {}", ti, n_tables);
      T9_CHECK(tables[ti] >= 0 && tables[ti] < n_blocks_k, "kv block {} of {}", tables[ti],
               n_blocks_k);
    }
  }
  const int64_t want_tasks = 2 * static_cast<int64_t>(pool_.n_threads());
  const bool split_heads = group > cpu::kAttnMaxQ || n_rows_total * p.n_kv_head < want_tasks;
  const int32_t heads = split_heads ? 1 : static_cast<int32_t>(group);
  const int32_t rows = std::max<int32_t>(1, cpu::kAttnMaxQ / heads);
  for (int i = 0; i < p.n_seqs; ++i)
    for (int32_t r0 = 0; r0 < s[i].n_q; r0 += rows)
      for (int32_t g = 0; g < p.n_kv_head; ++g)
        for (int32_t h0 = 0; h0 < group; h0 += heads)
          tasks.push_back({i, r0, std::min(rows, s[i].n_q - r0), g,
                           static_cast<int32_t>(g * group + h0), heads});
  const cpu::MatmulKernels& kern = *kernels_;
  // Causal tasks grow in cost down the batch: claimed one at a time, they keep threads even.
  pool_.run_chunks(static_cast<int64_t>(tasks.size()), [&](int64_t ti, int) {
    const TaskRef& tr = tasks[static_cast<size_t>(ti)];
    const AttnSeq& sq = s[tr.seq];
    cpu::AttnTask t;
    t.head_dim = p.head_dim;
    t.block_ids = tables + sq.block_table_offset;
    t.block_size = p.block_size;
    if ((p.block_size & (p.block_size - 1)) == 0)
      t.block_shift = std::countr_zero(static_cast<unsigned>(p.block_size));
    t.k_base = cpu::base_ptr(k_cache) + tr.kv_head * k_cache.nb[1];
    t.v_base = cpu::base_ptr(v_cache) + tr.kv_head * v_cache.nb[1];
    t.k_stride = k_cache.nb[2];
    t.v_stride = v_cache.nb[2];
    t.k_f16 = k_cache.type == GgmlType::F16;
    t.v_f16 = v_cache.type == GgmlType::F16;
    t.scale = p.scale;
    t.softcap = p.softcap;
    for (int32_t j = tr.row0; j < tr.row0 + tr.n_rows; ++j) {
      const int32_t pos = sq.n_past + j;
      const int32_t lo = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      for (int32_t h = tr.head0; h < tr.head0 + tr.n_heads; ++h) {
        const int64_t r = static_cast<int64_t>(sq.q_begin + j) * p.n_head + h;
        t.q[t.n_q] = cpu::f32_row(q, r);
        t.out[t.n_q] = cpu::f32_row(out, r);
        t.lo[t.n_q] = lo;
        t.pos[t.n_q] = pos;
        t.n_q++;
      }
    }
    kern.attn_task(t);
  });
}

}  // namespace t9
