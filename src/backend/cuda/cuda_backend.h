// The CUDA backend (Hopper, sm_90): device memory from cudaMalloc, every op enqueued on one
// stream in call order; the work between two sync()s is recorded, and a repeated window (a
// decode step) runs as one CUDA graph launch (cuda_stream.cuh). Plain C++ header (no CUDA
// includes) so model code and tests compiled by the host compiler can use it; only built when
// TEMPO9_HAVE_CUDA is defined.
//
// Numerics against the CPU backend (tests/ops/cuda_ops_test.cpp bounds each):
//   - matmul: Q4_0/Q4_1/Q5_0/Q8_0/Q3_K/Q4_K/Q6_K weights multiply activations rounded to int8 per
//   32
//     elements exactly as the CPU backend rounds them (cuda_gemv.cuh); the other quantized types
//     multiply dequantized weights by F32 activations, as do F16/BF16/F32. The reduction order
//     per output depends only on n_in, so a row's result does not depend on the other rows:
//     batch-invariant, bitwise. With bf16_matmul, Q4_K, Q6_K and Q8_0 matrices stored in fragment
//     order (upload_matmul_weights) multiply bf16-rounded activations by bf16 weights in fp32
//     instead (cuda_bf16_matmul.cuh), every row count the same way: batch-invariant too.
//   - attention is split-K: a row's keys are cut into up to 16 contiguous ranges (a count that
//     depends only on the row's own key count), one thread block per (query row, head, range)
//     with an online softmax over tiles of keys in position order, then a combine in range
//     order: deterministic and independent of the other sequences.
//   - index errors a CPU op would T9_CHECK (block tables, get_rows ids) are flagged by the kernels
//     and reported by the next sync() as a T9_CHECK failure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "backend/backend.h"

namespace t9 {

namespace cuda {
class Stream;  // cuda_stream.cuh

// Device scratch (activation codes for the quantized matmul), grown in stream order.
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  void* reserve(size_t n, Stream& stream);
  // As reserve, and a new block is zeroed (stream-ordered) before any later work: for counters
  // that every user leaves at zero again.
  void* reserve_zeroed(size_t n, Stream& stream);
};

class OpProfiler;    // cuda_profile.cuh
class KernelTrace;   // cuda_trace.cuh
struct RoundedX;     // cuda_gemv.cuh
struct FusedPart;    // cuda_gemv.cuh
class DerivedCache;  // cuda_derived.cuh
struct FlashPrep;    // cuda_flash_attention.cuh
}  // namespace cuda

struct CudaBackendConfig {
  int device = 0;
  // Windows between sync()s that repeat (decode steps) run as CUDA graphs (cuda_stream.cuh).
  // TEMPO9_CUDA_GRAPHS=0 in the environment, or profiling, turns them off.
  bool graphs = true;
  // Programmatic dependent launch between consecutive kernels (sm_90+, cuda_stream.cuh);
  // TEMPO9_CUDA_PDL=0 turns it off.
  bool pdl = true;
  // GLUs write the int8 codes of their output for the matmul that reads it next
  // (cuda_derived.cuh; same bits); TEMPO9_CUDA_FUSE_ROUNDING=0 turns it off.
  bool fuse_rounding = true;
  // Matmuls of uploaded weights (upload_weights: no kernel writes them) start reading their
  // weights before the dependent-launch wait, while the previous kernel still runs (same bits;
  // needs pdl); TEMPO9_CUDA_EARLY_WEIGHTS=0 turns it off.
  bool early_weights = true;
  // matmul_shared_x launches the plain matmuls of one weight type as one kernel (q/k/v,
  // gate/up; same bits); TEMPO9_CUDA_FUSE_PARTS=0 turns it off.
  bool fuse_parts = true;
  // matmul_glu of decode rows (1-32) over bf16-path gate/up stores the GLU from the GEMV's
  // epilogue (same bits, one launch fewer a layer); TEMPO9_CUDA_FUSE_GLU=0 turns it off.
  bool fuse_glu = true;
  // Replayed windows run as a few consecutive graphs, each launched once its records match, so
  // the device starts while the host records the rest (StreamConfig::segment_kernels; same
  // work); TEMPO9_CUDA_GRAPH_SEGMENTS=0: one graph per window.
  bool graph_segments = true;
  // New graphs are built on a host thread of the stream's own while the engine goes on (the
  // same work; StreamConfig::background_builds); TEMPO9_CUDA_GRAPH_BACKGROUND=0 builds them on
  // the engine's thread. Tests that count replays window by window turn it off.
  bool graph_background = true;
  // Warps per row group of the fused MoE down projection (moe_down_kernel), each taking that
  // share of a token's terms (1-4; same bits); TEMPO9_CUDA_MOE_DOWN_SPLIT=1..4 overrides.
  int moe_down_split = 3;
  // Q8_0, Q4_K and Q6_K matmuls of mma_rows_min .. mma_rows_max activation rows (2 for the
  // multi-row calls, 1 for one-row calls too; the max up to 32, past the tile kernel's 16) run on
  // the few-row tensor-core GEMV (cuda_gemv_mma.cu: one mma per 16 weight rows x 8 activation rows
  // x 32 inputs; same bits); min 0: never. Off: its tests pass, but it was slower at 8 rows (35B
  // agents -2.7%) and 32 rows (8B 32-way ITL 22.4 vs 14.5 ms) on an H100 (docs/CUDA.md stages 36,
  // 39); TEMPO9_CUDA_MMA_ROWS_MIN / _MAX=N override.
  int mma_rows_min = 0;
  int mma_rows_max = 15;
  // Gated DeltaNet calls of prompt-length sequences run their token chains on sixteen threads a
  // state column (gdn_rounds_kernel<kRows, 16>: one partial chain each; same bits) instead of
  // four. Off: same bits, but 5.5% slower on the 35B's 8 agents on an H100 (docs/CUDA.md stages
  // 38, 39); TEMPO9_CUDA_GDN=chains (or rounds, regs) forces a kernel.
  bool gdn_chains = false;
  // Backend::gdn_chain (a Gated DeltaNet layer's conv and delta rule) as one launch for decode
  // calls of at most this many sequences (cuda_gdn_chain.cu: gdn_regs_kernel's blocks, each
  // convolving what it reads; the same bits as the two ops); 0: never. H100, runs 272 and 274
  // (docs/CUDA.md stage 59): the 35B's single decode 383.0 / 384.2 -> 388.6 / 386.6 tok/s, the
  // same text; at 8 sequences its replayed steps were slower (device wait 6.30 -> 6.51 ms, each
  // block convolving its key head's q / k channels again for every sequence), so one.
  // TEMPO9_CUDA_GDN_CHAIN_SEQS=N overrides.
  int gdn_chain_max_seqs = 1;
  // moe_route_matmul's routing inside the experts' one-row launch (cuda_route.cuh; the same
  // bits). H100, run 266: the 35B's single decode 366.7 / 367.7 -> 371.2 / 371.7 tok/s, the same
  // text (docs/CUDA.md stage 56). TEMPO9_CUDA_FUSE_ROUTE=0 turns it off (=1 on).
  bool fuse_route = true;
  // Backend::add_rms_norm_matmul of one decode row as one launch (norm_gemv_f_kernel: the MoE
  // block's pre-norm beside its router and shared-expert gate, F16/BF16/F32; the same bits as the
  // two ops). Off: its test passes and the text is the same, but the 35B's single decode did not
  // move on an H100 (run 292: 394.8 / 397.1 against 396.9 / 397.4 tok/s; traced, run 291, the
  // norm and router's ~5.0 us of chain became ~4.3 while the out-projection before it grew ~1.3
  // us: docs/CUDA.md stage 62). TEMPO9_CUDA_NORM_GEMV=1 turns it on.
  bool norm_gemv = false;
  // A decode matmul_id's plain rows (the MoE shared expert's gate/up beside the routed experts')
  // copy their first weight rows before the dependent-launch wait (stages_early, cuda_units.cuh;
  // the same bits). Off: the 35B's gate/up ~0.3 us shorter a layer in the trace (run 291) and
  // even end to end (runs 289, 292). TEMPO9_CUDA_PLAIN_EARLY=1 turns it on.
  bool plain_early = false;
  // F16/BF16/F32 matmuls with few weight rows (split order: the MoE router) and at least this many
  // activation rows run on the prompt-step tile kernel (cuda_gemv_float.cu: 16 weight rows staged
  // in shared memory per block, walked over tiles of 8 activation rows; same bits); 0: never.
  // Off: same bits, +0.35% on the 35B's 8 agents on an H100, inside the run-to-run spread
  // (docs/CUDA.md stages 38, 39); TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS=N.
  int float_tile_min_rows = 0;
  // Split tensor-core attention calls of at most this many query rows (and at most
  // kInKernelFoldChunks 128-key chunks) fold each row's chunk partials in the attention kernel,
  // in the block that finishes the row's last chunk, instead of a combine launch (same bits); 0:
  // always the combine kernel. Off: its tests pass, but the 8B's single decode lost 8-10% with it
  // on an H100 (runs 197-199, with two forms of the counters' fences; why was not profiled:
  // docs/CUDA.md stage 40). TEMPO9_CUDA_ATTN_FOLD_ROWS=N.
  int attn_fold_rows = 0;
  // Tensor-core attention calls of one decode row (tiles of at most 16 q-head slots) split each
  // key tile's multiplies over the block's four warps instead of leaving them to warp 0
  // (cuda_flash_attention.cu, the row-warp form; the same bits). H100, runs 267-268: single
  // decode 35B 368.1 / 371.7 -> 384.2 / 384.2 tok/s (with the fused routing), 8B Q4_K_M 317.1 /
  // 318.3 -> 339.5 / 339.9, the same texts (docs/CUDA.md stage 56). TEMPO9_CUDA_ATTN_ROW_WARPS=0
  // turns it off (=1 on).
  bool attn_row_warps = true;
  // The row-warp form's split calls (one decode row) run by whole 128-key chunks instead
  // (cuda_flash_row.cu: a block of 16 warps per chunk computes its tiles' scores at once and
  // walks the running softmax over them after one exchange; the same bits). H100, run 299, 1,024
  // tokens alternated twice: the whole 35B Q8_0 400.7 / 400.8 -> 410.5 / 411.5 tok/s, its 8-layer
  // file +1.8%, the 8B's +0.4%, the same texts (docs/CUDA.md stage 66); with the last block's
  // fold (attn_fold_rows) it lost (-0.2%, -3.2%). TEMPO9_CUDA_ATTN_ROW_CHUNK=0 turns it off.
  bool attn_row_chunk = true;
  // The row-warp form's one-chunk calls (contexts up to 128 keys, unsplit: today the row-warp
  // kernel walks the chunk's tiles on one block of four warps, ~25 us a layer on the 35B, run
  // 272) by the chunk kernel too: its one block per KV head stores the chunk's partial and folds
  // it (the split form's fold of one chunk, whose bits are the unsplit form's). Off until
  // measured. TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE=1 turns it on (=0 off).
  bool attn_row_chunk_one = false;
  // rope_attention runs as one tensor-core launch (the kernel prepares q and the new K/V rows)
  // for decode calls of at most this many q-head slots a KV head (sequences x n_head /
  // n_kv_head): one warp prepares each slot's row, so a cohort tile of many agents serializes
  // them. H100, runs 198-199: single decode +6% (8B, with the early keys) and +1.7% (35B); the
  // 35B's 8 agents (64 slots) lost 1.3% with it; 0: never. TEMPO9_CUDA_ATTN_PREP_SLOTS=N.
  int attn_prep_slots = 8;
  // Q4_K, Q6_K, Q8_0 and BF16 matrices that only matmuls read (upload_matmul_weights, n_in a
  // multiple of 1024 up to 16384 (Q8_0 14336, BF16 12288), n_out of 16) are stored in
  // mma-fragment order and every matmul of them runs on the bf16 tensor cores
  // (cuda_bf16_matmul.cuh: x rounded to bf16, the K-quants' weights too, Q8_0's exact codes
  // scaled per block in fp32, BF16's as they are; fp32 accumulation;
  // batch-invariant bit for bit as the int8 path). The 8B Q4_K_M on an H100 (run 223, against
  // int8): single decode 1.007x, a 512-token prompt 1.82x, 8 rows 2.68x, 32 rows 1.55x, the
  // greedy text's first 96 bytes the same. TEMPO9_CUDA_BF16=0 turns it off (=1 on);
  // TEMPO9_CUDA_BF16_BF16=0 keeps BF16 matrices on the float GEMV (A/B runs).
  bool bf16_matmul = true;
  // Q8_0 matrices too (with bf16_matmul). The 35B Q8_0 on an H100 (run 226, against int8;
  // the loader keeps the shared expert's gate/up in the file's layout, model/weights.cpp, so
  // they ride in the routed experts' launch): single decode 1.02x, 8 agents 1.063x effective
  // tok/s (TTFT of turns 1-3 -8%, -8%, -18%). TEMPO9_CUDA_BF16_Q8_0=0 turns it off (=1 on).
  bool bf16_q8_0 = true;
  // Q5_K matrices too (with bf16_matmul; Q4_K's arithmetic, the code's fifth bit from the
  // layout's high words: quant/frag_layout.h). Run 241 (H100, the 8B at synth's Q5_K_M,
  // `bench/device_plans/q5k_8b.sh`): single decode 279.0 tok/s against 77.9 on the stage-1
  // kernel, a 512-token prompt 10,214 against 156 tok/s; the int8 sliced Q5_K came after (not yet
  // timed against it). TEMPO9_CUDA_BF16_Q5K=0 turns it off (=1 on).
  bool bf16_q5_k = true;
  // Q3_K matrices too (with bf16_matmul; Q6_K's arithmetic with a 3-bit code: quant/frag_layout.h).
  // Run 254 (H100, `bench/device_plans/q3k_bf16.sh`: the 35B cut to 8 layers at Q3_K_M, against
  // the int8 sliced kernels, alternated): single decode 1394 / 1384 against 1370 / 1347 tok/s,
  // 8 rows 1.667 against 1.736 ms a step, a 64-token prompt 14.9k against 13.9k tok/s; the
  // CudaBf16 and Matmul op tests pass with it. TEMPO9_CUDA_BF16_Q3K=0 turns it off (=1 on).
  bool bf16_q3_k = true;
  // matmul_shared_x's fragment-ordered matrices of two types (Q4_K or Q5_K beside Q6_K: a K-quant
  // layer's q/k and v) in one GEMV launch for 1-8 rows (launch_bf16_matmul_pair; the same bits).
  // Runs 249-251 (H100, the 8B Q4_K_M, docs/CUDA.md stage 51): single decode 309.1-310.0 against
  // 303.1-303.4 tok/s, 8 rows 5.09 against 5.26 ms a step. TEMPO9_CUDA_BF16_PAIRS=0 turns it off
  // (=1 on).
  bool bf16_pairs = true;
  // BF16 GEMMs (B16Direct) of at least this many rows on wgmma (cuda_bf16_wgmma.cuh: the same
  // bits; 128 x 128 tiles, a cluster of two sharing the weights), where every matrix of the launch
  // has whole 128-row blocks; 0: never. Run 261 (H100, the 8B BF16 synth, docs/CUDA.md stage 54):
  // prompts 512 / 2048 at 16.4-16.7k / 17.4k tok/s against 12.1k for the mma.sync GEMM, the
  // 32-way round at 10,243 against 8,325 effective tok/s, texts equal; 128 and 512 rows ran alike.
  // Below 128 rows the grid is too small to pay. TEMPO9_CUDA_BF16_WGMMA_ROWS=N (0: off).
  int bf16_wgmma_rows = 128;
  // The K-quant types (Q4_K, Q5_K, Q6_K, Q3_K) on the wgmma GEMM too, at the same row count: each
  // consumer warp dequantizes its own 16-row fragments from the raw blocks the producer copied,
  // as the mma.sync GEMM does, so only the multiply changes (the same bits). Run 262 (H200, the
  // 8B Q4_K_M): prompts +23-25%, the 32-way round +13%, texts equal. Q8_0 stays on the mma.sync
  // GEMM (its per-block scale needs a third set of accumulators).
  // TEMPO9_CUDA_BF16_WGMMA_QUANT=0 turns it off (=1 on).
  bool bf16_wgmma_quant = true;
};

// What the graph machinery did (tests, bench printouts).
struct CudaGraphStats {
  long windows = 0;       // sync()s with work in them
  long replays = 0;       // windows run as one graph launch
  long captures = 0;      // graphs built
  double capture_ms = 0;  // host time spent building them (capture + instantiate)
  // Replayed windows: host time from the first record to sync() (the forward's own work, held
  // back), and the wait for the device after the graph launch.
  double replay_host_ms = 0, replay_wait_ms = 0;
  double other_ms = 0;  // the other windows, first record to the end of sync()
  // Windows held back against a cached tape that then left every one: their launches waited on
  // the host until then. held_kernels counts the kernels they held back in all.
  long diverged = 0, held_kernels = 0;
};

// Number of CUDA devices visible (0 when there is no driver or no GPU).
int cuda_device_count();
// Streaming multiprocessors of the current device (launch shapes that depend on them: tests).
int cuda_sm_count();

// True for the weight types whose matmul rounds activations to int8 per 32 elements (d = amax /
// 127, q = rint(x * (1 / d)), the CPU backend's rounding) before the dot products.
bool cuda_matmul_int8_activations(GgmlType t);

// Which kernels CudaBackend::attention runs for a call of n_rows query rows (tests):
enum class CudaAttnPath {
  kFloat,        // fp32 split-K kernel: F32 pools and head dims other than 64 / 128 / 256
  kTensorFold,   // tensor cores, each block folding all the keys of its rows
  kTensorSplit,  // tensor cores, keys split into 128-key chunks, then a combine (a kernel, or
                 // the row's last block: CudaBackendConfig::attn_fold_rows)
};
CudaAttnPath cuda_attention_path(const AttnParams& p, GgmlType pool, int64_t n_rows);

class CudaBackend final : public Backend {
 public:
  // CHECKs that the device exists.
  explicit CudaBackend(const CudaBackendConfig& cfg = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;
  // "cuda graphs: ..." (graph_stats since mark_diagnostics): a step that stops replaying shows
  // here as captures.
  std::string diagnostics() const override;
  void mark_diagnostics() override;
  std::optional<size_t> free_memory_bytes() const override;  // cudaMemGetInfo's free bytes
  Result<Buffer*> alloc(size_t n_bytes) override;
  void free(Buffer* buf) override;
  Result<Buffer*> upload_weights(const void* host, size_t n_bytes) override;
  Result<Buffer*> upload_matmul_weights(const void* host, size_t n_bytes, GgmlType type,
                                        int64_t n_in, int64_t n_out) override;
  void upload(Buffer* dst, size_t offset, const void* host, size_t n_bytes) override;
  void download(const Buffer* src, size_t offset, void* host, size_t n_bytes) override;
  void sync() override;
  // A window ended without a wait (cuda_stream.cuh), its error word checked when waited for.
  void submit() override;
  void wait_submitted() override;
  bool asynchronous() const override { return prof_ == nullptr; }
  CudaGraphStats graph_stats() const;
  // Waits for graphs being built in the background and caches them (tests).
  void settle_graph_builds();
  // Matmuls that took the codes their x's producer wrote instead of rounding x (tests).
  long rounding_reuses() const;
  // Grouped matmul_ids that took the expert sort of an earlier call over the same ids (tests).
  long expert_sort_reuses() const;
  // Split attention calls whose rows were folded by their last blocks, no combine launch (tests).
  long attention_kernel_folds() const { return attn_kernel_folds_; }
  // Tensor-core attention calls that ran the row-warp form (CudaBackendConfig::attn_row_warps).
  long attention_row_launches() const { return attn_row_launches_; }
  // Of those, the calls run by whole chunks (CudaBackendConfig::attn_row_chunk, _one).
  long attention_chunk_launches() const { return attn_chunk_launches_; }
  // rope_attention calls that ran as the one prepared attention launch (tests).
  long attention_preps() const { return attn_preps_; }
  // The weight bytes up to which matmuls of 2..8 rows run one activation row per launch-grid
  // row instead of 4- or 8-row tiles (same bits; cuda_gemv.cuh; tests size their shapes by it).
  static int64_t tok1_max_weight_bytes();
  // Launches of matmul_shared_x that computed several weights at once (fuse_parts; tests).
  long fused_matmuls() const { return fused_matmuls_; }
  // add_rms_norm_matmul calls that ran as one launch (tests).
  long fused_norm_matmuls() const { return fused_norm_matmuls_; }

  void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void take_tokens(const Tensor& prev, const Tensor& ids) override;
  // Greedy, no cut, or a top-k of at most 1024 (cuda_sample.cu): a top-p or min-p over the
  // vocabulary may keep more than the kernel's 1024 candidates.
  bool settles(const RowSampling& s) const override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, float weight_bias,
                const Tensor& out) override;
  // One kernel: the sum is kept in registers for the norm (same bits as add + rms_norm).
  void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& weight, float eps,
                    float weight_bias, const Tensor& sum, const Tensor& out) override;
  // A decode row's norm and the F16/BF16/F32 matmuls of its output (the MoE router and shared
  // gate) as one launch (cuda_gemv.cuh, launch_norm_float_matmul); other calls as the two ops.
  void add_rms_norm_matmul(const AddRmsNorm& n, std::span<const MatmulOut> outs) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void mul(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void scale(const Tensor& x, float s, const Tensor& out) override;
  void unary(const Tensor& x, UnaryKind kind, const Tensor& out) override;
  void softcap(const Tensor& x, float c, const Tensor& out) override;
  void glu(const Tensor& gate, const Tensor& up, GluKind kind, const Tensor& out) override;
  void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_norm, const Tensor& k_norm,
                    float eps, float weight_bias, const Tensor& positions, const RopeParams& p,
                    const KvWrite* kv = nullptr, const Tensor* q_from = nullptr) override;
  void rope(const Tensor& x, const Tensor& positions, const RopeParams& p,
            const Tensor& out) override;
  // Decode rows (one query row per sequence, up to attn_prep_slots q-head slots a KV head) on
  // the tensor-core attention: one launch that normalizes and rotates q and the new k as
  // qk_norm_rope would, stores the new K/V rows and attends (FlashPrep; same bits); other calls
  // as the two ops. TEMPO9_CUDA_ATTN_PREP=0: never.
  void rope_attention(const RopeAttention& a) override;
  void matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y) override;
  // x rounded to int8 once for every int8-activation weight among outs (same bits as matmul).
  void matmul_shared_x(const Tensor& x, std::span<const MatmulOut> outs) override;
  // Decode rows of bf16-path weights (fuse_glu): one GEMV launch that stores the GLU of each
  // gate/up tile pair (cuda_bf16_matmul.cuh), no GLU launch; else the ops.
  void matmul_glu(const Tensor& x, const Tensor& gate_w, const Tensor& up_w, GluKind kind,
                  const Tensor& gate, const Tensor& up) override;
  // matmul_glu calls that ran as the GEMV's GLU epilogue (tests).
  long fused_glus() const { return fused_glus_; }
  void write_kv(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                const Tensor& seqs, const Tensor& block_tables, const AttnParams& p) override;
  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seqs,
                 const Tensor& block_tables, const AttnParams& p, const Tensor& out) override;
  // The gate in the tensor-core kernels' output store (cuda_flash_attention.cu).
  void gated_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                       const Tensor& gate, const Tensor& out) override;
  void argmax(const Tensor& logits, const Tensor& out) override;
  void sample(const Tensor& logits, const Tensor& params, const Tensor& out) override;
  void logprobs(const Tensor& logits, const Tensor& tokens, int k, const Tensor& out,
                const Tensor& ids) override;
  void adjust_logits(const Tensor& logits, const Tensor& edits, const Tensor& pending,
                     const Tensor& ids) override;
  void top_k(const Tensor& logits, int k, const Tensor& ids, const Tensor& values) override;
  void softmax(const Tensor& x, const Tensor& out) override;
  void copy(const Tensor& x, const Tensor& out) override;

  // Mixture of experts, gating, recurrent layers (cuda_moe.cu, cuda_gdn.cu). matmul_id stays on
  // the device up to 256 pairs of Q4_K/Q6_K/Q8_0 experts and otherwise waits for the stream once
  // per call (it groups rows by expert on the host; bad ids: bit 8 at sync() on the device route,
  // a T9_CHECK on the host route); gated_delta_net always runs
  // the token-by-token recurrence (p.min_chunked_tokens is ignored: same function, other
  // rounding). Bad RecurrentSeq rows or slots are flagged like AttnSeq rows (bit 4 at sync()).
  void moe_route(const Tensor& logits, int k, bool normalize, const Tensor& ids,
                 const Tensor& weights) override;
  void matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out) override;
  // The ids computed inside the experts' launch where it takes its pairs one by one (up to 256
  // pairs, at most 256 experts, k <= 32; cuda_route.cuh RouteArgs), else moe_route first.
  void moe_route_matmul(const MoeRoute& r, const Tensor& x,
                        std::span<const MatmulOut> outs) override;
  // moe_route_matmul calls whose ids the experts' launch computed (tests).
  int64_t fused_routes() const { return fused_routes_; }
  void moe_combine(const Tensor& y, const Tensor& weights, const Tensor& out) override;
  void mul_sigmoid(const Tensor& a, const Tensor& g, const Tensor& out) override;
  void moe_combine_shared(const Tensor& y, const Tensor& weights, const Tensor& shared,
                          const Tensor& gate, const Tensor& out) override;
  // Calls of 1-2 tokens in two launches (cuda_moe_down.cu), 3-8 with a shared expert in three
  // (moe_down_pairs), others as the composed ops.
  void moe_down(const MoeDown& m) override;
  void ssm_conv(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& seqs,
                const Tensor& out) override;
  // Rows of up to 256 (multiples of 32) in one launch that also writes the output projection's
  // codes.
  void rms_norm_gated(const Tensor& x, const Tensor& weight, float eps, const Tensor& z,
                      const Tensor& out) override;
  void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a,
                       const Tensor& b, const Tensor& A, const Tensor& dt_bias, const Tensor& state,
                       const Tensor& seqs, const GdnParams& p, const Tensor& out) override;
  // One launch where cuda_gdn_chain.cu takes the call (gdn_chain_max_seqs), else the two ops.
  void gdn_chain(const GdnChain& c) override;
  // Calls gdn_chain ran as one launch (tests: that the path was taken).
  int64_t gdn_chain_launches() const { return gdn_chain_launches_; }

 private:
  int device_ = 0;
  std::unique_ptr<cuda::Stream> stream_;  // every op's work, recorded per window
  CudaGraphStats diag_base_;              // graph_stats() at mark_diagnostics()
  unsigned* err_word_ = nullptr;  // device: DeviceError bits set by kernels (cuda_common.cuh)
  // Its copies, downloaded at the end of every window into the next slot (two windows may be in
  // flight: the one waited for and the one recorded behind it), and the submitted windows'
  // tickets with their slots, oldest first.
  std::array<unsigned, 4> err_host_{};
  size_t err_next_ = 0;
  std::deque<std::pair<uint64_t, size_t>> submitted_;
  void check_error_word(size_t slot);
  bool fuse_group(const Tensor& x, std::span<const MatmulOut> outs, std::span<const size_t> group,
                  std::span<const size_t> plain, const cuda::RoundedX& rx);
  // True when a matmul_id over ids may carry plain matmuls as its plain rows (cuda_moe.cu).
  bool plain_rows_ride(const Tensor& ids) const;
  // moe_down with the shared expert's rows in the experts' by-pair launch; false (nothing
  // enqueued) where that route does not apply.
  bool moe_down_pairs(const MoeDown& m);
  // attention, and with a gate (non-null) gated_attention when the tensor-core kernels serve
  // the call; false (nothing enqueued) for a gate they do not. With prep, the tensor-core kernel
  // also prepares q and stores the new K/V rows (rope_attention; the caller checked the call).
  bool attention_with(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& seqs, const Tensor& block_tables, const AttnParams& p,
                      const Tensor* gate, const Tensor& out, const cuda::FlashPrep* prep = nullptr);
  // The shape and type checks of matmul (a message naming the operand, no launch).
  void check_matmul(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y);
  // matmul with x already rounded (cuda::round_x) when `pre` is set (cuda_matmul.cu).
  void matmul_with(const Tensor& w, const Tensor& x, const Tensor& bias, const Tensor& y,
                   const cuda::RoundedX* pre);
  void check_matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out);
  bool matmul_id_device(std::span<const cuda::FusedPart> parts, const Tensor& x, const Tensor& ids,
                        const cuda::RoundedX* pre, std::span<const cuda::FusedPart> plain = {});
  // matmul_id likewise (`pre` is used by the one-row route, whose x rows are x's own rows).
  void matmul_id_with(const Tensor& w, const Tensor& x, const Tensor& ids, const Tensor& out,
                      const cuda::RoundedX* pre);

  cuda::Scratch scratch_;
  cuda::Scratch xq_scratch_;       // matmul_shared_x's rounded x (kept apart from scratch_)
  cuda::Scratch moe_scratch_;      // matmul_id's packed rows (matmul itself uses scratch_)
  cuda::Scratch attn_scratch_;     // attention's per-split partial results
  cuda::Scratch attn_counters_;    // attention's per-(row, KV head) chunk counters (FlashArgs)
  cuda::Scratch gdn_counters_;     // gdn_chain's per-(sequence, key head) block counters
  cuda::Scratch sample_scratch_;   // sample's order keys, one per logit
  cuda::Scratch argmax_scratch_;   // argmax's best key per (row, 4096-logit chunk)
  cuda::Scratch codes_scratch_;    // int8 codes written by producers (derived_)
  cuda::Scratch sort_scratch_;     // the expert sort of matmul_id (derived_)
  cuda::Scratch bf16_scratch_;     // the bf16 matmul's bf16 copy of x
  bool bf16_matmul_ = false;       // CudaBackendConfig::bf16_matmul
  bool bf16_q8_0_ = false;         // CudaBackendConfig::bf16_q8_0
  bool bf16_q5_k_ = false;         // CudaBackendConfig::bf16_q5_k
  bool bf16_q3_k_ = false;         // CudaBackendConfig::bf16_q3_k
  int bf16_wgmma_rows_ = 0;        // CudaBackendConfig::bf16_wgmma_rows
  bool bf16_wgmma_quant_ = false;  // CudaBackendConfig::bf16_wgmma_quant
  bool bf16_pairs_ = false;        // CudaBackendConfig::bf16_pairs
  std::unique_ptr<cuda::DerivedCache> derived_;  // codes and expert sorts of unchanged tensors
  bool early_weights_ = false;                   // CudaBackendConfig::early_weights, with pdl on
  // Whether a kernel may read w before its dependent-launch wait: early weights on, and w a
  // model weight (upload_weights: no kernel ever writes it).
  bool reads_early(const Tensor& w) const { return early_weights_ && w.valid() && w.buf->weights; }
  bool fuse_parts_ = true;          // CudaBackendConfig::fuse_parts
  bool fuse_glu_ = true;            // CudaBackendConfig::fuse_glu
  long fused_glus_ = 0;             // fused_glus()
  int moe_down_split_ = 3;          // CudaBackendConfig::moe_down_split
  int attn_fold_rows_ = 0;          // CudaBackendConfig::attn_fold_rows
  int attn_prep_slots_ = 8;         // CudaBackendConfig::attn_prep_slots
  long attn_kernel_folds_ = 0;      // attention_kernel_folds()
  long attn_row_launches_ = 0;      // attention_row_launches()
  long attn_chunk_launches_ = 0;    // attention_chunk_launches()
  bool attn_row_warps_ = false;     // CudaBackendConfig::attn_row_warps
  bool attn_row_chunk_ = false;     // CudaBackendConfig::attn_row_chunk
  bool attn_row_chunk_one_ = false;  // CudaBackendConfig::attn_row_chunk_one
  long attn_preps_ = 0;             // attention_preps()
  int mma_rows_min_ = 0;            // CudaBackendConfig::mma_rows_min
  int mma_rows_max_ = 15;           // CudaBackendConfig::mma_rows_max
  bool gdn_chains_ = false;         // CudaBackendConfig::gdn_chains
  // moe_route_matmul's routing while its matmul_shared_x runs: taken by the first matmul_id over
  // its ids (matmul_id_device), fused into that launch or launched before it.
  const MoeRoute* pending_route_ = nullptr;
  int64_t fused_routes_ = 0;        // fused_routes()
  int gdn_chain_max_seqs_ = 1;      // CudaBackendConfig::gdn_chain_max_seqs
  bool fuse_route_ = false;         // CudaBackendConfig::fuse_route
  bool norm_gemv_ = false;          // CudaBackendConfig::norm_gemv
  bool plain_early_ = false;        // CudaBackendConfig::plain_early
  int64_t gdn_chain_launches_ = 0;  // gdn_chain calls run as one launch
  int float_tile_min_rows_ = 0;     // CudaBackendConfig::float_tile_min_rows
  long fused_matmuls_ = 0;
  long fused_norm_matmuls_ = 0;  // fused_norm_matmuls()
  std::string device_name_;
  std::unique_ptr<cuda::OpProfiler> prof_;    // TEMPO9_CUDA_PROFILE=1: per-op GPU times at exit
  std::unique_ptr<cuda::KernelTrace> trace_;  // TEMPO9_CUDA_TRACE=FILE: the kernels' timeline
};

}  // namespace t9
