// The backend's stream: tapes, staging, and graph capture and replay (cuda_stream.cuh).
#include "backend/cuda/cuda_prelude.cuh"  // first: see there

#define XXH_INLINE_ALL
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_stream.cuh"
#include "core/log.h"

namespace t9::cuda {
namespace {

// Tape records. Every field is written explicitly into zeroed bytes, so equal work gives equal
// bytes; `bytes` is the whole record's length (a multiple of 8).
enum RecordKind : uint32_t { kKernel = 1, kUpload = 2, kDownload = 3 };

struct KernelHead {  // then n_args uint32 sizes (padded to 8), then the arguments (each to 8)
  uint32_t kind, bytes;
  const void* func;
  uint32_t grid[3], block[3];
  uint32_t smem, n_args;
};
static_assert(sizeof(KernelHead) == 48 && std::has_unique_object_representations_v<KernelHead>);

struct CopyHead {
  uint32_t kind, bytes;
  void* dev;        // the device side of the copy
  uint8_t* staged;  // the host side: in a pinned staging buffer
  uint64_t n_bytes;
};
static_assert(sizeof(CopyHead) == 32 && std::has_unique_object_representations_v<CopyHead>);

constexpr size_t kMaxArgs = 32;
constexpr size_t kStagingAlign = 256;

size_t round8(size_t n) {
  return (n + 7) / 8 * 8;
}

// The tape's records in [from, to) on stream s (launched, or recorded into a capture there).
void issue_records(const uint8_t* t, size_t from, size_t to, cudaStream_t s, bool pdl) {
  for (size_t at = from; at < to;) {
    uint32_t kind = 0, bytes = 0;
    std::memcpy(&kind, t + at, 4);
    std::memcpy(&bytes, t + at + 4, 4);
    if (kind == kKernel) {
      KernelHead h;
      std::memcpy(&h, t + at, sizeof(h));
      uint32_t sizes[kMaxArgs];
      std::memcpy(sizes, t + at + sizeof(h), 4 * h.n_args);
      void* argv[kMaxArgs];
      size_t off = at + sizeof(h) + round8(4 * h.n_args);
      for (uint32_t i = 0; i < h.n_args; ++i) {
        argv[i] = const_cast<uint8_t*>(t + off);  // the runtime copies the bytes at the call
        off += round8(sizes[i]);
      }
      cudaLaunchConfig_t lc{};
      lc.gridDim = dim3(h.grid[0], h.grid[1], h.grid[2]);
      lc.blockDim = dim3(h.block[0], h.block[1], h.block[2]);
      lc.dynamicSmemBytes = h.smem;
      lc.stream = s;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      lc.attrs = &attr;
      lc.numAttrs = pdl ? 1 : 0;
      CUDA_CHECK(cudaLaunchKernelExC(&lc, h.func, argv));
    } else {
      CopyHead h;
      std::memcpy(&h, t + at, sizeof(h));
      if (kind == kUpload)
        CUDA_CHECK(cudaMemcpyAsync(h.dev, h.staged, h.n_bytes, cudaMemcpyHostToDevice, s));
      else
        CUDA_CHECK(cudaMemcpyAsync(h.staged, h.dev, h.n_bytes, cudaMemcpyDeviceToHost, s));
    }
    at += bytes;
  }
}

}  // namespace

// A cached tape as consecutive segments, each its own graph: segment i covers tape bytes
// [segs[i - 1].end, segs[i].end) and the last ends at tape.size().
struct Stream::Graph {
  std::vector<uint8_t> tape;
  struct Segment {
    size_t end;
    cudaGraphExec_t exec;
  };
  std::vector<Segment> segs;
  uint64_t last_use = 0;

  // The graph of `t`, one segment per end (the last = t.size()): each captured on `capture` by
  // this thread from the tape (recorded, not run) and uploaded on `upload`, so that its first
  // replay does not pay for the upload (run 120's chain bench timed first replays: ~1 us more
  // per launch than run 121's later ones).
  Graph(std::vector<uint8_t> t, const std::vector<size_t>& ends, cudaStream_t capture,
        cudaStream_t upload, bool pdl)
      : tape(std::move(t)) {
    for (const size_t end : ends) {
      const size_t begin = segs.empty() ? 0 : segs.back().end;
      CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
      issue_records(tape.data(), begin, end, capture, pdl);
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamEndCapture(capture, &graph));
      cudaGraphExec_t exec = nullptr;
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_CHECK(cudaGraphDestroy(graph));
      CUDA_CHECK(cudaGraphUpload(exec, upload));
      segs.push_back({end, exec});
    }
  }
  ~Graph() {
    for (const Segment& sg : segs) (void)cudaGraphExecDestroy(sg.exec);  // no throw here
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
};

// StreamConfig::background_builds: one host thread builds the queued tapes' graphs, one at a
// time, on the stream's capture stream (which nothing else then uses), and hands them back
// through take(). Every call but the thread's own loop comes from the engine's thread; the
// queue and the results are shared under mu_.
class Stream::Builder {
 public:
  struct Built {
    std::unique_ptr<Graph> graph;
    double ms;  // host time of the build (capture, instantiate, upload)
  };

  Builder(int device, cudaStream_t capture, bool pdl)
      : device_(device), capture_(capture), pdl_(pdl), thread_([this] { run(); }) {}
  ~Builder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      jobs_.clear();
    }
    work_cv_.notify_all();
    thread_.join();
  }
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  // Whether a build of this tape (by hash) was submitted and its graph not yet taken.
  bool pending(uint64_t hash) const {
    return std::find(pending_.begin(), pending_.end(), hash) != pending_.end();
  }
  void submit(std::vector<uint8_t> tape, std::vector<size_t> ends, uint64_t hash) {
    pending_.push_back(hash);
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back({std::move(tape), std::move(ends), hash});
    }
    work_cv_.notify_one();
  }
  // The builds finished since the last call.
  std::vector<Built> take() {
    std::vector<Built> out;
    std::vector<uint64_t> hashes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_.empty()) return out;
      out.swap(done_);
      hashes.swap(done_hashes_);
    }
    for (const uint64_t h : hashes) std::erase(pending_, h);
    return out;
  }
  // Returns once nothing is queued or being built.
  void settle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
  }
  // Drops the queued builds, waits for the running one and destroys every graph not taken (their
  // tapes name memory that is about to be freed).
  void discard() {
    std::vector<Built> dropped;
    {
      std::unique_lock<std::mutex> lock(mu_);
      jobs_.clear();
      idle_cv_.wait(lock, [&] { return !busy_; });
      dropped.swap(done_);
      done_hashes_.clear();
    }
    pending_.clear();
  }

 private:
  struct Job {
    std::vector<uint8_t> tape;
    std::vector<size_t> ends;
    uint64_t hash;
  };

  void run() {
    CUDA_CHECK(cudaSetDevice(device_));
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
      lock.unlock();
      const auto t0 = std::chrono::steady_clock::now();
      auto g = std::make_unique<Graph>(std::move(job.tape), job.ends, capture_, capture_, pdl_);
      CUDA_CHECK(cudaStreamSynchronize(capture_));  // uploaded before the engine may launch it
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      lock.lock();
      done_.push_back({std::move(g), ms});
      done_hashes_.push_back(job.hash);
      busy_ = false;
      idle_cv_.notify_all();
    }
  }

  const int device_;
  const cudaStream_t capture_;
  const bool pdl_;
  std::vector<uint64_t> pending_;  // the engine's thread only
  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Job> jobs_;
  std::vector<Built> done_;
  std::vector<uint64_t> done_hashes_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

Stream::Stream(const StreamConfig& cfg) : cfg_(cfg) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));
  mode_ = cfg_.graphs ? Mode::kEager : Mode::kOff;
  tape_.reserve(size_t{1} << 20);
  const char* dbg = std::getenv("TEMPO9_CUDA_GRAPH_DEBUG");
  debug_ = cfg_.graphs && dbg != nullptr && std::string_view(dbg) == "1";
  if (cfg_.graphs && cfg_.background_builds) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    builder_ = std::make_unique<Builder>(device, capture_, cfg_.pdl);
  }
}

Stream::~Stream() {
  // No CUDA_CHECK: a destructor must not abort while another failure unwinds.
  builder_.reset();  // joins its thread (a build in progress finishes first)
  (void)cudaStreamSynchronize(stream_);
  graphs_.clear();
  for (const Ended& e : ended_) (void)cudaEventDestroy(e.done);
  for (cudaEvent_t ev : spare_events_) (void)cudaEventDestroy(ev);
  for (const Staging& st : staging_)
    if (st.base != nullptr) (void)cudaFreeHost(st.base);
  (void)cudaStreamDestroy(capture_);
  (void)cudaStreamDestroy(stream_);
}

size_t Stream::begin_kernel(const void* func, dim3 grid, dim3 block, size_t smem,
                            const uint32_t* sizes, size_t n_args) {
  T9_CHECK(n_args <= kMaxArgs, "kernel with {} arguments (at most {})", n_args, kMaxArgs);
  T9_CHECK(smem <= std::numeric_limits<uint32_t>::max(), "{} bytes of shared memory", smem);
  size_t bytes = sizeof(KernelHead) + round8(4 * n_args);
  for (size_t i = 0; i < n_args; ++i) bytes += round8(sizes[i]);
  const size_t at = tape_.size();
  open_window();
  tape_.resize(at + bytes);  // zero-filled
  KernelHead h{};
  h.kind = kKernel;
  h.bytes = static_cast<uint32_t>(bytes);
  h.func = func;
  h.grid[0] = grid.x, h.grid[1] = grid.y, h.grid[2] = grid.z;
  h.block[0] = block.x, h.block[1] = block.y, h.block[2] = block.z;
  h.smem = static_cast<uint32_t>(smem);
  h.n_args = static_cast<uint32_t>(n_args);
  std::memcpy(tape_.data() + at, &h, sizeof(h));
  std::memcpy(tape_.data() + at + sizeof(h), sizes, 4 * n_args);
  cursor_ = at + sizeof(h) + round8(4 * n_args);
  return at;
}

void Stream::copy_record(uint32_t kind, void* dev, uint8_t* staged, size_t n_bytes) {
  const size_t at = tape_.size();
  open_window();
  tape_.resize(at + sizeof(CopyHead));
  CopyHead h{};
  h.kind = kind;
  h.bytes = sizeof(CopyHead);
  h.dev = dev;
  h.staged = staged;
  h.n_bytes = n_bytes;
  std::memcpy(tape_.data() + at, &h, sizeof(h));
  end_record(at);
}

void Stream::end_record(size_t at) {
  switch (mode_) {
    case Mode::kEager:
      issue(at, tape_.size(), stream_);
      break;
    case Mode::kOff:
      issue(at, tape_.size(), stream_);
      tape_.resize(at);  // not recorded
      break;
    case Mode::kReplay:
      if (tape_.size() > cand_->tape.size() ||
          std::memcmp(tape_.data() + at, cand_->tape.data() + at, tape_.size() - at) != 0) {
        diverge();  // another cached tape with this prefix, or eager from here
        if (mode_ != Mode::kReplay) break;
      }
      if (next_seg_ + 1 < cand_->segs.size() && tape_.size() == cand_->segs[next_seg_].end) {
        // A whole segment matched: it runs now, while the host records the next one (the last
        // segment waits for sync(), which tells that the window ends with the tape).
        CUDA_CHECK(cudaGraphLaunch(cand_->segs[next_seg_].exec, stream_));
        launched_ = cand_->segs[next_seg_].end;
        ++next_seg_;
      }
      break;
  }
}

void Stream::diverge() {
  if (Graph* g = find_graph(false); g != nullptr) {
    cand_ = g;
    return;
  }
  issue(launched_, tape_.size(), stream_);  // what was held back, in order
  ++stats_.diverged;
  stats_.held_kernels += kernels_on_tape(launched_);
  mode_ = Mode::kEager;
  cand_ = nullptr;
}

long Stream::kernels_on_tape(size_t from) const {
  long n = 0;
  for (size_t at = from; at < tape_.size();) {
    uint32_t kind = 0, bytes = 0;
    std::memcpy(&kind, tape_.data() + at, 4);
    std::memcpy(&bytes, tape_.data() + at + 4, 4);
    n += kind == kKernel;
    at += bytes;
  }
  return n;
}

void Stream::explain_new_tape() {
  if (debug_left_ <= 0) return;
  --debug_left_;
  const std::vector<uint8_t>& a = last_tape_;
  const std::vector<uint8_t>& b = tape_;
  size_t at = 0;
  long record = 0;
  for (; at < a.size() && at < b.size(); ++record) {
    uint32_t ba = 0, bb = 0;
    std::memcpy(&ba, a.data() + at + 4, 4);
    std::memcpy(&bb, b.data() + at + 4, 4);
    if (ba != bb || std::memcmp(a.data() + at, b.data() + at, ba) != 0) break;
    at += ba;
  }
  std::string what;
  if (at >= a.size() || at >= b.size()) {
    what = fmt::format("one tape ends at record {} ({} vs {} bytes)", record, a.size(), b.size());
  } else {
    uint32_t kind = 0;
    std::memcpy(&kind, b.data() + at, 4);
    if (kind != kKernel) {
      CopyHead ha{}, hb{};
      std::memcpy(&ha, a.data() + at, std::min(sizeof(ha), a.size() - at));
      std::memcpy(&hb, b.data() + at, sizeof(hb));
      what = fmt::format("record {}: copy kind {} dev {} -> {}, {} -> {} bytes, staged {} -> {}",
                         record, kind, ha.dev, hb.dev, ha.n_bytes, hb.n_bytes,
                         static_cast<void*>(ha.staged), static_cast<void*>(hb.staged));
    } else {
      KernelHead ha{}, hb{};
      std::memcpy(&ha, a.data() + at, std::min(sizeof(ha), a.size() - at));
      std::memcpy(&hb, b.data() + at, sizeof(hb));
      const char* name = nullptr;
      if (cudaFuncGetName(&name, hb.func) != cudaSuccess || name == nullptr) name = "?";
      what = fmt::format("record {}: kernel {} grid ({},{},{}) -> ({},{},{})", record, name,
                         ha.grid[0], ha.grid[1], ha.grid[2], hb.grid[0], hb.grid[1], hb.grid[2]);
      if (ha.func == hb.func && ha.n_args == hb.n_args) {
        uint32_t sizes[kMaxArgs];
        std::memcpy(sizes, b.data() + at + sizeof(hb), 4 * hb.n_args);
        size_t off = at + sizeof(hb) + round8(4 * hb.n_args);
        for (uint32_t i = 0; i < hb.n_args; ++i) {
          const size_t n = round8(sizes[i]);
          if (std::memcmp(a.data() + off, b.data() + off, n) != 0) {
            for (size_t w = 0; w < n; w += 8) {  // the argument's first differing word
              uint64_t va = 0, vb = 0;
              std::memcpy(&va, a.data() + off + w, 8);
              std::memcpy(&vb, b.data() + off + w, 8);
              if (va != vb) {
                what += fmt::format(", argument {} ({} bytes), word {}: {:#x} -> {:#x}", i,
                                    sizes[i], w / 8, va, vb);
                break;
              }
            }
            break;
          }
          off += n;
        }
      } else if (ha.func != hb.func) {
        const char* na = nullptr;
        if (cudaFuncGetName(&na, ha.func) != cudaSuccess || na == nullptr) na = "?";
        what += fmt::format(" (was {})", na);
      }
    }
  }
  log_line(LogLevel::kInfo, fmt::format("cuda graphs: window {} is a new tape ({} bytes): {}",
                                        stats_.windows, b.size(), what));
  last_tape_ = tape_;
}

Stream::Graph* Stream::find_graph(bool exact) {
  for (auto& g : graphs_) {
    const bool fits = exact ? g->tape.size() == tape_.size() : g->tape.size() >= tape_.size();
    // The segments already launched must be g's first segments too. Tapes equal up to here
    // split into segments at the same bytes (segment_ends() counts kernels), so this holds
    // whenever the prefix matches; the check keeps the invariant explicit.
    const bool same_launched =
        next_seg_ == 0 || (g->segs.size() >= next_seg_ && g->segs[next_seg_ - 1].end == launched_);
    if (fits && same_launched && std::memcmp(g->tape.data(), tape_.data(), tape_.size()) == 0)
      return g.get();
  }
  return nullptr;
}

void Stream::issue(size_t from, size_t to, cudaStream_t s) {
  issue_records(tape_.data(), from, to, s, cfg_.pdl);
}

uint8_t* Stream::stage(size_t n_bytes) {
  open_window();  // picks the buffer (before any byte is written into it)
  Staging& st = staging_[cur_];
  if (st.base == nullptr) {  // first copy into this buffer: nothing refers to it yet
    st.bytes = std::max(cfg_.staging_bytes, std::min(staging_want_, cfg_.max_staging_bytes));
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&st.base), st.bytes, cudaHostAllocDefault));
  }
  const size_t off = (staged_ + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  if (off + n_bytes > st.bytes) {
    staging_want_ = std::max(staging_want_, off + n_bytes);
    return nullptr;
  }
  staged_ = off + n_bytes;
  return st.base + off;
}

void Stream::upload(void* dst, const void* host, size_t n_bytes) {
  if (n_bytes == 0) return;
  uint8_t* staged = stage(n_bytes);
  if (staged == nullptr) {
    // From pageable memory the runtime stages the bytes before returning.
    CUDA_CHECK(cudaMemcpyAsync(dst, host, n_bytes, cudaMemcpyHostToDevice, eager()));
    return;
  }
  std::memcpy(staged, host, n_bytes);
  copy_record(kUpload, dst, staged, n_bytes);
}

void Stream::download(void* host, const void* src, size_t n_bytes) {
  if (n_bytes == 0) return;
  uint8_t* staged = stage(n_bytes);
  if (staged == nullptr) {
    CUDA_CHECK(cudaMemcpyAsync(host, src, n_bytes, cudaMemcpyDeviceToHost, eager()));
    return;
  }
  pending_.push_back({host, staged, n_bytes});
  copy_record(kDownload, const_cast<void*>(src), staged, n_bytes);
}

cudaStream_t Stream::eager() {
  open_window();
  if (mode_ == Mode::kReplay) issue(launched_, tape_.size(), stream_);
  mode_ = Mode::kOff;
  tape_.clear();
  cand_ = nullptr;
  return stream_;
}

void Stream::open_window() {
  if (busy_) return;
  busy_ = true;
  t_open_ = std::chrono::steady_clock::now();
  staged_ = 0;
  // The last window's buffer when its downloads have landed (synchronous steps: always, so their
  // tapes stay one), else the other one, once the window before that has been delivered.
  if (staging_in_use(cur_)) {
    cur_ ^= 1;
    while (staging_in_use(cur_)) deliver_oldest();
  }
  Staging& st = staging_[cur_];
  if (st.base != nullptr && staging_want_ > st.bytes && st.bytes < cfg_.max_staging_bytes) {
    drop_graphs();  // they copy through the old buffer
    if (mode_ == Mode::kReplay) mode_ = Mode::kEager;  // no cached tape left to follow
    CUDA_CHECK(cudaFreeHost(st.base));
    st.bytes = std::min(cfg_.max_staging_bytes, std::max(staging_want_, 2 * st.bytes));
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&st.base), st.bytes, cudaHostAllocDefault));
  }
  // A graph the builder finished during the last window serves this one (a window that would
  // have run eagerly follows it instead).
  if (builder_ != nullptr && mode_ == Mode::kEager) {
    adopt_built();
    follow_latest();
  }
}

bool Stream::staging_in_use(int b) const {
  for (const Ended& e : ended_)
    if (e.staging == b) return true;
  return false;
}

cudaStream_t Stream::before_free() {
  const cudaStream_t s = eager();
  drop_graphs();
  return s;
}

void Stream::drop_graphs() {
  if (builder_ != nullptr) builder_->discard();
  graphs_.clear();
  cand_ = nullptr;
}

void Stream::build_graph(uint64_t hash) {
  if (builder_ != nullptr) {
    if (!builder_->pending(hash)) builder_->submit(tape_, segment_ends(), hash);
    return;
  }
  // Here, behind this window's eager work (the upload goes on its stream).
  const auto t0 = std::chrono::steady_clock::now();
  auto g = std::make_unique<Graph>(tape_, segment_ends(), capture_, stream_, cfg_.pdl);
  adopt(std::move(g),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

void Stream::adopt(std::unique_ptr<Graph> g, double build_ms) {
  if (static_cast<int>(graphs_.size()) >= cfg_.max_graphs) {
    // The least recently used, never the tape an open window follows (settle_builds may come
    // mid-window).
    auto lru = graphs_.end();
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
      if (it->get() != cand_ && (lru == graphs_.end() || (*it)->last_use < (*lru)->last_use))
        lru = it;
    if (lru != graphs_.end()) graphs_.erase(lru);
  }
  g->last_use = ++clock_;
  graphs_.push_back(std::move(g));
  ++stats_.captures;
  stats_.capture_ms += build_ms;
}

void Stream::adopt_built() {
  if (builder_ == nullptr) return;
  for (Builder::Built& b : builder_->take()) adopt(std::move(b.graph), b.ms);
}

void Stream::settle_builds() {
  if (builder_ == nullptr) return;
  builder_->settle();
  adopt_built();
  if (!busy_) follow_latest();
}

std::vector<size_t> Stream::segment_ends() const {
  std::vector<size_t> ends;
  long kernels = 0;
  size_t next = 0;  // index into cfg_.segment_kernels
  for (size_t at = 0; at < tape_.size();) {
    uint32_t kind = 0, bytes = 0;
    std::memcpy(&kind, tape_.data() + at, 4);
    std::memcpy(&bytes, tape_.data() + at + 4, 4);
    at += bytes;
    if (kind != kKernel || next >= cfg_.segment_kernels.size()) continue;
    if (++kernels == cfg_.segment_kernels[next]) {
      if (at < tape_.size()) ends.push_back(at);
      kernels = 0;
      ++next;
    }
  }
  ends.push_back(tape_.size());
  return ends;
}

uint64_t Stream::end_window() {
  if (!busy_) return 0;
  bool ran_eager = mode_ == Mode::kEager, replayed = false;
  const auto t_end = std::chrono::steady_clock::now();
  if (mode_ == Mode::kReplay && !tape_.empty()) {
    // Another cached tape may end here (find_graph keeps to those whose first segments are the
    // ones launched).
    Graph* g = tape_.size() == cand_->tape.size() ? cand_ : find_graph(true);
    if (g != nullptr) {
      for (size_t i = next_seg_; i < g->segs.size(); ++i)
        CUDA_CHECK(cudaGraphLaunch(g->segs[i].exec, stream_));
      g->last_use = ++clock_;
      ++stats_.replays;
      replayed = true;
    } else {
      issue(launched_, tape_.size(), stream_);  // ended before any cached tape did
      ++stats_.diverged;
      stats_.held_kernels += kernels_on_tape(launched_);
      ran_eager = true;
    }
  }
  if (ran_eager && !tape_.empty()) {
    // A tape seen twice in the latest windows becomes a graph (it is built from the tape, not
    // run: this window's work is already queued).
    const uint64_t h = XXH3_64bits(tape_.data(), tape_.size());
    if (std::find(recent_.begin(), recent_.end(), h) != recent_.end()) {
      if (find_graph(true) == nullptr) build_graph(h);
    } else {
      recent_[recent_next_++ % recent_.size()] = h;
      if (debug_) explain_new_tape();
    }
  }
  Ended e{next_ticket_++, cur_, nullptr, std::move(pending_), replayed, t_open_, t_end};
  if (spare_events_.empty()) {
    CUDA_CHECK(cudaEventCreateWithFlags(&e.done, cudaEventDisableTiming));
  } else {
    e.done = spare_events_.back();
    spare_events_.pop_back();
  }
  CUDA_CHECK(cudaEventRecord(e.done, stream_));
  ended_.push_back(std::move(e));
  ++stats_.windows;
  busy_ = false;

  // The next window.
  launched_ = 0;
  next_seg_ = 0;
  pending_.clear();
  tape_.clear();
  adopt_built();
  follow_latest();
  return ended_.back().ticket;
}

void Stream::follow_latest() {
  cand_ = nullptr;
  for (auto& g : graphs_)
    if (cand_ == nullptr || g->last_use > cand_->last_use) cand_ = g.get();
  mode_ = !cfg_.graphs ? Mode::kOff : cand_ != nullptr ? Mode::kReplay : Mode::kEager;
}

void Stream::deliver_oldest() {
  using Ms = std::chrono::duration<double, std::milli>;
  Ended& e = ended_.front();
  const auto t_wait = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaEventSynchronize(e.done));
  const auto t_done = std::chrono::steady_clock::now();
  for (const Pending& p : e.pending) std::memcpy(p.host, p.staged, p.n_bytes);
  if (e.replayed) {
    stats_.replay_host_ms += Ms(e.t_end - e.t_open).count();
    stats_.replay_wait_ms += Ms(t_done - t_wait).count();
  } else {
    stats_.other_ms += Ms(t_done - e.t_open).count();
  }
  spare_events_.push_back(e.done);
  ended_.pop_front();
}

void Stream::wait_for(uint64_t ticket) {
  while (!ended_.empty() && ended_.front().ticket <= ticket) deliver_oldest();
}

void Stream::synchronize() {
  const uint64_t ticket = end_window();
  if (ended_.empty()) {  // nothing recorded: work outside the tape may still be queued
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  wait_for(ticket != 0 ? ticket : ended_.back().ticket);
}

}  // namespace t9::cuda
