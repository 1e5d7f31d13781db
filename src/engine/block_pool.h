// BlockPool: fixed-size KV blocks (block_size tokens each), reference counted, backed by storage
// that grows on demand. Pure bookkeeping: the storage itself lives in the model runner, which the
// GrowFn asks for more blocks; declaring a huge context reserves nothing until tokens arrive.
//
// Free queue (ref-0 blocks), head = taken next:
//   [ uncached blocks (last freed first, then never used ones in id order) ...
//     | cached blocks, least recently freed first ... ]
// Uncached blocks hold nothing reusable, so they go first; cached (hashed, full) blocks stay
// findable through the hash map until they reach the head and are evicted, in LRU order.
// Before evicting a cached block the pool grows its storage (up to max_blocks) instead.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "engine/sequence.h"

namespace t9::engine {

struct BlockPoolConfig {
  int block_size_tokens = 16;
  int initial_blocks = 0;      // storage asked for up front
  int grow_chunk_blocks = 64;  // storage grows by at least this much at a time
  int max_blocks = 4096;       // cap on storage, in blocks
};

// Asks the model runner to back n_blocks_total blocks (ids [0, n_blocks_total)); false = no
// memory for that many: the pool retries with only what it needs, then lowers max_blocks.
using GrowFn = std::function<bool(int n_blocks_total)>;

class BlockPool {
 public:
  BlockPool(const BlockPoolConfig& config, GrowFn grow);

  int block_size() const { return config_.block_size_tokens; }
  int n_blocks() const { return static_cast<int>(blocks_.size()); }  // backed now
  int max_blocks() const { return max_blocks_; }
  int n_free() const { return uncached_.size + cached_.size; }  // ref 0 (cached or not)
  int n_cached_free() const { return cached_.size; }
  int n_used() const { return n_blocks() - n_free(); }  // ref > 0
  int n_cached() const { return static_cast<int>(hash_to_block_.size()); }
  // Blocks take() can hand out now: free ones plus storage not yet grown.
  int n_available() const { return n_free() + (max_blocks_ - n_blocks()); }

  // Mutates: appends n blocks with ref 1 to *out, uncached first, then growing, then evicting
  // cached blocks LRU. All or nothing: false (and nothing changed but maybe grown storage).
  bool take(int n, std::vector<BlockId>* out);
  // Mutates: ref + 1 (a prefix hit); a ref-0 block leaves the free queue.
  void ref(BlockId b);
  // Mutates: ref - 1; at 0 the block joins the free queue (cached: tail, uncached: head).
  void unref(BlockId b);

  // The cached block holding this chained hash, if any.
  std::optional<BlockId> find(uint64_t hash) const;
  // Called with a block's hash when eviction (take() reusing a cached block) forgets it, so that
  // what hangs off the hash (a recurrent-state checkpoint) goes with it.
  void set_on_evict(std::function<void(uint64_t hash)> fn) { on_evict_ = std::move(fn); }
  // Mutates: registers a full in-use block under its hash. No-op when the hash is already mapped
  // (another sequence computed the same content first) or the block already has a hash.
  void set_hash(BlockId b, uint64_t hash);

  int ref_count(BlockId b) const { return blocks_[b].ref; }
  bool is_cached(BlockId b) const { return blocks_[b].hashed; }
  uint64_t block_hash(BlockId b) const { return blocks_[b].hash; }  // valid when is_cached
  std::vector<BlockId> free_queue() const;                          // head first (tests, integrity)

  // expected_refs[b] = number of block tables holding b. Checks ref counts, the free queue (exactly
  // the ref-0 blocks, uncached before cached, links consistent) and the hash map.
  Status check_integrity(std::span<const int> expected_refs) const;

 private:
  struct Block {
    int ref = 0;
    bool hashed = false;
    uint64_t hash = 0;
    int prev = -1;  // links within its free list
    int next = -1;
    bool in_free = false;
  };
  // Doubly linked list of free blocks through Block::prev/next.
  struct FreeList {
    int head = -1;
    int tail = -1;
    int size = 0;
  };

  bool grow_for(int n_needed_uncached);
  FreeList& list_of(BlockId b) { return blocks_[b].hashed ? cached_ : uncached_; }
  void push_front(BlockId b);
  void push_back(BlockId b);
  void unlink(BlockId b);
  void evict_hash(BlockId b);
  BlockId pop_head();
  Status check_list(const FreeList& list, bool hashed) const;

  BlockPoolConfig config_;
  GrowFn grow_;
  int max_blocks_;
  std::vector<Block> blocks_;
  FreeList uncached_;  // the free queue's head part; grown blocks join its tail
  FreeList cached_;    // LRU: head = least recently freed
  std::unordered_map<uint64_t, BlockId> hash_to_block_;
  std::function<void(uint64_t)> on_evict_;
};

}  // namespace t9::engine
