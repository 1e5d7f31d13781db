// The CUDA backend's one stream, with CUDA graphs for windows that repeat. Internal to
// src/backend/cuda/*.cu.
//
// A window is what the backend enqueues between two sync() calls: one forward step's uploads,
// ~1000 kernel launches on a hybrid MoE model, and the logits download. Every launch and copy of
// a window is written to its tape: kernel, grid, block, shared bytes and argument bytes
// (padding cleared); a copy by device address, size and its offset in a pinned staging buffer
// (uploads are copied there when called, downloads land there and are handed to the caller after
// the synchronisation). Two windows with the same tape do the same work on the same memory; only
// the staged bytes differ, and every per-step value a kernel reads (positions, n_past, block
// tables, expert ids) is in device memory those uploads fill.
//
// A tape holds argument bytes as passed, so every field of a kernel's argument structs must be
// set: a struct member left uninitialized carries stack bytes that change from step to step, and
// then no tape repeats and nothing replays (FloatParts did this to every MoE decode step until run
// 166; those structs now initialize every member). TEMPO9_CUDA_GRAPH_DEBUG=1 logs where a new
// tape departs from the previous one, and `tempo9 run` prints the replay counts.
//
// So a tape seen a second time is captured into a CUDA graph from the tape (nothing runs
// twice: the window itself already ran), on a host thread of the stream's own
// (StreamConfig::background_builds), and cached once built. Later windows are held back and
// checked record by record against the cached tapes; one that matches a tape to its end runs as
// one graph launch, which removes the per-launch host cost and the gaps between ~1000 small
// kernels. A window that departs from every cached tape issues what it held back and goes on
// launching as it goes.
// Whether a window replays or not, the work and its order are the same, so results are bitwise
// the same (tests/ops/cuda_graph_test.cpp).
//
// A window may also end without a wait (end_window(): pipelined steps, Backend::submit): it is
// replayed or issued, and its downloads are delivered by wait_for(its ticket) later, while the
// next window is recorded. That window then stages its copies in the second pinned buffer (the
// first one's downloads have not landed yet), so its tape, and graph, name that buffer: steps
// recorded that way alternate between two tapes. A window whose predecessor was waited for
// reuses its buffer, so synchronous steps keep one tape.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace t9::cuda {

struct StreamConfig {
  bool graphs = true;  // TEMPO9_CUDA_GRAPHS=0 turns them off
  // Programmatic dependent launch (sm_90+; TEMPO9_CUDA_PDL=0 turns it off): each kernel may be
  // scheduled while the previous one runs and waits for it in its first statement (pdl_enter in
  // cuda_common.cuh). Graphs captured from such launches keep the programmatic edges.
  bool pdl = true;
  int max_graphs = 16;  // cached graphs (least recently used evicted)
  // A cached tape is captured as consecutive graphs of these many kernels (then one of the rest),
  // and a replayed window launches each as soon as its records match, while the host goes on
  // recording: one graph for the whole window kept the device idle for the host's whole
  // recording (~0.13 ms of a 35B decode step, run 167), so replays were no faster than eager
  // launches. The first segment is short (the device starts after a few records), the next long
  // enough that the host records the rest while it runs (35B decode, run 169: 374-379 tok/s
  // against 362 with one graph and 366 eager). TEMPO9_CUDA_GRAPH_SEGMENTS=0: one graph;
  // =4,64 (increasing sizes): other segments (run 174: 4/64, 16/256 and 8/64/256 ran even).
  std::vector<long> segment_kernels = {8, 128};
  size_t staging_bytes = size_t{16} << 20;       // pinned staging to start with; grows to fit a
  size_t max_staging_bytes = size_t{512} << 20;  // window, up to this (larger copies run direct)
  // A tape seen twice is built into its graph on a host thread of the stream's own (capture,
  // instantiate, upload: ~2.8 ms for a 35B decode step, ~1.1 ms for 8 layers), while the engine
  // goes on recording and launching: built on the engine's thread, every new graph held the next
  // window's launches back that long, and a decode step's device time is shorter (the 35B's
  // 8-layer file: 0.721 ms a step over 128 tokens with 5 builds in run 300, 0.676 over 1,024 in
  // run 299; the whole 35B +1.0% with background builds, run 301). The window that asked for it
  // and those until it is taken (end_window) run eagerly; which windows replay then depends on
  // the host's timing, never the work (the same bits). False: built in end_window itself (tests
  // that count replays).
  bool background_builds = true;
};

class Stream {
 public:
  explicit Stream(const StreamConfig& cfg);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // kernel<<<grid, block, smem>>>(args...), recorded; every parameter given (defaults too).
  template <typename... P, typename... A>
  void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "pass every kernel argument, defaults too");
    static_assert(sizeof...(P) > 0, "kernels take arguments");
    const std::array<uint32_t, sizeof...(P)> sizes{static_cast<uint32_t>(sizeof(P))...};
    const size_t at = begin_kernel(reinterpret_cast<const void*>(kernel), grid, block, smem,
                                   sizes.data(), sizes.size());
    (put_arg<P>(static_cast<P>(std::forward<A>(args))), ...);  // left to right
    end_record(at);
  }

  // host -> device and device -> host copies in stream order. `host` may be reused as soon as
  // upload() returns; download()'s bytes are in `host` after synchronize().
  void upload(void* dst, const void* host, size_t n_bytes);
  void download(void* host, const void* src, size_t n_bytes);

  // The raw stream for work outside the tape (host round trips, stream-ordered allocation):
  // issues what the window holds back; the rest of the window is neither recorded nor replayed.
  cudaStream_t eager();
  // Memory is about to be freed: issues what the window holds back and drops every cached graph
  // (a graph's copy nodes keep the allocation they were captured with, not just its address,
  // so a graph over freed memory must not run again even if the address is handed out anew).
  cudaStream_t before_free();
  // The raw stream for events only (profiling turns graphs off, so launches are never held).
  cudaStream_t raw() const { return stream_; }

  // Ends the window: replays or issues it, waits for the device, delivers the downloads (also
  // those of windows ended before without a wait).
  void synchronize();
  // Ends the window without waiting: replays or issues it; returns its ticket for wait_for (0: the
  // window held nothing). Its downloads land later, so the next window stages elsewhere.
  uint64_t end_window();
  // Waits until the window with this ticket (and every one before it) has run on the device, and
  // delivers their downloads. Returns at once for a window already delivered.
  void wait_for(uint64_t ticket);

  const CudaGraphStats& stats() const { return stats_; }
  // Whether graphs are built on the stream's own thread (StreamConfig::background_builds).
  bool builds_in_background() const { return builder_ != nullptr; }
  // Waits for the graphs being built in the background and takes them (tests; a no-op without
  // background builds).
  void settle_builds();
  // Whether the window holds anything (a record, or work issued through eager()).
  bool has_work() const { return busy_; }

 private:
  enum class Mode { kEager, kReplay, kOff };
  struct Graph;
  class Builder;  // the background builds' thread and queue (cuda_stream.cu)
  struct Pending {
    void* host;
    const uint8_t* staged;
    size_t n_bytes;
  };
  // One of the two pinned staging buffers (a window's uploads are copied there when called, its
  // downloads land there).
  struct Staging {
    uint8_t* base = nullptr;
    size_t bytes = 0;
  };
  // A window ended without a wait (end_window), oldest first.
  struct Ended {
    uint64_t ticket;
    int staging;  // its staging buffer, in use until it is delivered
    cudaEvent_t done;
    std::vector<Pending> pending;
    bool replayed;
    std::chrono::steady_clock::time_point t_open, t_end;
  };

  size_t begin_kernel(const void* func, dim3 grid, dim3 block, size_t smem, const uint32_t* sizes,
                      size_t n_args);
  template <typename P>
  void put_arg(P v) {
    // Padding bytes must not make equal tapes differ. GCC 12.2 misplaces padding that follows
    // an array of structs (it zeroes live bytes instead): argument structs keep none there
    // (SliceArgs' static_asserts, cuda_units.cuh), and a type with no padding at all (unique
    // object representations: Bf16Args) never reaches the builtin.
    if constexpr (!std::has_unique_object_representations_v<P>) __builtin_clear_padding(&v);
    std::memcpy(tape_.data() + cursor_, &v, sizeof(P));
    cursor_ += (sizeof(P) + 7) / 8 * 8;
  }
  void end_record(size_t at);
  // The open window's staging buffer: n bytes there, or null when they do not fit.
  uint8_t* stage(size_t n_bytes);
  void copy_record(uint32_t kind, void* dev, uint8_t* staged, size_t n_bytes);
  void issue(size_t from, size_t to, cudaStream_t s);  // the tape's records in [from, to)
  void diverge();                                      // the newest record left cand_'s tape
  Graph* find_graph(bool exact);
  long kernels_on_tape(size_t from) const;  // kernel records on tape_ from byte `from` (stats)
  // TEMPO9_CUDA_GRAPH_DEBUG=1: logs where a new tape first departs from the previous window's
  // (record, kernel, grid, argument), the first 20 times: what keeps a step from repeating.
  void explain_new_tape();
  // Opens the window at its first record or copy: picks its staging buffer (the last window's
  // when that one has been delivered, else the other, waiting for it if it is still in use).
  void open_window();
  bool staging_in_use(int b) const;
  void deliver_oldest();  // waits for ended_.front() and delivers its downloads
  // tape_ becomes a graph: built now, or queued for the builder (background_builds).
  void build_graph(uint64_t hash);
  // Caches a built graph, evicting the least recently used past cfg_.max_graphs.
  void adopt(std::unique_ptr<Graph> g, double build_ms);
  void adopt_built();  // takes what the builder finished (end_window, open_window)
  // The next window follows the most recently used cached tape (kReplay), or runs eagerly.
  void follow_latest();
  std::vector<size_t> segment_ends() const;  // tape_'s segment boundaries (bytes), last = size
  void drop_graphs();

  StreamConfig cfg_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t capture_ = nullptr;  // graphs are captured here, from a tape
  Mode mode_ = Mode::kEager;
  std::vector<uint8_t> tape_;
  size_t cursor_ = 0;
  std::vector<Pending> pending_;
  std::array<Staging, 2> staging_{};  // pinned
  int cur_ = 0;                       // the open window's staging buffer
  size_t staged_ = 0, staging_want_ = 0;
  std::deque<Ended> ended_;
  std::vector<cudaEvent_t> spare_events_;
  uint64_t next_ticket_ = 1;
  std::vector<std::unique_ptr<Graph>> graphs_;
  Graph* cand_ = nullptr;             // kReplay: the cached tape the window follows
  size_t launched_ = 0;               // kReplay: tape bytes already launched as cand_'s segments
  size_t next_seg_ = 0;               // and the first segment not launched
  std::array<uint64_t, 8> recent_{};  // hashes of the latest eager windows' tapes
  size_t recent_next_ = 0;
  uint64_t clock_ = 0;
  bool busy_ = false;                             // the window has work
  std::chrono::steady_clock::time_point t_open_;  // the window's first record
  CudaGraphStats stats_;
  bool debug_ = false;
  int debug_left_ = 20;
  std::vector<uint8_t> last_tape_;  // debug_: the previous new tape
  std::unique_ptr<Builder> builder_;  // background_builds (and graphs) only
};

}  // namespace t9::cuda
