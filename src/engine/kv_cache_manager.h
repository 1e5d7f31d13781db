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
#include "engine/state_checkpoints.h"

namespace t9::engine {

struct KvCacheConfig {
  BlockPoolConfig pool;
  bool enable_prefix_cache = true;  // false: no hashing, no sharing (the no_prefix_cache switch)
  // The model keeps per-sequence recurrent state (ModelRunner::has_recurrent_state): a prefix
  // hit must also restore a state checkpoint (StateCheckpoints), so hits end only where one is.
  bool recurrent_checkpoints = false;
  // The runner saves checkpoints inside a step (ModelRunner::supports_mid_step_checkpoints).
  bool mid_step_checkpoints = false;
  int max_state_checkpoints = 64;  // cached checkpoints kept at most (LRU beyond)
};

struct PrefixMatch {
  std::vector<BlockId> blocks;  // cached blocks for the sequence's first blocks, in order
  int n_tokens = 0;             // blocks.size() * block_size
  // Recurrent models: the state checkpoint after n_tokens (0 when n_tokens == 0), and the cached
  // KV prefix before trimming to a checkpoint (where the next checkpoint is worth taking).
  uint64_t checkpoint = 0;
  int n_kv_tokens = 0;
};

struct KvStats {
  int n_blocks_total = 0;  // backed by storage
  int n_blocks_max = 0;
  int n_blocks_used = 0;        // ref > 0
  int n_blocks_cached = 0;      // ref 0 but still findable
  int n_blocks_free = 0;        // ref 0 (cached included) + not yet grown
  int n_state_checkpoints = 0;  // cached recurrent-state checkpoints
};

// Chained hash of one full block (exposed for tests).
uint64_t hash_block(uint64_t parent_hash, uint64_t salt, std::span<const TokenId> tokens);

class KvCacheManager {
 public:
  KvCacheManager(const KvCacheConfig& config, GrowFn grow);

  int block_size() const { return pool_.block_size(); }
  bool prefix_cache_enabled() const { return config_.enable_prefix_cache; }
  bool checkpoints_enabled() const {
    return config_.enable_prefix_cache && config_.recurrent_checkpoints;
  }
  const BlockPool& pool() const { return pool_; }
  KvStats stats() const;

  // Longest run of cached full blocks matching seq's tokens. Never covers the whole sequence:
  // at least the last token is left to compute so that its logits exist. Does not touch the
  // pool; only fills seq.block_hashes (a memo). Empty when the prefix cache is off.
  PrefixMatch match_prefix(Sequence& seq) const;
  // Fills seq.block_hashes for the blocks match_prefix would look up (a memo; no pool access).
  void ensure_prompt_hashes(Sequence& seq) const {
    if (config_.enable_prefix_cache) ensure_hashes(seq, (seq.n_total() - 1) / block_size());
  }

  // Mutates: makes seq.block_table cover n_computed + n_new_tokens tokens. With `prefix`
  // (only for a sequence holding no blocks), first adopts those cached blocks and sets
  // n_computed to prefix->n_tokens. All or nothing: false leaves seq and the pool unchanged.
  bool allocate(Sequence& seq, int n_new_tokens, const PrefixMatch* prefix = nullptr);

  // Mutates: registers every full block below n_computed as cached (call after a step).
  void commit(Sequence& seq);

  // --- Recurrent-state checkpoints (checkpoints_enabled() only; see Sequence) ---
  // Mutates: after admission with `prefix`, takes its checkpoint as seq's restore_checkpoint and
  // plans seq.checkpoint_positions.
  void plan_checkpoints(Sequence& seq, const PrefixMatch& prefix);
  // Mutates: also save seq's state when its computed tokens reach `pos` (a block boundary ahead
  // of n_computed), so that a sequence sharing that prefix finds a checkpoint there. No-op
  // without checkpoints or when pos is already planned.
  void add_checkpoint_position(Sequence& seq, int pos);
  // n_tokens cut so that a step starting at n_past stops at the next planned position (with
  // mid-step checkpoints: at the second, the first being mid_checkpoint's).
  int cut_at_checkpoint(const Sequence& seq, int n_past, int n_tokens) const;
  // With mid-step checkpoints: the planned position strictly inside the step of n_tokens from
  // n_past that the step saves on its way (ForwardSeq::save_mid_checkpoint), else 0.
  int mid_checkpoint(const Sequence& seq, int n_past, int n_tokens) const;
  // Mutates: the checkpoint id a step ending at `end` saves the state into: a new one at a
  // planned position, the sequence's rolling one at other block boundaries, else 0.
  uint64_t checkpoint_for_step(Sequence& seq, int end);
  // The same for a pipelined step, planned before the sequence's previous step has returned:
  // at block boundaries it names seq.rolling_spare, never the rolling checkpoint itself, which
  // the sequence publishes if it ends before this step (whose state then holds one token more).
  uint64_t checkpoint_for_lookahead(Sequence& seq, int end);
  // Mutates: the step ending at `end` ran and saved into `id` (after commit(seq)).
  void on_checkpoint_saved(Sequence& seq, int end, uint64_t id);
  // Mutates: a step's snapshot that will never be published (its step failed).
  void drop_checkpoint(uint64_t id) { ckpts_.drop(id); }
  // True for models with recurrent state (checkpoints are then also used to undo speculative
  // steps, whether or not the prefix cache is on).
  bool recurrent() const { return config_.recurrent_checkpoints; }
  uint64_t new_checkpoint_id() { return ckpts_.new_id(); }
  // Mutates: checkpoint ids the runner can free now (evicted, superseded or unpublished).
  std::vector<uint64_t> take_dropped_checkpoints() { return ckpts_.take_dropped(); }

  // Mutates: releases seq's blocks (last block first, so a sequence's tail is evicted before
  // its shared head) and resets n_computed to 0. Cached blocks stay findable until evicted.
  // With `keep_state` the sequence's rolling checkpoint is published for later hits (false when
  // a failed step may have left it half written).
  void free(Sequence& seq, bool keep_state = true);

  // Ref counts equal the number of block tables holding each block, the free queue holds
  // exactly the ref-0 blocks, the hash map is consistent, tables cover n_computed.
  Status check_integrity(std::span<const Sequence* const> live) const;

 private:
  void ensure_hashes(Sequence& seq, int n_full_blocks) const;
  uint64_t checkpoint_into(Sequence& seq, int end, uint64_t& rolling);
  // Stores checkpoint `id` for the block ending at `end` (or drops it if that block is gone).
  void publish(const Sequence& seq, int end, uint64_t id);

  KvCacheConfig config_;
  BlockPool pool_;
  StateCheckpoints ckpts_;
};

}  // namespace t9::engine
