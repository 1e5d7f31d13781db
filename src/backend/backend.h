// The Backend interface: device memory plus the ops a forward pass needs. One interface for the
// CPU backend (backend/cpu) and the CUDA backend (backend/cuda, later), so it assumes nothing a GPU
// cannot do:
//   - Memory lives in Buffers the backend owns. Model code never dereferences tensor memory; it
//     moves host data in and out only through upload()/download().
//   - Ops are enqueued in call order and may run asynchronously. The only host-visible effects are
//     download() destinations, which are valid after sync(). (The CPU backend runs each op before
//     returning; CUDA enqueues on one stream.)
//   - Every op takes batched rows of many sequences at once; attention and write_kv read
//     per-sequence metadata (AttnSeq) and block tables from device tensors.
//
// Shapes: ggml order, ne[0] is the contiguous (fastest) dimension. Comments write shapes outermost
// first, like C arrays: `[n_tokens, n_embd]` means ne[1] = n_tokens, ne[0] = n_embd. Rows are
// contiguous (nb[0] == element size) for every op; higher dims may be strided (views).
//
// Shape or type mismatches passed to an op are bugs in the caller (the model code validated the
// file first), so ops T9_CHECK them. Allocation failure is resource pressure and returns Result.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/result.h"
#include "quant/types.h"

namespace t9 {

// A block of backend memory. `device_ptr` is an address in the backend's memory space (host
// memory for the CPU backend, device memory for CUDA); only backend code may dereference it.
struct Buffer {
  void* device_ptr = nullptr;
  size_t n_bytes = 0;
  bool owned = true;  // false: wraps memory the backend does not free (mmapped weights on CPU)
};

// A typed view into a Buffer. Cheap to copy; does not own memory.
struct Tensor {
  Buffer* buf = nullptr;
  size_t offset = 0;  // bytes from buf->device_ptr
  GgmlType type = GgmlType::F32;
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // elements per dim, ne[0] contiguous
  std::array<size_t, 4> nb{0, 0, 0, 0};   // byte strides; nb[1] = bytes of one ne[0] row

  bool valid() const { return buf != nullptr; }
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }  // rows of ne[0] elements
  // True when all rows are packed back to back (a plain [n_rows, ne[0]] array).
  bool is_contiguous() const;
  size_t n_bytes() const;  // bytes spanned when contiguous
};

// A contiguous tensor at `offset` in `buf`; ne given innermost first (ne0 = row length).
Tensor make_tensor(Buffer* buf, size_t offset, GgmlType type, int64_t ne0, int64_t ne1 = 1,
                   int64_t ne2 = 1, int64_t ne3 = 1);
// Rows [first, first + n) of dim 1 (e.g. the last token's hidden state for the logits).
Tensor view_rows(const Tensor& t, int64_t first, int64_t n);
// Same bytes with another shape (t must be contiguous and have the same element count).
Tensor reshape(const Tensor& t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);

// Per-sequence metadata for write_kv and attention, uploaded as an I32 tensor [n_seqs, 4]
// (exactly these four int32 fields, in this order). Sequence s owns query/token rows
// [q_begin, q_begin + n_q) of the batch; those tokens sit at positions n_past .. n_past + n_q - 1,
// so after this step its context holds n_past + n_q tokens. Its block table is
// block_tables[block_table_offset .. + ceil((n_past + n_q) / block_size)).
struct AttnSeq {
  int32_t q_begin;
  int32_t n_q;
  int32_t n_past;
  int32_t block_table_offset;
};
static_assert(sizeof(AttnSeq) == 16);

enum class RopeLayout {
  kNormal,  // rotate pairs (x[2i], x[2i+1]) — llama/ggml "normal" mode
  kNeox,    // rotate pairs (x[i], x[i + n_rot/2]) — NeoX / Qwen / Gemma
};

// RoPE parameters; the YaRN fields follow ggml's rope_yarn so GGUF metadata maps 1:1.
struct RopeParams {
  RopeLayout layout = RopeLayout::kNormal;
  int n_rot = 0;               // rotated dims (<= head_dim); the rest pass through unchanged
  float freq_base = 10000.0f;  // per call: gemma3 local layers use 10000, global ones 1e6
  float freq_scale = 1.0f;     // linear scaling: 1 / rope.scaling.factor
  // YaRN (ext_factor 0 disables it): mixes interpolated and extrapolated angles per dim.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;  // magnitude scale applied to cos/sin
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;  // rope.scaling.original_context_length (needed when ext_factor != 0)
};

struct AttnParams {
  int n_head = 0;
  int n_kv_head = 0;       // GQA: query head h reads kv head h / (n_head / n_kv_head)
  int head_dim = 0;        // of K and V
  int block_size = 0;      // tokens per KV block
  int n_seqs = 0;          // rows of the AttnSeq tensor
  int max_ctx = 0;         // max over sequences of n_past + n_q (launch sizing on CUDA)
  float scale = 1.0f;      // logits = scale * q.k (usually 1/sqrt(head_dim))
  float softcap = 0.0f;    // > 0: logits = softcap * tanh(logits / softcap) (gemma2)
  int sliding_window = 0;  // > 0: a query at pos p sees keys with pos > p - sliding_window
};

enum class GluKind {
  kSwiGLU,  // silu(gate) * up
  kGeGLU,   // gelu_tanh(gate) * up (ggml's tanh approximation)
};

enum class UnaryKind { kSilu, kGeluTanh };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- memory ----
  virtual Result<Buffer*> alloc(size_t n_bytes) = 0;
  virtual void free(Buffer* buf) = 0;
  // Makes host weight bytes (typically an mmapped GGUF region that outlives the backend's use of
  // them) usable by ops. CPU: wraps the pointer, zero copy. CUDA: copies to the device.
  virtual Result<Buffer*> upload_weights(const void* host, size_t n_bytes) = 0;
  // Copies n_bytes from host into dst at byte offset. The host bytes are consumed before this
  // returns, so the caller may reuse them at once (token ids, positions, block tables, AttnSeq).
  virtual void upload(Buffer* dst, size_t offset, const void* host, size_t n_bytes) = 0;
  // Enqueues a copy to host; `host` is valid only after sync().
  virtual void download(const Buffer* src, size_t offset, void* host, size_t n_bytes) = 0;
  virtual void sync() = 0;

  // ---- ops (out may alias the input for elementwise ops unless said otherwise) ----

  // out[i, :] = dequantize(table[ids[i], :]). table: [n_vocab, n_embd] any supported type;
  // ids: I32 [n]; out: F32 [n, n_embd]. Ids out of range are a caller bug (tokenizer validated).
  virtual void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;

  // out = x / sqrt(mean(x^2) + eps) * (weight + weight_bias), per row of ne[0]. weight: F32 [ne0]
  // or invalid (no weight). weight_bias = 1 gives Gemma's (1 + w) without copying the weights.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, float weight_bias,
                        const Tensor& out) = 0;

  // Elementwise on F32; b broadcasts over a: b has a's shape, or b is one row [ne0] applied to
  // every row of a. out has a's shape.
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void mul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void scale(const Tensor& x, float s, const Tensor& out) = 0;
  virtual void unary(const Tensor& x, UnaryKind kind, const Tensor& out) = 0;
  // out = c * tanh(x / c) (gemma2 final-logit soft-capping).
  virtual void softcap(const Tensor& x, float c, const Tensor& out) = 0;
  // out = act(gate) * up; all F32 [n, d].
  virtual void glu(const Tensor& gate, const Tensor& up, GluKind kind, const Tensor& out) = 0;

  // Rotates x: F32 [n_tokens, n_heads, head_dim] in place-compatible (out may be x).
  // positions: I32 [n_tokens].
  virtual void rope(const Tensor& x, const Tensor& positions, const RopeParams& p,
                    const Tensor& out) = 0;

  // y = x @ w^T (+ bias). w: [n_out, n_in] any supported weight type; x: F32 [n_tokens, n_in];
  // bias: F32 [n_out] or invalid; y: F32 [n_tokens, n_out], must not alias x. Batch-invariant:
  // row t of y depends only on row t of x (bitwise), never on n_tokens or the thread count.
  // Quantized weights use 8-bit activations (CPU: per-32 blocks), so results differ from an
  // F32 reference by the activation rounding (tests/ops/matmul_test.cpp bounds it).
  virtual void matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y) = 0;

  // Stores this step's K and V rows in the paged pool of one layer. The pool should be F16: half
  // the bytes of F32 for the most bandwidth-bound op, as ggml does by default, at ~5e-4 relative
  // rounding per element; F32 is accepted for tests and debugging. k, v: F32
  // [n_tokens, n_kv_head, head_dim]; k_cache, v_cache: F16 or F32
  // [n_blocks * block_size, n_kv_head, head_dim]. Token row q_begin + j of sequence s goes to slot
  // block_tables[s.block_table_offset + pos / block_size] * block_size + pos % block_size, with
  // pos = s.n_past + j. seqs: I32 [n_seqs, 4] (AttnSeq); block_tables: I32 [*].
  virtual void write_kv(const Tensor& k, const Tensor& v, const Tensor& k_cache,
                        const Tensor& v_cache, const Tensor& seqs, const Tensor& block_tables,
                        const AttnParams& p) = 0;

  // Causal paged attention. q: F32 [n_tokens, n_head, head_dim]; out: F32 same shape. Query row
  // q_begin + j of sequence s (at position n_past + j) attends to that sequence's cached keys at
  // positions [max(0, pos - window + 1), pos] (call write_kv for this step first). Batch-invariant:
  // a fixed reduction order over keys per query, independent of other sequences.
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                         const Tensor& out) = 0;

  // Per row of F32 [n, n_vocab]: out I32 [n] = index of the max (lowest index on ties).
  virtual void argmax(const Tensor& logits, const Tensor& out) = 0;
  // Per row: the k largest, sorted descending (ties: lower index first). ids I32 [n, k],
  // values F32 [n, k].
  virtual void top_k(const Tensor& logits, int k, const Tensor& ids, const Tensor& values) = 0;
  // Per row: out = softmax(x) (F32 [n, d]); out may be x.
  virtual void softmax(const Tensor& x, const Tensor& out) = 0;
  // out = cast(x): same element count, types among F32, F16, BF16.
  virtual void copy(const Tensor& x, const Tensor& out) = 0;
};

// True when `matmul` and `get_rows` accept weights of type t on every backend.
bool backend_supports_weight_type(GgmlType t);

}  // namespace t9
