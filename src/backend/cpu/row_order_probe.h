// Which order a decode matmul (one activation row) walks its weight rows in: kTileRows rows
// interleaved (one activation load serves four rows; four streams through memory) or one row at a
// time (one sequential stream per thread). Both give the same bits (each row's dot is the same
// instruction sequence). Which is faster depends on the CPU: on a 2-core AMD EPYC (Zen 4) VM one
// row at a time decoded Qwen2.5-Coder-1.5B Q4_K_M 23% faster (10.0 -> 12.3 tok/s on 1 thread,
// 18.7 -> 23.1 on 2; 2026-12-05), while the interleaved tile was tuned on Intel VMs. So the
// backend measures instead of guessing: it alternates the two over the first large decode calls,
// per weight byte, and keeps the faster (the interleaved tile unless one row at a time wins by
// kMargin). TEMPO9_CPU_DECODE_ROWS=1|4 fixes the order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace t9::cpu {

class RowOrderProbe {
 public:
  enum class Order { kProbing, kTile, kOneRow };
  static constexpr int kSkip = 8;               // calls left alone first (caches, page faults)
  static constexpr int kProbeCalls = 48;        // then alternated, half in each order
  static constexpr double kMargin = 0.03;       // one row at a time must be this much faster
  static constexpr size_t kMinBytes = 1 << 20;  // calls smaller than this are not timed

  explicit RowOrderProbe(Order fixed = Order::kProbing) : order_(fixed) {}

  // The order of the next decode call of `bytes` weight bytes: true = one row at a time.
  bool one_row(size_t bytes) const {
    if (order_ != Order::kProbing) return order_ == Order::kOneRow;
    return bytes >= kMinBytes && seen_ >= kSkip && (seen_ - kSkip) % 2 == 1;
  }
  // Whether that call is timed (record() follows it).
  bool timing(size_t bytes) const { return order_ == Order::kProbing && bytes >= kMinBytes; }
  // A timed call's seconds (its order as one_row() said before it).
  void record(size_t bytes, double seconds) {
    if (order_ != Order::kProbing || bytes < kMinBytes) return;
    if (seen_ >= kSkip) {
      const int m = (seen_ - kSkip) % 2;
      seconds_[m] += seconds;
      bytes_[m] += static_cast<double>(bytes);
    }
    if (++seen_ < kSkip + kProbeCalls) return;
    const double tile = seconds_[0] / bytes_[0], one = seconds_[1] / bytes_[1];
    order_ = one < tile * (1.0 - kMargin) ? Order::kOneRow : Order::kTile;
  }
  Order order() const { return order_; }
  // Seconds per GB measured for the tile and one row at a time (after probing).
  double tile_s_per_gb() const { return seconds_[0] / bytes_[0] * 1e9; }
  double one_row_s_per_gb() const { return seconds_[1] / bytes_[1] * 1e9; }

 private:
  Order order_;
  int seen_ = 0;  // timed calls so far
  double seconds_[2] = {0, 0}, bytes_[2] = {0, 0};
};

}  // namespace t9::cpu
