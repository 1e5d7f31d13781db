// Sequence: the engine's bookkeeping for one request. vLLM v1's model: no prefill or decode
// phase — a sequence has n_total tokens (prompt + generated) of which n_computed have their KV
// written; every step computes some of the rest. Chunked prefill, decode, prefix hits and resume
// after preemption are the same path.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace t9::engine {

using BlockId = int32_t;

enum class SeqStatus { kWaiting, kRunning, kPreempted, kFinished };

struct Sequence {
  uint64_t id = 0;
  std::vector<TokenId> tokens;  // [n_total]: prompt, then generated tokens (append-only)
  int n_prompt = 0;
  int n_computed = 0;  // leading tokens whose KV is written in block_table's blocks
  // [ceil(n_allocated / block_size)]: block i holds the KV of tokens [i*bs, (i+1)*bs).
  std::vector<BlockId> block_table;
  // Memo of the chained hash of each FULL block of `tokens` (depends on tokens only, so it
  // survives preemption). Filled lazily by KvCacheManager.
  std::vector<uint64_t> block_hashes;
  int n_committed_blocks = 0;  // leading blocks of block_table already registered as cached
  uint64_t cache_salt = 0;     // GenerateRequest::cache_salt
  SeqStatus status = SeqStatus::kWaiting;
  int n_cached_prompt_tokens = -1;  // prefix hit within the prompt at first admission; -1 before
  int n_preemptions = 0;
  // Speculative decoding may draft tokens for it (greedy requests on models without recurrent
  // state: verification keeps exactly what greedy decoding produces).
  bool spec_eligible = false;
  int max_generated = 1 << 30;  // GenerateRequest::max_tokens: drafts never run past it
  // Tokens the request's constraint forces after its last sampled one (TokenConstraint::
  // forced_tokens, set by the engine after each step): the next step's draft, also for sampled
  // requests and without --spec-draft (a forced token is drawn under the mask all the same).
  std::vector<TokenId> forced_draft;
  // Models with recurrent state: the state before the last speculative step (a checkpoint id), to
  // restore when its drafts were rejected — the step then counts as not computed. 0 = none.
  uint64_t spec_undo = 0;

  // Models with recurrent state (KvCacheConfig::recurrent_checkpoints), see StateCheckpoints:
  // positions (multiples of the block size, ascending) where a step must end so that the state
  // there is saved as a shareable checkpoint: the end of the longest cached KV prefix (a branch
  // point, e.g. a shared system prompt) and the prompt's last block boundary.
  std::vector<int> checkpoint_positions;
  uint64_t restore_checkpoint = 0;  // to load into the state before the next step (a prefix hit)
  // This sequence's own latest state snapshot at a block boundary (decode passes one every
  // block): published into the cache when the sequence finishes or is preempted.
  uint64_t rolling_checkpoint = 0;
  int rolling_position = 0;  // tokens the rolling checkpoint covers; 0 = none yet
  // A second rolling id for pipelined steps (KvCacheManager::checkpoint_for_lookahead): a step
  // planned before the previous one's token is known saves there, and becomes the rolling
  // checkpoint only if the sequence did not end first; the rolling one stays intact meanwhile.
  uint64_t rolling_spare = 0;

  int n_total() const { return static_cast<int>(tokens.size()); }
  int n_generated() const { return n_total() - n_prompt; }
  int n_pending() const { return n_total() - n_computed; }  // tokens still to compute
};

}  // namespace t9::engine
