// LruCache: at most `capacity` values by string key, the least recently used dropped first.
// Locked, so HTTP threads and the engine thread may share one. Values are returned by copy: keep
// them small (a shared_ptr, a pair of them).
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace t9 {

template <class V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  // The value under `key` (now the most recently used), or nullopt.
  std::optional<V> find(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  // Keeps the value already under `key` if there is one.
  void insert(const std::string& key, V value) {
    std::lock_guard lock(mu_);
    if (index_.count(key)) return;
    lru_.emplace_front(key, std::move(value));
    index_[key] = lru_.begin();
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return lru_.size();
  }

 private:
  using Entry = std::pair<std::string, V>;
  mutable std::mutex mu_;
  size_t capacity_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

}  // namespace t9
