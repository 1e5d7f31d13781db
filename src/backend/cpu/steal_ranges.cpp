#include "backend/cpu/steal_ranges.h"

#include <algorithm>

#include "core/check.h"

namespace t9::cpu {
namespace {

uint64_t pack(int64_t front, int64_t back) {
  return static_cast<uint64_t>(front) | static_cast<uint64_t>(back) << 32;
}
int64_t front_of(uint64_t fb) {
  return static_cast<int64_t>(fb & 0xFFFFFFFFu);
}
int64_t back_of(uint64_t fb) {
  return static_cast<int64_t>(fb >> 32);
}

}  // namespace

StealRanges::StealRanges(int64_t n, int n_owners, int64_t step)
    : n_owners_(n_owners), step_(step), spans_(std::make_unique<Span[]>(n_owners)) {
  T9_CHECK(n >= 0 && n < (int64_t{1} << 31) && n_owners >= 1 && step >= 1,
           "StealRanges: {} items, {} owners, step {}", n, n_owners, step);
  for (int i = 0; i < n_owners; ++i)
    spans_[i].fb.store(pack(n * i / n_owners, n * (i + 1) / n_owners), std::memory_order_relaxed);
}

bool StealRanges::take_front(Span& s, int64_t* begin, int64_t* end) {
  uint64_t fb = s.fb.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t f = front_of(fb), b = back_of(fb);
    if (f >= b) return false;
    const int64_t nf = std::min(f + step_, b);
    if (s.fb.compare_exchange_weak(fb, pack(nf, b), std::memory_order_relaxed)) {
      *begin = f, *end = nf;
      return true;
    }
  }
}

bool StealRanges::take_back(Span& s, int64_t* begin, int64_t* end) {
  uint64_t fb = s.fb.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t f = front_of(fb), b = back_of(fb);
    if (f >= b) return false;
    const int64_t nb = std::max(b - step_, f);
    if (s.fb.compare_exchange_weak(fb, pack(f, nb), std::memory_order_relaxed)) {
      *begin = nb, *end = b;
      return true;
    }
  }
}

bool StealRanges::next(int owner, int64_t* begin, int64_t* end) {
  T9_CHECK(owner >= 0 && owner < n_owners_, "StealRanges: owner {} of {}", owner, n_owners_);
  if (take_front(spans_[owner], begin, end)) return true;
  for (int k = 1; k < n_owners_; ++k)
    if (take_back(spans_[(owner + k) % n_owners_], begin, end)) return true;
  return false;
}

}  // namespace t9::cpu
