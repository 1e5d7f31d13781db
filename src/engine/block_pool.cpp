#include "engine/block_pool.h"

#include <algorithm>

#include "core/check.h"

namespace t9::engine {

BlockPool::BlockPool(const BlockPoolConfig& config, GrowFn grow)
    : config_(config), grow_(std::move(grow)), max_blocks_(config.max_blocks) {
  T9_CHECK(config_.block_size_tokens > 0, "block_size_tokens {}", config_.block_size_tokens);
  T9_CHECK(config_.grow_chunk_blocks > 0, "grow_chunk_blocks {}", config_.grow_chunk_blocks);
  T9_CHECK(config_.initial_blocks >= 0 && config_.initial_blocks <= max_blocks_,
           "initial_blocks {} max_blocks {}", config_.initial_blocks, max_blocks_);
  if (config_.initial_blocks > 0) grow_for(config_.initial_blocks);
}

// Grows storage so that at least n_needed_uncached more uncached blocks exist, in chunks.
// New blocks enter the free-queue head in id order (lowest id taken first).
bool BlockPool::grow_for(int n_needed_uncached) {
  int room = max_blocks_ - n_blocks();
  if (n_needed_uncached <= 0 || room <= 0) return n_needed_uncached <= 0;
  int n_new = std::min(room, std::max(n_needed_uncached, config_.grow_chunk_blocks));
  int old = n_blocks();
  if (grow_ && !grow_(old + n_new)) {
    max_blocks_ = old;  // out of memory: stop growing, evict instead
    return false;
  }
  blocks_.resize(old + n_new);
  for (int b = old + n_new - 1; b >= old; --b) push_front(b);
  return n_new >= n_needed_uncached;
}

bool BlockPool::take(int n, std::vector<BlockId>* out) {
  if (n <= 0) return true;
  if (n > n_available()) return false;
  if (n > n_uncached_free_) grow_for(n - n_uncached_free_);
  if (n > n_free_) return false;  // growth failed and eviction cannot cover the rest
  for (int i = 0; i < n; ++i) {
    BlockId b = head_;
    unlink(b);
    if (blocks_[b].hashed) evict_hash(b);
    blocks_[b].ref = 1;
    out->push_back(b);
  }
  return true;
}

void BlockPool::ref(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.ref == 0) unlink(b);
  blk.ref++;
}

void BlockPool::unref(BlockId b) {
  Block& blk = blocks_[b];
  T9_CHECK(blk.ref > 0, "unref of free block {}", b);
  if (--blk.ref > 0) return;
  if (blk.hashed)
    push_back(b);
  else
    push_front(b);
}

std::optional<BlockId> BlockPool::find(uint64_t hash) const {
  auto it = hash_to_block_.find(hash);
  if (it == hash_to_block_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::set_hash(BlockId b, uint64_t hash) {
  Block& blk = blocks_[b];
  T9_CHECK(blk.ref > 0, "set_hash on free block {}", b);
  if (blk.hashed || hash_to_block_.count(hash)) return;
  blk.hashed = true;
  blk.hash = hash;
  hash_to_block_.emplace(hash, b);
}

void BlockPool::evict_hash(BlockId b) {
  Block& blk = blocks_[b];
  hash_to_block_.erase(blk.hash);
  blk.hashed = false;
  blk.hash = 0;
}

void BlockPool::push_front(BlockId b) {
  Block& blk = blocks_[b];
  blk.prev = -1;
  blk.next = head_;
  if (head_ >= 0) blocks_[head_].prev = b;
  head_ = b;
  if (tail_ < 0) tail_ = b;
  blk.in_free = true;
  n_free_++;
  if (!blk.hashed) n_uncached_free_++;
}

void BlockPool::push_back(BlockId b) {
  Block& blk = blocks_[b];
  blk.next = -1;
  blk.prev = tail_;
  if (tail_ >= 0) blocks_[tail_].next = b;
  tail_ = b;
  if (head_ < 0) head_ = b;
  blk.in_free = true;
  n_free_++;
  if (!blk.hashed) n_uncached_free_++;
}

void BlockPool::unlink(BlockId b) {
  Block& blk = blocks_[b];
  T9_CHECK(blk.in_free, "block {} is not in the free queue", b);
  if (blk.prev >= 0) blocks_[blk.prev].next = blk.next; else head_ = blk.next;
  if (blk.next >= 0) blocks_[blk.next].prev = blk.prev; else tail_ = blk.prev;
  blk.prev = blk.next = -1;
  blk.in_free = false;
  n_free_--;
  if (!blk.hashed) n_uncached_free_--;
}

std::vector<BlockId> BlockPool::free_queue() const {
  std::vector<BlockId> q;
  for (int b = head_; b >= 0 && q.size() <= blocks_.size(); b = blocks_[b].next) q.push_back(b);
  return q;
}

Status BlockPool::check_integrity(std::span<const int> expected_refs) const {
  if (static_cast<int>(expected_refs.size()) != n_blocks())
    return error("expected_refs has {} entries for {} blocks", expected_refs.size(), n_blocks());
  int n_zero = 0;
  for (int b = 0; b < n_blocks(); ++b) {
    const Block& blk = blocks_[b];
    if (blk.ref != expected_refs[b])
      return error("block {}: ref count {} but {} block tables hold it", b, blk.ref,
                   expected_refs[b]);
    if ((blk.ref == 0) != blk.in_free)
      return error("block {}: ref {} but in_free {}", b, blk.ref, blk.in_free);
    if (blk.ref == 0) n_zero++;
    if (blk.hashed) {
      auto it = hash_to_block_.find(blk.hash);
      if (it == hash_to_block_.end() || it->second != b)
        return error("block {}: hashed but the hash map does not point to it", b);
    }
  }
  for (auto [hash, b] : hash_to_block_) {
    if (b < 0 || b >= n_blocks() || !blocks_[b].hashed || blocks_[b].hash != hash)
      return error("hash map entry {:#x} -> block {} is stale", hash, b);
  }
  std::vector<BlockId> q = free_queue();
  if (static_cast<int>(q.size()) != n_zero || n_free_ != n_zero)
    return error("free queue has {} blocks (counter {}) but {} blocks have ref 0", q.size(),
                 n_free_, n_zero);
  int n_uncached = 0;
  bool seen_cached = false;
  for (size_t i = 0; i < q.size(); ++i) {
    const Block& blk = blocks_[q[i]];
    if (blk.prev != (i == 0 ? -1 : q[i - 1])) return error("free queue: bad prev link at {}", q[i]);
    if (blk.hashed) seen_cached = true;
    else if (seen_cached) return error("free queue: uncached block {} after a cached one", q[i]);
    else n_uncached++;
  }
  if (tail_ != (q.empty() ? -1 : q.back())) return error("free queue: tail {} is wrong", tail_);
  if (n_uncached != n_uncached_free_)
    return error("free queue: {} uncached blocks, counter says {}", n_uncached, n_uncached_free_);
  return {};
}

}  // namespace t9::engine
