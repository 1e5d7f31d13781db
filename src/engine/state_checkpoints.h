// StateCheckpoints: the prefix cache's index of recurrent-state checkpoints (hybrid Gated DeltaNet
// models). A KV block holds the attention layers' keys and values of its tokens, but a recurrent
// layer's state after n tokens summarises ALL n tokens and cannot be rebuilt from blocks. So a
// prefix hit on such a model needs, besides the cached blocks, a snapshot of the state taken
// exactly at the end of the last hit block. This index maps a block's chained hash (the tokens
// [0, (i + 1) * block_size) under a salt) to the id of such a snapshot; the model runner holds
// the snapshot bytes under that id (ModelRunner::drop_checkpoints frees them).
//
// A checkpoint lives as long as its block stays findable (evicted with it) and within a count
// budget (least recently used first). Ids dropped here are collected for the engine to pass on
// to the runner after the current step. Pure bookkeeping; the engine thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace t9::engine {

class StateCheckpoints {
 public:
  explicit StateCheckpoints(int max_checkpoints) : max_(max_checkpoints) {}

  // A fresh id for a snapshot the runner is about to take (never 0, never reused).
  uint64_t new_id() { return next_id_++; }

  // The checkpoint stored for this block hash, if any (no LRU update: matching is read-only).
  std::optional<uint64_t> find(uint64_t block_hash) const;
  // Mutates: marks the checkpoint of this hash most recently used (a prefix hit adopted it).
  void touch(uint64_t block_hash);
  // Mutates: stores `id` as the checkpoint of `block_hash`. When the hash already has one (another
  // sequence got there first; equal tokens give an equal state) `id` is dropped instead. May drop
  // the least recently used checkpoint to stay within the budget.
  void insert(uint64_t block_hash, uint64_t id);
  // Mutates: the block of this hash was evicted: its checkpoint (if any) is dropped.
  void erase(uint64_t block_hash);
  // Mutates: queues an id the runner should free (an unused snapshot).
  void drop(uint64_t id) { dropped_.push_back(id); }
  // Mutates: the ids dropped since the last call (the engine hands them to the runner).
  std::vector<uint64_t> take_dropped();

  int size() const { return static_cast<int>(entries_.size()); }
  std::vector<uint64_t> block_hashes() const { return {lru_.begin(), lru_.end()}; }
  int max_size() const { return max_; }

 private:
  struct Entry {
    uint64_t id;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };

  int max_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Entry> entries_;  // block hash -> checkpoint
  std::list<uint64_t> lru_;                      // block hashes, least recently used first
  std::vector<uint64_t> dropped_;
};

}  // namespace t9::engine
