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

// Grows storage so that at least n_needed_uncached more uncached blocks exist, by a chunk when
// possible. New blocks join the uncached tail in id order. When even the needed amount fails,
// the cap drops just below it: every failure lowers the cap, and smaller requests still grow.
bool BlockPool::grow_for(int n_needed_uncached) {
  const int old = n_blocks();
  const int room = max_blocks_ - old;
  if (n_needed_uncached <= 0) return true;
  if (room <= 0) return false;
  const int want = std::min(room, n_needed_uncached);
  const int chunk = std::min(room, std::max(n_needed_uncached, config_.grow_chunk_blocks));
  int n_new = 0;
  if (!grow_ || grow_(old + chunk)) {
    n_new = chunk;
  } else if (want < chunk && grow_(old + want)) {
    n_new = want;
  } else {
    max_blocks_ = old + want - 1;
    return false;
  }
  blocks_.resize(old + n_new);
  for (int b = old; b < old + n_new; ++b) push_back(b);
  return n_new >= n_needed_uncached;
}

BlockId BlockPool::pop_head() {
  BlockId b = uncached_.size > 0 ? uncached_.head : cached_.head;
  unlink(b);
  if (blocks_[b].hashed) evict_hash(b);
  return b;
}

bool BlockPool::take(int n, std::vector<BlockId>* out) {
  if (n <= 0) return true;
  if (n > n_available()) return false;
  if (n > uncached_.size) grow_for(n - uncached_.size);
  if (n > n_free()) return false;  // growth failed and eviction cannot cover the rest
  for (int i = 0; i < n; ++i) {
    BlockId b = pop_head();
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
  const uint64_t hash = blk.hash;
  hash_to_block_.erase(hash);
  blk.hashed = false;
  blk.hash = 0;
  if (on_evict_) on_evict_(hash);
}

void BlockPool::push_front(BlockId b) {
  Block& blk = blocks_[b];
  FreeList& l = list_of(b);
  blk.prev = -1;
  blk.next = l.head;
  if (l.head >= 0) blocks_[l.head].prev = b;
  l.head = b;
  if (l.tail < 0) l.tail = b;
  l.size++;
  blk.in_free = true;
}

void BlockPool::push_back(BlockId b) {
  Block& blk = blocks_[b];
  FreeList& l = list_of(b);
  blk.next = -1;
  blk.prev = l.tail;
  if (l.tail >= 0) blocks_[l.tail].next = b;
  l.tail = b;
  if (l.head < 0) l.head = b;
  l.size++;
  blk.in_free = true;
}

void BlockPool::unlink(BlockId b) {
  Block& blk = blocks_[b];
  T9_CHECK(blk.in_free, "block {} is not in the free queue", b);
  FreeList& l = list_of(b);
  if (blk.prev >= 0)
    blocks_[blk.prev].next = blk.next;
  else
    l.head = blk.next;
  if (blk.next >= 0)
    blocks_[blk.next].prev = blk.prev;
  else
    l.tail = blk.prev;
  blk.prev = blk.next = -1;
  blk.in_free = false;
  l.size--;
}

std::vector<BlockId> BlockPool::free_queue() const {
  std::vector<BlockId> q;
  for (const FreeList* l : {&uncached_, &cached_})
    for (int b = l->head; b >= 0 && q.size() <= blocks_.size(); b = blocks_[b].next) q.push_back(b);
  return q;
}

Status BlockPool::check_list(const FreeList& list, bool hashed) const {
  int n = 0;
  int prev = -1;
  for (int b = list.head; b >= 0; prev = b, b = blocks_[b].next) {
    if (++n > n_blocks()) return error("free list has a cycle");
    const Block& blk = blocks_[b];
    if (blk.prev != prev) return error("free list: bad prev link at block {}", b);
    if (blk.hashed != hashed) return error("block {} is in the wrong free list", b);
    if (!blk.in_free || blk.ref != 0)
      return error("block {} in a free list has ref {}", b, blk.ref);
  }
  if (list.tail != prev) return error("free list: tail {} but last block {}", list.tail, prev);
  if (list.size != n) return error("free list: size {} but {} blocks linked", list.size, n);
  return {};
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
  T9_TRY(check_list(uncached_, false));
  T9_TRY(check_list(cached_, true));
  if (n_free() != n_zero)
    return error("free queue has {} blocks but {} blocks have ref 0", n_free(), n_zero);
  return {};
}

}  // namespace t9::engine
