#include "engine/state_checkpoints.h"

namespace t9::engine {

std::optional<uint64_t> StateCheckpoints::find(uint64_t block_hash) const {
  auto it = entries_.find(block_hash);
  if (it == entries_.end()) return std::nullopt;
  return it->second.id;
}

void StateCheckpoints::touch(uint64_t block_hash) {
  auto it = entries_.find(block_hash);
  if (it == entries_.end()) return;
  lru_.splice(lru_.end(), lru_, it->second.lru);
}

void StateCheckpoints::insert(uint64_t block_hash, uint64_t id) {
  if (entries_.count(block_hash) || max_ <= 0) {
    drop(id);
    touch(block_hash);
    return;
  }
  while (static_cast<int>(entries_.size()) >= max_) erase(lru_.front());
  lru_.push_back(block_hash);
  entries_.emplace(block_hash, Entry{id, std::prev(lru_.end())});
}

void StateCheckpoints::erase(uint64_t block_hash) {
  auto it = entries_.find(block_hash);
  if (it == entries_.end()) return;
  drop(it->second.id);
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

std::vector<uint64_t> StateCheckpoints::take_dropped() {
  std::vector<uint64_t> out;
  out.swap(dropped_);
  return out;
}

}  // namespace t9::engine
