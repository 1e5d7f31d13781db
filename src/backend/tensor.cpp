// Tensor view helpers, the backend-independent weight-type list and shared argument checks.
#include "backend/backend.h"

namespace t9 {

bool Tensor::is_contiguous() const {
  const auto& tr = traits(type);
  if (nb[0] != tr.block_bytes) return false;
  if (nb[1] != row_bytes(type, ne[0])) return false;
  return nb[2] == nb[1] * static_cast<size_t>(ne[1]) && nb[3] == nb[2] * static_cast<size_t>(ne[2]);
}

size_t Tensor::n_bytes() const {
  return nb[3] * static_cast<size_t>(ne[3]);
}

Tensor make_tensor(Buffer* buf, size_t offset, GgmlType type, int64_t ne0, int64_t ne1, int64_t ne2,
                   int64_t ne3) {
  Tensor t;
  t.buf = buf;
  t.offset = offset;
  t.type = type;
  t.ne = {ne0, ne1, ne2, ne3};
  t.nb[0] = traits(type).block_bytes;
  t.nb[1] = row_bytes(type, ne0);
  t.nb[2] = t.nb[1] * static_cast<size_t>(ne1);
  t.nb[3] = t.nb[2] * static_cast<size_t>(ne2);
  if (buf != nullptr) {
    T9_CHECK(offset + t.n_bytes() <= buf->n_bytes, "tensor [{} B at {}] exceeds buffer of {} B",
             t.n_bytes(), offset, buf->n_bytes);
  }
  return t;
}

Tensor view_rows(const Tensor& t, int64_t first, int64_t n) {
  T9_CHECK(first >= 0 && n >= 0 && first + n <= t.ne[1], "rows [{}, {}) of {}", first, first + n,
           t.ne[1]);
  Tensor v = t;
  v.offset = t.offset + static_cast<size_t>(first) * t.nb[1];
  v.ne[1] = n;
  return v;
}

Tensor reshape(const Tensor& t, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  T9_CHECK(t.is_contiguous(), "reshape of a non-contiguous tensor");
  T9_CHECK(ne0 * ne1 * ne2 * ne3 == t.n_elements(), "reshape changes the element count");
  return make_tensor(t.buf, t.offset, t.type, ne0, ne1, ne2, ne3);
}

bool backend_supports_weight_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

void check_logprobs_args(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                         const Tensor& ids) {
  const int64_t n = logits.n_rows();
  T9_CHECK(k >= 0 && k <= kMaxTopLogprobs && k <= logits.ne[0], "logprobs: k {} of {}", k,
           logits.ne[0]);
  T9_CHECK(logits.ne[0] < INT32_MAX, "logprobs: {} logits per row", logits.ne[0]);
  T9_CHECK(tokens.type == GgmlType::I32 && tokens.n_elements() == n && tokens.is_contiguous(),
           "logprobs: tokens must be I32 [{}]", n);
  T9_CHECK(out.ne[0] == 1 + k && out.n_rows() == n, "logprobs: out must be F32 [{}, {}]", n, 1 + k);
  T9_CHECK(k == 0 || (ids.type == GgmlType::I32 && ids.ne[0] == k && ids.n_rows() == n &&
                      ids.is_contiguous()),
           "logprobs: ids must be I32 [{}, {}]", n, k);
}

}  // namespace t9
