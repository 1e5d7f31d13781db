#include "engine/kv_cache_manager.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack, no malloc per hash
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace t9::engine {

uint64_t hash_block(uint64_t parent_hash, uint64_t salt, std::span<const TokenId> tokens) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &parent_hash, sizeof(parent_hash));
  XXH3_64bits_update(&state, &salt, sizeof(salt));
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  return XXH3_64bits_digest(&state);
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config, GrowFn grow)
    : config_(config),
      pool_(config.pool, std::move(grow)),
      ckpts_(config.recurrent_checkpoints ? config.max_state_checkpoints : 0) {
  pool_.set_on_evict([this](uint64_t hash) { ckpts_.erase(hash); });
}

KvStats KvCacheManager::stats() const {
  KvStats s;
  s.n_blocks_total = pool_.n_blocks();
  s.n_blocks_max = pool_.max_blocks();
  s.n_blocks_used = pool_.n_used();
  s.n_blocks_cached = pool_.n_cached_free();
  s.n_blocks_free = pool_.n_available();
  s.n_state_checkpoints = ckpts_.size();
  return s;
}

void KvCacheManager::ensure_hashes(Sequence& seq, int n_full_blocks) const {
  const int bs = block_size();
  for (int i = static_cast<int>(seq.block_hashes.size()); i < n_full_blocks; ++i) {
    uint64_t parent = i == 0 ? 0 : seq.block_hashes[i - 1];
    std::span<const TokenId> toks(seq.tokens.data() + static_cast<size_t>(i) * bs, bs);
    seq.block_hashes.push_back(hash_block(parent, seq.cache_salt, toks));
  }
}

PrefixMatch KvCacheManager::match_prefix(Sequence& seq) const {
  PrefixMatch m;
  if (!config_.enable_prefix_cache) return m;
  // (n_total - 1) / bs full blocks at most: the last token is always recomputed.
  int n_max_blocks = (seq.n_total() - 1) / block_size();
  ensure_hashes(seq, n_max_blocks);
  size_t n_usable = 0;  // blocks a hit may adopt: all, or up to the last one with a checkpoint
  for (int i = 0; i < n_max_blocks; ++i) {
    auto b = pool_.find(seq.block_hashes[i]);
    if (!b) break;
    m.blocks.push_back(*b);
    if (!checkpoints_enabled()) {
      n_usable = m.blocks.size();
    } else if (auto c = ckpts_.find(seq.block_hashes[i])) {
      n_usable = m.blocks.size();
      m.checkpoint = *c;
    }
  }
  m.n_kv_tokens = static_cast<int>(m.blocks.size()) * block_size();
  m.blocks.resize(n_usable);
  m.n_tokens = static_cast<int>(n_usable) * block_size();
  return m;
}

bool KvCacheManager::allocate(Sequence& seq, int n_new_tokens, const PrefixMatch* prefix) {
  const int bs = block_size();
  int n_hit_blocks = 0;
  int n_hit_free = 0;  // hit blocks sitting in the free queue: adopting them uses capacity
  int n_computed = seq.n_computed;
  if (prefix && !prefix->blocks.empty()) {
    T9_CHECK(seq.block_table.empty() && seq.n_computed == 0, "prefix for seq {} holding blocks",
             seq.id);
    n_hit_blocks = static_cast<int>(prefix->blocks.size());
    for (BlockId b : prefix->blocks) n_hit_free += pool_.ref_count(b) == 0;
    n_computed = prefix->n_tokens;
  }
  int n_have = std::max(static_cast<int>(seq.block_table.size()), n_hit_blocks);
  int n_need = (n_computed + n_new_tokens + bs - 1) / bs - n_have;
  n_need = std::max(n_need, 0);
  if (n_need + n_hit_free > pool_.n_available()) return false;
  // Adopt hits first so that take() cannot evict them.
  for (int i = 0; i < n_hit_blocks; ++i) {
    pool_.ref(prefix->blocks[i]);
    seq.block_table.push_back(prefix->blocks[i]);
  }
  if (!pool_.take(n_need, &seq.block_table)) {
    // Storage growth failed after the capacity check; undo the adoption (only hits were added:
    // a sequence with a prefix starts with an empty table).
    for (int i = n_hit_blocks - 1; i >= 0; --i) pool_.unref(prefix->blocks[i]);
    seq.block_table.resize(seq.block_table.size() - n_hit_blocks);
    return false;
  }
  if (n_hit_blocks > 0) {
    seq.n_computed = n_computed;
    seq.n_committed_blocks = n_hit_blocks;
  }
  return true;
}

void KvCacheManager::commit(Sequence& seq) {
  if (!config_.enable_prefix_cache) return;
  int n_full = seq.n_computed / block_size();
  if (n_full <= seq.n_committed_blocks) return;
  ensure_hashes(seq, n_full);
  for (int i = seq.n_committed_blocks; i < n_full; ++i)
    pool_.set_hash(seq.block_table[i], seq.block_hashes[i]);
  seq.n_committed_blocks = n_full;
}

void KvCacheManager::plan_checkpoints(Sequence& seq, const PrefixMatch& prefix) {
  seq.checkpoint_positions.clear();
  if (!checkpoints_enabled()) return;
  const int bs = block_size();
  if (prefix.n_tokens > 0) {
    seq.restore_checkpoint = prefix.checkpoint;
    ckpts_.touch(seq.block_hashes[prefix.n_tokens / bs - 1]);
  }
  // The branch point first: the next sequence sharing this cached KV prefix (another agent with
  // the same system prompt) then finds a checkpoint where the prefixes part.
  if (prefix.n_kv_tokens > prefix.n_tokens) seq.checkpoint_positions.push_back(prefix.n_kv_tokens);
  const int prompt_end = seq.n_prompt / bs * bs;
  if (prompt_end > std::max(prefix.n_tokens, prefix.n_kv_tokens))
    seq.checkpoint_positions.push_back(prompt_end);
}

void KvCacheManager::add_checkpoint_position(Sequence& seq, int pos) {
  if (!checkpoints_enabled() || pos <= seq.n_computed || pos % block_size() != 0) return;
  auto& ps = seq.checkpoint_positions;
  auto it = std::lower_bound(ps.begin(), ps.end(), pos);
  if (it == ps.end() || *it != pos) ps.insert(it, pos);  // ascending: cut_at_checkpoint's order
}

int KvCacheManager::cut_at_checkpoint(const Sequence& seq, int n_past, int n_tokens) const {
  bool mid = config_.mid_step_checkpoints;  // the first position inside is saved on the way
  for (int p : seq.checkpoint_positions) {
    if (p <= n_past || p >= n_past + n_tokens) continue;
    if (!std::exchange(mid, false)) return p - n_past;
  }
  return n_tokens;
}

int KvCacheManager::mid_checkpoint(const Sequence& seq, int n_past, int n_tokens) const {
  if (!config_.mid_step_checkpoints) return 0;
  for (int p : seq.checkpoint_positions)
    if (p > n_past && p < n_past + n_tokens) return p;
  return 0;
}

uint64_t KvCacheManager::checkpoint_for_step(Sequence& seq, int end) {
  return checkpoint_into(seq, end, seq.rolling_checkpoint);
}

uint64_t KvCacheManager::checkpoint_for_lookahead(Sequence& seq, int end) {
  return checkpoint_into(seq, end, seq.rolling_spare);
}

// A new id at a planned position, `rolling` (made on first use) at other block boundaries.
uint64_t KvCacheManager::checkpoint_into(Sequence& seq, int end, uint64_t& rolling) {
  if (!checkpoints_enabled()) return 0;
  if (std::find(seq.checkpoint_positions.begin(), seq.checkpoint_positions.end(), end) !=
      seq.checkpoint_positions.end())
    return ckpts_.new_id();
  if (end % block_size() != 0) return 0;
  if (rolling == 0) rolling = ckpts_.new_id();
  return rolling;
}

void KvCacheManager::on_checkpoint_saved(Sequence& seq, int end, uint64_t id) {
  if (id == seq.rolling_checkpoint) {
    seq.rolling_position = end;
    return;
  }
  if (id == seq.rolling_spare) {  // a pipelined step's save: the spare is the newer state now
    std::swap(seq.rolling_checkpoint, seq.rolling_spare);
    seq.rolling_position = end;
    return;
  }
  std::erase(seq.checkpoint_positions, end);
  publish(seq, end, id);
}

void KvCacheManager::publish(const Sequence& seq, int end, uint64_t id) {
  const int i = end / block_size() - 1;
  if (i < 0 || i >= seq.n_committed_blocks || !pool_.find(seq.block_hashes[i])) {
    ckpts_.drop(id);
    return;
  }
  ckpts_.insert(seq.block_hashes[i], id);
}

void KvCacheManager::free(Sequence& seq, bool keep_state) {
  if (seq.rolling_checkpoint != 0) {
    if (keep_state && seq.rolling_position > 0)
      publish(seq, seq.rolling_position, seq.rolling_checkpoint);
    else
      ckpts_.drop(seq.rolling_checkpoint);
  }
  if (seq.spec_undo != 0) ckpts_.drop(seq.spec_undo);
  if (seq.rolling_spare != 0) ckpts_.drop(seq.rolling_spare);
  seq.spec_undo = 0;
  seq.rolling_spare = 0;
  seq.rolling_checkpoint = 0;
  seq.rolling_position = 0;
  seq.restore_checkpoint = 0;
  seq.checkpoint_positions.clear();
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) pool_.unref(*it);
  seq.block_table.clear();
  seq.n_computed = 0;
  seq.n_committed_blocks = 0;
}

Status KvCacheManager::check_integrity(std::span<const Sequence* const> live) const {
  std::vector<int> refs(pool_.n_blocks(), 0);
  const int bs = block_size();
  for (const Sequence* s : live) {
    int n_min = (s->n_computed + bs - 1) / bs;
    if (static_cast<int>(s->block_table.size()) < n_min)
      return error("seq {}: {} blocks cannot hold {} computed tokens", s->id, s->block_table.size(),
                   s->n_computed);
    for (BlockId b : s->block_table) {
      if (b < 0 || b >= pool_.n_blocks())
        return error("seq {}: block id {} out of range [0, {})", s->id, b, pool_.n_blocks());
      refs[b]++;
    }
    std::vector<BlockId> sorted = s->block_table;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return error("seq {}: a block appears twice in its table", s->id);
    // A cached block in a table must hold exactly the content this sequence expects there.
    for (int i = 0; i < s->n_committed_blocks && config_.enable_prefix_cache; ++i) {
      if (i >= static_cast<int>(s->block_hashes.size()))
        return error("seq {}: committed block {} has no hash", s->id, i);
      BlockId b = s->block_table[i];
      if (pool_.is_cached(b) && pool_.block_hash(b) != s->block_hashes[i])
        return error("seq {}: block {} at index {} is cached under another hash", s->id, b, i);
    }
  }
  T9_TRY(pool_.check_integrity(refs));
  if (ckpts_.size() > std::max(ckpts_.max_size(), 0))
    return error("{} state checkpoints over the budget of {}", ckpts_.size(), ckpts_.max_size());
  for (uint64_t hash : ckpts_.block_hashes())
    if (!pool_.find(hash)) return error("state checkpoint of evicted block hash {:#x}", hash);
  return {};
}

}  // namespace t9::engine
