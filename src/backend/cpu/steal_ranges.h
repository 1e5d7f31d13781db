// Internal to the CPU backend: [0, n) items handed out in steps, each thread walking its own
// contiguous span front to back and, once that is empty, taking steps from the back of the
// others'. Decode matmuls use it so that each thread streams one contiguous run of weight rows
// (the hardware prefetchers and the kernel's prefetch of the next rows follow it), while a thread
// the OS delays still has its remaining rows taken by the others (work_pool.h's reason for
// chunking).
//
// Thread-safe: next() may be called concurrently for any owners; every item is handed out once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace t9::cpu {

class StealRanges {
 public:
  // n < 2^31 items, n_owners >= 1 spans of nearly equal size, steps of at most `step` >= 1 items.
  StealRanges(int64_t n, int n_owners, int64_t step);

  // The next items [*begin, *end) for `owner` (< n_owners): the front of its own span, else the
  // back of another span with items left. False when every item has been handed out.
  bool next(int owner, int64_t* begin, int64_t* end);

 private:
  // One span's untaken items [front, back), packed as front | back << 32 so that both ends move
  // with one compare-and-swap; a cache line each (owners update their own span concurrently).
  struct alignas(64) Span {
    std::atomic<uint64_t> fb{0};
  };
  bool take_front(Span& s, int64_t* begin, int64_t* end);
  bool take_back(Span& s, int64_t* begin, int64_t* end);

  int n_owners_;
  int64_t step_;
  std::unique_ptr<Span[]> spans_;
};

}  // namespace t9::cpu
