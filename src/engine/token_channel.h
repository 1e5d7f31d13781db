// TokenChannel: the per-request queue between the engine thread (producer, through the
// EventCallback it hands out) and an HTTP thread (consumer). Thread-safe; push never blocks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "engine/request.h"

namespace t9::engine {

class TokenChannel : public std::enable_shared_from_this<TokenChannel> {
 public:
  static std::shared_ptr<TokenChannel> create() { return std::make_shared<TokenChannel>(); }

  void push(const TokenEvent& ev) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(ev);
    }
    cv_.notify_one();
  }

  // Waits up to `timeout` for the next event; false on timeout.
  bool pop(TokenEvent* out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    *out = std::move(events_.front());
    events_.pop_front();
    return true;
  }

  // A callback for GenerateRequest::on_event that keeps the channel alive.
  EventCallback callback() {
    return [self = shared_from_this()](const TokenEvent& ev) { self->push(ev); };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
};

}  // namespace t9::engine
