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
#include <optional>
#include <span>
#include <string>

#include "core/check.h"
#include "core/result.h"
#include "core/sampling.h"
#include "quant/types.h"

namespace t9 {

// How a weight buffer's bytes are ordered. kGguf: as in the file (every op reads it). kFrag: a
// Q4_K or Q6_K matrix in mma-fragment order (quant/frag_layout.h), for the matmuls of the
// backend that made it (upload_matmul_weights); no other op reads it.
enum class WeightLayout : uint8_t { kGguf, kFrag };

// A block of backend memory. `device_ptr` is an address in the backend's memory space (host
// memory for the CPU backend, device memory for CUDA); only backend code may dereference it.
struct Buffer {
  void* device_ptr = nullptr;
  size_t n_bytes = 0;
  bool owned = true;     // false: wraps memory the backend does not free (mmapped weights on CPU)
  bool weights = false;  // from upload_weights: read-only to every op
  WeightLayout layout = WeightLayout::kGguf;
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

// Per-sequence metadata of the recurrent-state ops (ssm_conv, gated_delta_net), uploaded as an I32
// tensor [n_seqs, 4] (exactly these fields, in this order). Sequence s owns token rows
// [q_begin, q_begin + n_q) of the batch and state slot `slot` of every recurrent layer; reset != 0
// means its state starts from zero this step (a fresh sequence) instead of the stored one.
struct RecurrentSeq {
  int32_t q_begin;
  int32_t n_q;
  int32_t slot;
  int32_t reset;
};
static_assert(sizeof(RecurrentSeq) == 16);

// Gated DeltaNet (Qwen3-Next / Qwen3.5 linear attention) shapes and options.
struct GdnParams {
  int n_k_heads = 0;  // query/key heads
  int n_v_heads = 0;  // value heads (a multiple of n_k_heads)
  int d_k = 0;        // key head size (the state has d_k rows per value head)
  int d_v = 0;        // value head size
  // Which key head value head h reads: false = grouped, h / (n_v / n_k) (HF order, qwen3next
  // files); true = tiled, h % n_k (llama.cpp's converter reorders Qwen3.5 V heads this way).
  bool v_heads_tiled = false;
  int chunk_size = 64;  // tokens per chunk of the chunked-parallel form
  // A sequence with at least this many tokens in the step uses the chunked form; fewer use the
  // token-by-token recurrence (decode). Both compute the same function (rounding aside).
  int min_chunked_tokens = 2;
  float l2_eps = 1e-6f;  // q, k are L2-normalised: x / sqrt(sum x^2 + eps)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // One line on what the backend's machinery did so far, for `tempo9 run`'s timings (CUDA: its
  // graph windows, replays and captures); empty when there is nothing to say.
  virtual std::string diagnostics() const { return {}; }
  // From here on diagnostics() counts only what follows (tempo9 run: the timed run after its
  // warm-up).
  virtual void mark_diagnostics() {}

  // ---- memory ----
  // Bytes this backend can still allocate where that is bounded apart from host RAM (a GPU's free
  // device memory); nullopt: allocations come from host RAM. Sizes default caps such as the KV
  // pool's (`serve --kv-memory 0.5`).
  virtual std::optional<size_t> free_memory_bytes() const { return std::nullopt; }
  virtual Result<Buffer*> alloc(size_t n_bytes) = 0;
  virtual void free(Buffer* buf) = 0;
  // Makes host weight bytes (typically an mmapped GGUF region that outlives the backend's use of
  // them) usable by ops. CPU: wraps the pointer, zero copy. CUDA: copies to the device. The
  // buffer is read-only to ops (no op may write it; CUDA matmuls read it ahead of their turn).
  virtual Result<Buffer*> upload_weights(const void* host, size_t n_bytes) = 0;
  // upload_weights for a 2-D [n_out, n_in] matrix of `type` that ops read only as a matmul's
  // weights (matmul, matmul_shared_x, MoeDown::down_shexp; never get_rows or matmul_id): the
  // backend may store it in a layout of its own (Buffer::layout). Default: upload_weights.
  virtual Result<Buffer*> upload_matmul_weights(const void* host, size_t n_bytes, GgmlType type,
                                                int64_t n_in, int64_t n_out) {
    (void)type, (void)n_in, (void)n_out;
    return upload_weights(host, n_bytes);
  }
  // Copies n_bytes from host into dst at byte offset. The host bytes are consumed before this
  // returns, so the caller may reuse them at once (token ids, positions, block tables, AttnSeq).
  virtual void upload(Buffer* dst, size_t offset, const void* host, size_t n_bytes) = 0;
  // Enqueues a copy to host; `host` is valid only after sync() (or the wait_submitted() of its
  // unit).
  virtual void download(const Buffer* src, size_t offset, void* host, size_t n_bytes) = 0;
  // Waits for everything enqueued, submitted or not, and delivers the downloads.
  virtual void sync() = 0;
  // Pipelined steps: submit() makes the work enqueued since the last submit() or sync() one unit,
  // which runs while the caller enqueues the next (a decode step recorded while the previous one
  // computes); wait_submitted() waits for the oldest submitted unit not yet waited for and
  // delivers its downloads (nothing to wait for: returns). Backends whose ops compute when
  // called (the CPU) need neither; asynchronous() says whether overlapping pays.
  virtual void submit() {}
  virtual void wait_submitted() {}
  virtual bool asynchronous() const { return false; }

  // ---- ops (out may alias the input for elementwise ops unless said otherwise) ----

  // out[i, :] = dequantize(table[ids[i], :]). table: [n_vocab, n_embd] any supported type;
  // ids: I32 [n]; out: F32 [n, n_embd]. Ids out of range are a caller bug (tokenizer validated).
  virtual void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;
  // In place: every ids[i] < 0 becomes prev[-1 - ids[i]]. ids, prev: I32. The input ids of a
  // pipelined step whose tokens the step before decided on the backend (prev: its argmax
  // output), read there without a round trip to the host. Indices out of range are a caller bug.
  virtual void take_tokens(const Tensor& prev, const Tensor& ids) = 0;

  // out = x / sqrt(mean(x^2) + eps) * (weight + weight_bias), per row of ne[0]. weight: F32 [ne0]
  // or invalid (no weight). weight_bias = 1 gives Gemma's (1 + w) without copying the weights.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, float weight_bias,
                        const Tensor& out) = 0;

  // out = silu(z) * rms_norm(x) (the Gated DeltaNet's gated norm, per value-head row):
  // rms_norm(x, weight, eps, 0, out), then glu(z, out, kSwiGLU, out); those ops' bits (a backend
  // may run them as one). x, z, out: F32 of one shape; out may be x.
  virtual void rms_norm_gated(const Tensor& x, const Tensor& weight, float eps, const Tensor& z,
                              const Tensor& out) {
    rms_norm(x, weight, eps, 0.0f, out);
    glu(z, out, GluKind::kSwiGLU, out);
  }

  // sum = a + b, then out = rms_norm(sum): the residual add and the next block's pre-norm in one
  // op (a backend may fuse them); the same bits as add() then rms_norm(). sum may alias a;
  // a, b, sum and out are F32 [n, ne0] of one shape.
  virtual void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& weight, float eps,
                            float weight_bias, const Tensor& sum, const Tensor& out) {
    add(a, b, sum);
    rms_norm(sum, weight, eps, weight_bias, out);
  }

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

  // write_kv's arguments but k: the cache store a qk_norm_rope may carry.
  struct KvWrite {
    Tensor v, k_cache, v_cache, seqs, block_tables;
    AttnParams p;
  };
  // q and k of an attention layer in place: the per-head RMSNorm (each head row of head_dim
  // elements, weight q_norm / k_norm; skipped for a !valid() weight: no QK-norm), then RoPE at
  // `positions` (rope's layout and parameters); then, with `kv`, write_kv of the rotated k and
  // kv->v. q: F32 [n_tokens, n_head, head_dim], k: F32 [n_tokens, n_kv_head, head_dim], both
  // contiguous. With q_from (q's shape, any strides over whole head rows: the gated attention's
  // query halves), q's values are first copied from there. The same bits as the ops below, which
  // is what it does unless a backend fuses them (CUDA: one launch instead of five or six per
  // layer).
  virtual void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm,
                            const Tensor& k_norm, float eps, float weight_bias,
                            const Tensor& positions, const RopeParams& p,
                            const KvWrite* kv = nullptr, const Tensor* q_from = nullptr) {
    if (q_from != nullptr) copy(*q_from, q);
    const auto head_rows = [](const Tensor& t) { return reshape(t, t.ne[0], t.ne[1] * t.ne[2]); };
    if (q_norm.valid()) rms_norm(head_rows(q), q_norm, eps, weight_bias, head_rows(q));
    if (k_norm.valid()) rms_norm(head_rows(k), k_norm, eps, weight_bias, head_rows(k));
    rope(q, positions, p, q);
    rope(k, positions, p, k);
    if (kv != nullptr)
      write_kv(k, kv->v, kv->k_cache, kv->v_cache, kv->seqs, kv->block_tables, kv->p);
  }

  // y = x @ w^T (+ bias). w: [n_out, n_in] any supported weight type; x: F32 [n_tokens, n_in];
  // bias: F32 [n_out] or invalid; y: F32 [n_tokens, n_out], must not alias x. Batch-invariant:
  // row t of y depends only on row t of x (bitwise), never on n_tokens or the thread count.
  // Quantized weights use 8-bit activations (CPU: per-32 blocks), so results differ from an
  // F32 reference by the activation rounding (tests/ops/matmul_test.cpp bounds it).
  virtual void matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y) = 0;

  // Several matmuls of one input (Q/K/V, gate/up): outs[i].y = x @ outs[i].w^T (+ outs[i].bias),
  // each bit for bit what matmul() gives; an entry with `ids` is matmul_id(w, x viewed as
  // [n, 1, n_in], ids, y) instead (the routed experts' gate and up of a MoE block). A backend may
  // prepare x once for all of them (CUDA rounds it to int8 once instead of once per weight). No y
  // may alias x.
  struct MatmulOut {
    Tensor w, bias, y;
    Tensor ids = {};
  };
  virtual void matmul_shared_x(const Tensor& x, std::span<const MatmulOut> outs) {
    for (const MatmulOut& o : outs) {
      if (o.ids.valid())
        matmul_id(o.w, reshape(x, x.ne[0], 1, x.n_rows()), o.ids, o.y);
      else
        matmul(o.w, x, o.bias, o.y);
    }
  }

  // The MLP's gate and up projections of x and their GLU: gate = x @ gate_w^T, up = x @ up_w^T
  // (one matmul_shared_x), then glu(gate, up, kind, gate). The same bits; a backend may apply the
  // GLU as it stores gate and never write up, so the caller reads only gate afterwards.
  virtual void matmul_glu(const Tensor& x, const Tensor& gate_w, const Tensor& up_w, GluKind kind,
                          const Tensor& gate, const Tensor& up) {
    const MatmulOut outs[] = {{gate_w, Tensor{}, gate}, {up_w, Tensor{}, up}};
    matmul_shared_x(x, outs);
    glu(gate, up, kind, gate);
  }

  // add_rms_norm(a, b, weight, eps, weight_bias, sum, out), then matmul_shared_x(out, outs): a
  // residual add and pre-norm with the first matmuls of the block they feed (the MoE block's router
  // and shared-expert gate). The same bits as those two ops; a backend may run them as one launch
  // (CUDA: a decode row's norm beside small float matmuls, one kernel boundary fewer a layer).
  struct AddRmsNorm {
    Tensor a, b, weight;
    float eps = 0.0f, weight_bias = 0.0f;
    Tensor sum, out;
  };
  virtual void add_rms_norm_matmul(const AddRmsNorm& n, std::span<const MatmulOut> outs) {
    add_rms_norm(n.a, n.b, n.weight, n.eps, n.weight_bias, n.sum, n.out);
    matmul_shared_x(n.out, outs);
  }

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
  // The gated attention's output: attention into out, then out = out * sigmoid(gate)
  // (mul_sigmoid; gate: F32 [n_tokens, n_head, head_dim], any strides over whole head rows). The
  // same bits as the two ops, which is what it does unless a backend fuses them (CUDA: in the
  // attention's output store).
  virtual void gated_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                               const Tensor& gate, const Tensor& out) {
    attention(q, k_cache, v_cache, seqs, block_tables, p, out);
    mul_sigmoid(out, gate, out);
  }
  // One attention layer after its q/k/v projections: qk_norm_rope with the K/V store, then
  // attention (gated_attention with a gate) into out over kv's pools. q and k are scratch here:
  // a backend that fuses the steps (CUDA, for decode rows: the attention kernel normalizes and
  // rotates q and the new k itself) leaves them as they came. out and the pools get the bits of
  // the ops one after the other.
  struct RopeAttention {
    Tensor q, k, q_norm, k_norm, positions;  // qk_norm_rope's arguments
    float eps = 0.0f, weight_bias = 0.0f;
    RopeParams rope;
    KvWrite kv;                      // the store, and the attention's pools, tables and shape
    const Tensor* q_from = nullptr;  // qk_norm_rope's q_from
    const Tensor* gate = nullptr;    // gated_attention's gate
    Tensor out;
  };
  virtual void rope_attention(const RopeAttention& a) {
    qk_norm_rope(a.q, a.k, a.q_norm, a.k_norm, a.eps, a.weight_bias, a.positions, a.rope, &a.kv,
                 a.q_from);
    const KvWrite& kv = a.kv;
    if (a.gate != nullptr)
      gated_attention(a.q, kv.k_cache, kv.v_cache, kv.seqs, kv.block_tables, kv.p, *a.gate, a.out);
    else
      attention(a.q, kv.k_cache, kv.v_cache, kv.seqs, kv.block_tables, kv.p, a.out);
  }

  // Per row of F32 [n, n_vocab]: out I32 [n] = index of the max (lowest index on ties).
  virtual void argmax(const Tensor& logits, const Tensor& out) = 0;
  // Per row of F32 [n, n_vocab]: out I32 [n] = core/sampling.h's sample_row() under the row's
  // settings; params: I32 [n, 6], one RowSampling (24 bytes) per row, bit for bit. A backend may
  // answer -1 for a row whose kept set it cannot settle on its own (CUDA: a top-k above 1024,
  // or top-p / min-p keeping more than the 1024 best); the caller then samples that row itself.
  virtual void sample(const Tensor& logits, const Tensor& params, const Tensor& out) = 0;
  // Per row of F32 [n, n_vocab] and its token (I32 [n], as sample() gives them): out F32
  // [n, 1 + k] = the token's log-probability (NaN for a token -1), then the row's k best
  // (larger first, ties: lower id first), whose ids go to ids I32 [n, k] (unread when k = 0):
  // core/sampling.h's row_logprobs. 0 <= k <= kMaxTopLogprobs.
  virtual void logprobs(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                        const Tensor& ids) = 0;
  // Whether sample() always decides a row with these settings (never -1, whatever the logits).
  virtual bool settles(const RowSampling& s) const {
    (void)s;
    return true;
  }
  // Per edit (I32 [n, 8], one core/sampling.h LogitEdit of 32 bytes each, bit for bit, sorted
  // by (row, token), rows < 0 padding at the end): logits[row, token] = edited_logit(logits[row,
  // token], edit); at most one edit per (row, token). pending (I32 [m, 4], PendingEdit, at most
  // one per row, rows < 0 padding; or invalid: none): the row's token in flight, ids[input] (ids:
  // the call's input token ids, I32), edited as pending_edit says. Reference: apply_logit_edits.
  virtual void adjust_logits(const Tensor& logits, const Tensor& edits, const Tensor& pending,
                             const Tensor& ids) = 0;
  // Per row: the k largest, sorted descending (ties: lower index first). ids I32 [n, k],
  // values F32 [n, k].
  virtual void top_k(const Tensor& logits, int k, const Tensor& ids, const Tensor& values) = 0;
  // Per row: out = softmax(x) (F32 [n, d]); out may be x.
  virtual void softmax(const Tensor& x, const Tensor& out) = 0;
  // out = cast(x): same element count, types among F32, F16, BF16.
  virtual void copy(const Tensor& x, const Tensor& out) = 0;

  // ---- mixture of experts, gating, recurrent layers ----
  // Not every backend has these yet (CUDA: later); the defaults abort with the op's name, so a
  // model that needs them fails loudly instead of computing garbage.

  // Router: per row of logits F32 [n, n_expert]: p = softmax(row); ids I32 [n, k] = the k largest
  // p (descending; ties: lower index first); weights F32 [n, k] = those p, divided by their sum
  // when `normalize` (norm_topk_prob).
  virtual void moe_route(const Tensor& logits, int k, bool normalize, const Tensor& ids,
                         const Tensor& weights) {
    (void)logits, (void)k, (void)normalize, (void)ids, (void)weights;
    T9_CHECK(false, "backend {} has no moe_route", name());
  }
  // Expert matmul: out[t, j, :] = w[ids[t, j]] @ x[t, x.ne[1] == 1 ? 0 : j, :]. w: [n_expert,
  // n_out, n_in] any matmul weight type; x: F32 [n, 1 or k, n_in]; ids: I32 [n, k]; out: F32
  // [n, k, n_out] (must not alias x). Grouped dispatch: each expert named in ids runs one matmul
  // over all rows routed to it. Batch-invariant like matmul (a row never depends on the others).
  virtual void matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out) {
    (void)w, (void)x, (void)ids, (void)out;
    T9_CHECK(false, "backend {} has no matmul_id", name());
  }
  // A MoE block's routing and the matmuls of x that follow it: moe_route(r.logits, r.k,
  // r.normalize, r.ids, r.weights), then matmul_shared_x(x, outs), whose matmul_id entries read
  // r.ids. Exactly those ops' bits; a backend may compute the ids inside the experts' launch
  // (CUDA: a decode step's MoE layer one launch shorter).
  struct MoeRoute {
    Tensor logits;
    int k = 0;
    bool normalize = false;
    Tensor ids, weights;
  };
  virtual void moe_route_matmul(const MoeRoute& r, const Tensor& x,
                                std::span<const MatmulOut> outs) {
    moe_route(r.logits, r.k, r.normalize, r.ids, r.weights);
    matmul_shared_x(x, outs);
  }
  // out[t, :] = sum_j weights[t, j] * y[t, j, :], summed in rank order j = 0, 1, .. k-1 (a fixed
  // order per token: batch-invariant). y: F32 [n, k, d]; weights: F32 [n, k]; out: F32 [n, d].
  virtual void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) {
    (void)y, (void)weights, (void)out;
    T9_CHECK(false, "backend {} has no moe_combine", name());
  }
  // out = a * sigmoid(g): g has a's shape, or one value per row of a (g: [rows, 1]). out may be a.
  virtual void mul_sigmoid(const Tensor& a, const Tensor& g, const Tensor& out) {
    (void)a, (void)g, (void)out;
    T9_CHECK(false, "backend {} has no mul_sigmoid", name());
  }
  // The routed experts' sum plus the gated shared expert: moe_combine(y, weights, out), then
  // shared = shared * sigmoid(gate) (in place), then out = out + shared; exactly those three ops
  // and their roundings (a backend may fuse them into one pass with the same bits). gate: [n, 1]
  // or shared's shape.
  virtual void moe_combine_shared(const Tensor& y, const Tensor& weights, const Tensor& shared,
                                  const Tensor& gate, const Tensor& out) {
    moe_combine(y, weights, out);
    mul_sigmoid(shared, gate, shared);
    add(out, shared, out);
  }
  // The tail of a MoE FFN block after its gate and up projections (model/moe.cpp), with the
  // shapes of the ops below (n tokens, k ranks, Fe / Fs expert / shared sizes, E = n_embd):
  //   eg = glu(eg, eu) (SwiGLU); ed = matmul_id(down_exps, eg, ids)
  //   no shared expert (down_shexp !valid()): moe_combine(ed, wts, out)
  //   else: sg = glu(sg, su); so = sg @ down_shexp^T; moe_combine_shared(ed, wts, so, sgate, out)
  // `out` gets exactly those ops' bits; eg, sg, ed and so are scratch whose contents afterwards
  // are unspecified, so a backend may fuse the chain (CUDA: two launches instead of five for a
  // decode step's few rows).
  struct MoeDown {
    Tensor down_exps, eg, eu, ids, wts, ed, out;
    Tensor down_shexp = {}, sg = {}, su = {}, so = {}, sgate = {};
  };
  virtual void moe_down(const MoeDown& m) {
    glu(m.eg, m.eu, GluKind::kSwiGLU, m.eg);
    matmul_id(m.down_exps, m.eg, m.ids, m.ed);
    if (!m.down_shexp.valid()) return moe_combine(m.ed, m.wts, m.out);
    glu(m.sg, m.su, GluKind::kSwiGLU, m.sg);
    matmul(m.down_shexp, m.sg, Tensor{}, m.so);
    moe_combine_shared(m.ed, m.wts, m.so, m.sgate, m.out);
  }
  // Causal depthwise conv1d over time, then SiLU, continuing each sequence's rolling state.
  // x: F32 [n_tokens, C]; w: F32 [C, K] (ggml ne {K, C}); state: F32 [n_slots, K - 1, C] (the
  // sequence's last K - 1 inputs, oldest first); seqs: I32 [n_seqs, 4] (RecurrentSeq); out: F32
  // [n_tokens, C], must not alias x. With xx = state rows then this step's rows:
  // out[t, c] = silu(sum_i w[c, i] * xx[t + i, c]); afterwards state = the last K - 1 rows of xx.
  virtual void ssm_conv(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& seqs,
                        const Tensor& out) {
    (void)x, (void)w, (void)state, (void)seqs, (void)out;
    T9_CHECK(false, "backend {} has no ssm_conv", name());
  }
  // Gated delta rule per sequence and value head h, continuing the state S [d_k, d_v]:
  //   q, k = l2norm(q), l2norm(k) (key head of h per p.v_heads_tiled), q *= 1/sqrt(d_k)
  //   g = A[h] * softplus(a + dt_bias[h]) (A = -exp(A_log) <= 0), beta = sigmoid(b)
  //   S = exp(g) S;  S += k (beta (v - S^T k))^T;  out = S^T q
  // computed token by token, or in the chunked-parallel (WY/UT) form for sequences with at least
  // p.min_chunked_tokens tokens (chunks of p.chunk_size from the sequence's first row).
  // q, k: F32 [n_tokens, n_k_heads, d_k]; v: F32 [n_tokens, n_v_heads, d_v] (views with strided
  // higher dims are fine); a, b: F32 [n_tokens, r, n_v_heads / r] for any r (the value heads in
  // order); A, dt_bias: F32 [n_v_heads]; state: F32 [n_slots, n_v_heads, d_k, d_v];
  // seqs: I32 [n_seqs, 4] (RecurrentSeq); out: F32 [n_tokens, n_v_heads, d_v].
  virtual void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                               const Tensor& b, const Tensor& A, const Tensor& dt_bias,
                               const Tensor& state, const Tensor& seqs, const GdnParams& p,
                               const Tensor& out) {
    (void)q, (void)k, (void)v, (void)a, (void)b, (void)A, (void)dt_bias, (void)state, (void)seqs;
    (void)p, (void)out;
    T9_CHECK(false, "backend {} has no gated_delta_net", name());
  }
  // A Gated DeltaNet layer's recurrent part between its two projections: ssm_conv(mixed, conv_w,
  // conv_state, seqs, conv), then gated_delta_net(q, k, v, a, b, A, dt_bias, delta_state, seqs,
  // p, core) with q, k, v views of conv. The default runs the two ops; a backend may run them as
  // one launch with the same bits, in which case conv (the convolved channels, read only by the
  // delta rule) is not written.
  struct GdnChain {
    Tensor mixed, conv_w, conv_state, conv;
    Tensor q, k, v, a, b, A, dt_bias, delta_state;
    Tensor seqs;
    GdnParams p;
    Tensor core;
  };
  virtual void gdn_chain(const GdnChain& c) {
    ssm_conv(c.mixed, c.conv_w, c.conv_state, c.seqs, c.conv);
    gated_delta_net(c.q, c.k, c.v, c.a, c.b, c.A, c.dt_bias, c.delta_state, c.seqs, c.p, c.core);
  }
};

// True when `matmul` and `get_rows` accept weights of type t on every backend.
bool backend_supports_weight_type(GgmlType t);

// Backend::logprobs' argument checks, shared by the backends (the logits' and out's F32 rows are
// the backend's own check).
void check_logprobs_args(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                         const Tensor& ids);

}  // namespace t9
