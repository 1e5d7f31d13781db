#include "tokenizer/fragment_cache.h"

#include <functional>

namespace t9::tok {
namespace {

uint64_t text_hash(std::string_view text) {
  return std::hash<std::string_view>{}(text);
}

}  // namespace

bool FragmentCache::lookup(std::string_view text, std::vector<TokenId>& out) {
  const uint64_t h = text_hash(text);
  std::lock_guard lock(mu_);
  const auto [lo, hi] = index_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const List::iterator e = it->second;
    if (e->text != text) continue;  // a hash collision
    lru_.splice(lru_.begin(), lru_, e);
    out.insert(out.end(), e->ids.begin(), e->ids.end());
    ++hits_;
    return true;
  }
  ++misses_;
  return false;
}

void FragmentCache::insert(std::string_view text, std::span<const TokenId> ids) {
  Entry fresh{std::string(text), std::vector<TokenId>(ids.begin(), ids.end()), text_hash(text)};
  std::lock_guard lock(mu_);
  if (fresh.bytes() > max_bytes_.load()) return;
  const auto [lo, hi] = index_.equal_range(fresh.hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second->text == text) return;  // another thread encoded it meanwhile
  bytes_ += fresh.bytes();
  lru_.push_front(std::move(fresh));
  index_.emplace(lru_.front().hash, lru_.begin());
  evict_locked();
}

void FragmentCache::set_max_bytes(size_t max_bytes) {
  std::lock_guard lock(mu_);
  max_bytes_.store(max_bytes);
  evict_locked();
}

void FragmentCache::evict_locked() {
  while (bytes_ > max_bytes_.load() && !lru_.empty()) {
    const List::iterator last = std::prev(lru_.end());
    const auto [lo, hi] = index_.equal_range(last->hash);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == last) {
        index_.erase(it);
        break;
      }
    }
    bytes_ -= last->bytes();
    lru_.erase(last);
  }
}

FragmentCache::Stats FragmentCache::stats() const {
  std::lock_guard lock(mu_);
  return {hits_, misses_, bytes_, lru_.size()};
}

}  // namespace t9::tok
