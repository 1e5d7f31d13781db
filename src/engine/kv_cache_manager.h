// KvCacheManager: the facade the scheduler uses for KV memory — allocation of blocks for a
// sequence's next tokens, the prefix cache (chained hashes of FULL blocks), freeing, and an
// integrity check. Pure bookkeeping over BlockPool; no tensors here.
//
// Block hash i = XXH3_64(parent hash i-1, cache salt, the block's token ids): equal hashes mean
// equal token prefixes (up to 64-bit collisions) under the same salt.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "engine/block_pool.h"
#include "engine/sequence.h"

namespace t9::engine {

struct KvCacheConfig {
  BlockPoolConfig pool;
  bool enable_prefix_cache = true;  // false: no hashing, no sharing (the no_prefix_cache switch)
};

struct PrefixMatch {
  std::vector<BlockId> blocks;  // cached blocks for the sequence's first blocks, in order
  int n_tokens = 0;             // blocks.size() * block_size
};

struct KvStats {
  int n_blocks_total = 0;  // backed by storage
  int n_blocks_max = 0;
  int n_blocks_used = 0;    // ref > 0
  int n_blocks_cached = 0;  // ref 0 but still findable
  int n_blocks_free = 0;    // ref 0 (cached included) + not yet grown
};

// Chained hash of one full block (exposed for tests).
uint64_t hash_block(uint64_t parent_hash, uint64_t salt, std::span<const TokenId> tokens);

class KvCacheManager {
 public:
  KvCacheManager(const KvCacheConfig& config, GrowFn grow);

  int block_size() const { return pool_.block_size(); }
  bool prefix_cache_enabled() const { return config_.enable_prefix_cache; }
  const BlockPool& pool() const { return pool_; }
  KvStats stats() const;

  // Longest run of cached full blocks matching seq's tokens. Never covers the whole sequence:
  // at least the last token is left to compute so that its logits exist. Does not touch the
  // pool; only fills seq.block_hashes (a memo). Empty when the prefix cache is off.
  PrefixMatch match_prefix(Sequence& seq) const;

  // Mutates: makes seq.block_table cover n_computed + n_new_tokens tokens. With `prefix`
  // (only for a sequence holding no blocks), first adopts those cached blocks and sets
  // n_computed to prefix->n_tokens. All or nothing: false leaves seq and the pool unchanged.
  bool allocate(Sequence& seq, int n_new_tokens, const PrefixMatch* prefix = nullptr);

  // Mutates: registers every full block below n_computed as cached (call after a step).
  void commit(Sequence& seq);

  // Mutates: releases seq's blocks (last block first, so a sequence's tail is evicted before
  // its shared head) and resets n_computed to 0. Cached blocks stay findable until evicted.
  void free(Sequence& seq);

  // Ref counts equal the number of block tables holding each block, the free queue holds
  // exactly the ref-0 blocks, the hash map is consistent, tables cover n_computed.
  Status check_integrity(std::span<const Sequence* const> live) const;

 private:
  void ensure_hashes(Sequence& seq, int n_full_blocks) const;

  KvCacheConfig config_;
  BlockPool pool_;
};

}  // namespace t9::engine
