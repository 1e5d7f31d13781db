// CUDA backend: construction (the config's switches and their A/B variables), device memory, the
// stream and its error word. The row-wise ops are cuda_row_ops.cu's; matmul is in cuda_matmul.cu;
// RoPE, KV writes and attention in cuda_attention.cu.
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_bf16_matmul.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_derived.cuh"
#include "backend/cuda/cuda_profile.cuh"
#include "backend/cuda/cuda_trace.cuh"
#include "core/log.h"
#include "quant/frag_layout.h"

namespace t9 {
namespace cuda {
namespace {

// A config switch with its A/B override: the variable's "1" turns it on, any other value off.
bool switch_or_env(bool configured, const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr ? std::string_view(e) == "1" : configured;
}

}  // namespace
}  // namespace cuda

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

int cuda_sm_count() {
  return cuda::sm_count();
}

CudaBackend::CudaBackend(const CudaBackendConfig& cfg) : device_(cfg.device) {
  const int n = cuda_device_count();
  T9_CHECK(device_ >= 0 && device_ < n, "CUDA device {} of {}", device_, n);
  CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  device_name_ = fmt::format("{}, sm_{}{}", prop.name, prop.major, prop.minor);
  CUDA_CHECK(cudaMalloc(&err_word_, sizeof(unsigned)));
  CUDA_CHECK(cudaMemset(err_word_, 0, sizeof(unsigned)));
  trace_ = cuda::KernelTrace::from_env();  // before the first kernel
  prof_ = cuda::OpProfiler::from_env();
  cuda::StreamConfig sc;
  using cuda::env_off;
  // The profiler times each op with events between launches, which held-back launches break.
  sc.graphs = cfg.graphs && !env_off("TEMPO9_CUDA_GRAPHS") && prof_ == nullptr;
  sc.pdl = cfg.pdl && prop.major >= 9 && !env_off("TEMPO9_CUDA_PDL") && prof_ == nullptr;
  sc.background_builds = cfg.graph_background && !env_off("TEMPO9_CUDA_GRAPH_BACKGROUND");
  if (!cfg.graph_segments || env_off("TEMPO9_CUDA_GRAPH_SEGMENTS")) {
    sc.segment_kernels.clear();
  } else if (const char* e = std::getenv("TEMPO9_CUDA_GRAPH_SEGMENTS")) {
    // Increasing sizes "8,128" (A/B runs): other segment sizes; anything else keeps the default.
    std::vector<long> sizes;
    for (const char* p = e; *p != '\0';) {
      char* end = nullptr;
      const long v = std::strtol(p, &end, 10);
      if (end == p || v <= (sizes.empty() ? 0 : sizes.back())) break;
      sizes.push_back(v);
      p = *end == ',' ? end + 1 : end;
      if (*end != ',' && *end != '\0') break;
    }
    if (!sizes.empty()) sc.segment_kernels = sizes;
  }
  stream_ = std::make_unique<cuda::Stream>(sc);
  early_weights_ = sc.pdl && cfg.early_weights && !env_off("TEMPO9_CUDA_EARLY_WEIGHTS");
  fuse_parts_ = cfg.fuse_parts && !env_off("TEMPO9_CUDA_FUSE_PARTS");
  fuse_glu_ = cfg.fuse_glu && !env_off("TEMPO9_CUDA_FUSE_GLU");
  T9_CHECK(cfg.moe_down_split >= 1 && cfg.moe_down_split <= 4, "moe_down_split {} (1-4)",
           cfg.moe_down_split);
  moe_down_split_ = cfg.moe_down_split;
  const char* split_env = std::getenv("TEMPO9_CUDA_MOE_DOWN_SPLIT");  // A/B runs
  if (split_env != nullptr && split_env[0] >= '1' && split_env[0] <= '4' && split_env[1] == '\0')
    moe_down_split_ = split_env[0] - '0';
  T9_CHECK(cfg.mma_rows_min >= 0 && cfg.mma_rows_max >= 1 && cfg.mma_rows_max <= 32,
           "mma_rows_min {} (0: off), mma_rows_max {} (1-32)", cfg.mma_rows_min, cfg.mma_rows_max);
  mma_rows_min_ = cfg.mma_rows_min;
  mma_rows_max_ = cfg.mma_rows_max;
  if (const char* e = std::getenv("TEMPO9_CUDA_MMA_ROWS_MIN"))  // A/B runs
    mma_rows_min_ = std::max(0, std::atoi(e));
  if (const char* e = std::getenv("TEMPO9_CUDA_MMA_ROWS_MAX"))
    mma_rows_max_ = std::clamp(std::atoi(e), 1, 32);
  gdn_chains_ = cfg.gdn_chains;
  T9_CHECK(cfg.gdn_chain_max_seqs >= 0, "gdn_chain_max_seqs {}", cfg.gdn_chain_max_seqs);
  gdn_chain_max_seqs_ = cfg.gdn_chain_max_seqs;
  if (const char* e = std::getenv("TEMPO9_CUDA_GDN_CHAIN_SEQS"))  // A/B runs
    gdn_chain_max_seqs_ = std::max(0, std::atoi(e));
  fuse_route_ = cuda::switch_or_env(cfg.fuse_route, "TEMPO9_CUDA_FUSE_ROUTE");
  norm_gemv_ = cuda::switch_or_env(cfg.norm_gemv, "TEMPO9_CUDA_NORM_GEMV");
  plain_early_ = cuda::switch_or_env(cfg.plain_early, "TEMPO9_CUDA_PLAIN_EARLY");
  T9_CHECK(cfg.float_tile_min_rows >= 0, "float_tile_min_rows {}", cfg.float_tile_min_rows);
  float_tile_min_rows_ = cfg.float_tile_min_rows;
  if (const char* e = std::getenv("TEMPO9_CUDA_FLOAT_TILE_MIN_ROWS"))  // A/B runs
    float_tile_min_rows_ = std::max(0, std::atoi(e));
  T9_CHECK(cfg.attn_fold_rows >= 0, "attn_fold_rows {}", cfg.attn_fold_rows);
  attn_fold_rows_ = cfg.attn_fold_rows;
  if (const char* e = std::getenv("TEMPO9_CUDA_ATTN_FOLD_ROWS"))  // A/B runs
    attn_fold_rows_ = std::max(0, std::atoi(e));
  attn_row_warps_ = cuda::switch_or_env(cfg.attn_row_warps, "TEMPO9_CUDA_ATTN_ROW_WARPS");
  attn_row_chunk_ = cuda::switch_or_env(cfg.attn_row_chunk, "TEMPO9_CUDA_ATTN_ROW_CHUNK");
  attn_row_chunk_one_ =
      cuda::switch_or_env(cfg.attn_row_chunk_one, "TEMPO9_CUDA_ATTN_ROW_CHUNK_ONE");
  T9_CHECK(cfg.attn_prep_slots >= 0, "attn_prep_slots {}", cfg.attn_prep_slots);
  attn_prep_slots_ = cfg.attn_prep_slots;
  if (const char* e = std::getenv("TEMPO9_CUDA_ATTN_PREP_SLOTS"))  // A/B runs
    attn_prep_slots_ = std::max(0, std::atoi(e));
  bf16_wgmma_rows_ = cfg.bf16_wgmma_rows;
  if (const char* e = std::getenv("TEMPO9_CUDA_BF16_WGMMA_ROWS"))  // A/B runs
    bf16_wgmma_rows_ = std::max(0, std::atoi(e));
  bf16_wgmma_quant_ = cuda::switch_or_env(cfg.bf16_wgmma_quant, "TEMPO9_CUDA_BF16_WGMMA_QUANT");
  bf16_matmul_ = cuda::switch_or_env(cfg.bf16_matmul, "TEMPO9_CUDA_BF16");      // A/B runs
  bf16_q8_0_ = cuda::switch_or_env(cfg.bf16_q8_0, "TEMPO9_CUDA_BF16_Q8_0");     // A/B runs
  bf16_q5_k_ = cuda::switch_or_env(cfg.bf16_q5_k, "TEMPO9_CUDA_BF16_Q5K");      // A/B runs
  bf16_q3_k_ = cuda::switch_or_env(cfg.bf16_q3_k, "TEMPO9_CUDA_BF16_Q3K");      // A/B runs
  bf16_pairs_ = cuda::switch_or_env(cfg.bf16_pairs, "TEMPO9_CUDA_BF16_PAIRS");  // A/B runs
  derived_ = std::make_unique<cuda::DerivedCache>(cfg.fuse_rounding &&
                                                  !env_off("TEMPO9_CUDA_FUSE_ROUNDING"));
}

CudaBackend::~CudaBackend() {
  prof_.reset();   // prints its table; needs the stream's events
  trace_.reset();  // writes the timeline; needs the context
  if (const CudaGraphStats st = stream_->stats(); st.captures > 0)
    log_line(LogLevel::kInfo,
             fmt::format("cuda graphs: {} windows, {} replayed (host {:.3f} ms + device wait "
                         "{:.3f} ms each), {} graphs built in {:.1f} ms{}; the other windows "
                         "{:.1f} ms in all",
                         st.windows, st.replays, st.replay_host_ms / std::max(1L, st.replays),
                         st.replay_wait_ms / std::max(1L, st.replays), st.captures, st.capture_ms,
                         stream_->builds_in_background() ? " in the background" : "", st.other_ms));
  // No CUDA_CHECK here: a destructor must not abort while another failure unwinds.
  const cudaStream_t s = stream_->before_free();
  if (scratch_.ptr != nullptr) (void)cudaFreeAsync(scratch_.ptr, s);
  if (codes_scratch_.ptr != nullptr) (void)cudaFreeAsync(codes_scratch_.ptr, s);
  if (xq_scratch_.ptr != nullptr) (void)cudaFreeAsync(xq_scratch_.ptr, s);
  if (moe_scratch_.ptr != nullptr) (void)cudaFreeAsync(moe_scratch_.ptr, s);
  if (attn_scratch_.ptr != nullptr) (void)cudaFreeAsync(attn_scratch_.ptr, s);
  if (attn_counters_.ptr != nullptr) (void)cudaFreeAsync(attn_counters_.ptr, s);
  if (gdn_counters_.ptr != nullptr) (void)cudaFreeAsync(gdn_counters_.ptr, s);
  if (sample_scratch_.ptr != nullptr) (void)cudaFreeAsync(sample_scratch_.ptr, s);
  if (argmax_scratch_.ptr != nullptr) (void)cudaFreeAsync(argmax_scratch_.ptr, s);
  if (sort_scratch_.ptr != nullptr) (void)cudaFreeAsync(sort_scratch_.ptr, s);
  if (bf16_scratch_.ptr != nullptr) (void)cudaFreeAsync(bf16_scratch_.ptr, s);
  (void)cudaStreamSynchronize(s);
  (void)cudaFree(err_word_);
  stream_.reset();
}

std::string CudaBackend::name() const {
  return fmt::format("cuda ({})", device_name_);
}

std::optional<size_t> CudaBackend::free_memory_bytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

// ---- memory ----

Result<Buffer*> CudaBackend::alloc(size_t n_bytes) {
  void* p = nullptr;
  // 16 spare bytes: the matmul kernels copy whole 16-byte granules, up to 15 bytes past a
  // weight row's end (cuda_gemv.cu).
  const cudaError_t e = cudaMalloc(&p, n_bytes + 16);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return error("cuda backend: cannot allocate {} bytes: {}", n_bytes, cudaGetErrorString(e));
  }
  return new Buffer{p, n_bytes, true};
}

void CudaBackend::free(Buffer* buf) {
  if (buf == nullptr) return;
  derived_->clear();
  CUDA_CHECK(cudaStreamSynchronize(stream_->before_free()));  // queued ops may still use it
  if (buf->owned) CUDA_CHECK(cudaFree(buf->device_ptr));
  delete buf;
}

Result<Buffer*> CudaBackend::upload_weights(const void* host, size_t n_bytes) {
  T9_ASSIGN_OR_RETURN(Buffer * buf, alloc(n_bytes));
  CUDA_CHECK(cudaMemcpy(buf->device_ptr, host, n_bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, and our stream does not
  // wait for the legacy stream's copies; matmuls read weights before their dependent-launch wait
  // (early_weights). Run 116's test that uploads weights right before a matmul read a weight row
  // still in flight (NaN in one output) without this.
  CUDA_CHECK(cudaDeviceSynchronize());
  buf->weights = true;
  return buf;
}

Result<Buffer*> CudaBackend::upload_matmul_weights(const void* host, size_t n_bytes, GgmlType type,
                                                   int64_t n_in, int64_t n_out) {
  // TEMPO9_CUDA_BF16_Q6K=0 keeps Q6_K matrices on the int8 path (A/B runs of that form);
  // TEMPO9_CUDA_BF16_BF16=0 keeps BF16 ones on the float GEMV.
  static const bool q6k = !cuda::env_off("TEMPO9_CUDA_BF16_Q6K");
  static const bool b16 = !cuda::env_off("TEMPO9_CUDA_BF16_BF16");
  if (!bf16_matmul_ || !cuda::bf16_frag_shape_ok(type, n_in, n_out) ||
      (type == GgmlType::Q6_K && !q6k) || (type == GgmlType::Q8_0 && !bf16_q8_0_) ||
      (type == GgmlType::Q5_K && !bf16_q5_k_) || (type == GgmlType::Q3_K && !bf16_q3_k_) ||
      (type == GgmlType::BF16 && !b16) ||
      n_bytes != row_bytes(type, n_in) * static_cast<size_t>(n_out))
    return upload_weights(host, n_bytes);
  std::vector<uint8_t> frag(n_bytes);
  if (type == GgmlType::Q4_K)
    q4k_to_frag(host, n_in, n_out, frag.data());
  else if (type == GgmlType::Q5_K)
    q5k_to_frag(host, n_in, n_out, frag.data());
  else if (type == GgmlType::Q3_K)
    q3k_to_frag(host, n_in, n_out, frag.data());
  else if (type == GgmlType::Q6_K)
    q6k_to_frag(host, n_in, n_out, frag.data());
  else if (type == GgmlType::Q8_0)
    q80_to_frag(host, n_in, n_out, frag.data());
  else
    bf16_to_frag(host, n_in, n_out, frag.data());
  T9_ASSIGN_OR_RETURN(Buffer * buf, upload_weights(frag.data(), n_bytes));
  buf->layout = WeightLayout::kFrag;
  return buf;
}

void CudaBackend::upload(Buffer* dst, size_t offset, const void* host, size_t n_bytes) {
  T9_CHECK(dst != nullptr && offset + n_bytes <= dst->n_bytes, "upload past the buffer end");
  // Staged in pinned memory at once, so `host` may be reused (backend.h's contract).
  const char* d = static_cast<const char*>(dst->device_ptr) + offset;
  derived_->wrote(cuda::ByteSpan{d, d + n_bytes});
  stream_->upload(static_cast<char*>(dst->device_ptr) + offset, host, n_bytes);
}

void CudaBackend::download(const Buffer* src, size_t offset, void* host, size_t n_bytes) {
  T9_CHECK(src != nullptr && offset + n_bytes <= src->n_bytes, "download past the buffer end");
  stream_->download(host, static_cast<const char*>(src->device_ptr) + offset, n_bytes);
}

void CudaBackend::sync() {
  submit();
  if (submitted_.empty()) stream_->synchronize();  // nothing recorded: work outside any window
  while (!submitted_.empty()) wait_submitted();
  if (prof_) prof_->resolve();  // (again when nothing was submitted: a no-op otherwise)
}

void CudaBackend::submit() {
  derived_->clear();
  // The error word rides in the window as its last copy (a record like any other, so tapes still
  // repeat) instead of a blocking cudaMemcpy after it: one round trip less per step (~10 us of
  // host time between two decode steps, TEMPO9_CUDA_TRACE run 187). A window without work ran
  // no kernel that could have set it (and it was 0 after the last check).
  if (!stream_->has_work()) return;
  const size_t slot = err_next_++ % err_host_.size();
  err_host_[slot] = 0;
  stream_->download(&err_host_[slot], err_word_, sizeof(unsigned));
  submitted_.emplace_back(stream_->end_window(), slot);
}

void CudaBackend::wait_submitted() {
  if (submitted_.empty()) return;
  const auto [ticket, slot] = submitted_.front();
  submitted_.pop_front();
  stream_->wait_for(ticket);
  check_error_word(slot);
  // Steps end here, not in sync(): the profile's events are all done when nothing is left in
  // flight or being recorded.
  if (prof_ && submitted_.empty() && !stream_->has_work()) prof_->resolve();
}

void CudaBackend::check_error_word(size_t slot) {
  const unsigned err = err_host_[slot];
  if (err != 0) CUDA_CHECK(cudaMemset(err_word_, 0, sizeof(unsigned)));
  T9_CHECK(err == 0,
           "cuda kernel reported bad indices (bits {:#x}: 1 kv slot/block table, "
           "2 get_rows id, 4 AttnSeq rows, 8 matmul_id expert id)",
           err);
}

CudaGraphStats CudaBackend::graph_stats() const {
  return stream_->stats();
}

void CudaBackend::settle_graph_builds() {
  stream_->settle_builds();
}

std::string CudaBackend::diagnostics() const {
  const CudaGraphStats st = stream_->stats();
  const CudaGraphStats& b = diag_base_;
  return fmt::format(
      "cuda graphs: {} windows, {} replayed, {} captures ({:.1f} ms to build{}), {} held back "
      "then issued ({} kernels in all)",
      st.windows - b.windows, st.replays - b.replays, st.captures - b.captures,
      st.capture_ms - b.capture_ms, stream_->builds_in_background() ? " in the background" : "",
      st.diverged - b.diverged, st.held_kernels - b.held_kernels);
}

void CudaBackend::mark_diagnostics() {
  diag_base_ = stream_->stats();
}

long CudaBackend::rounding_reuses() const {
  return derived_->code_reuses();
}

long CudaBackend::expert_sort_reuses() const {
  return derived_->sort_reuses();
}

}  // namespace t9
