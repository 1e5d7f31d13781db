// FragmentCache: the token ids of long text fragments (the text between special tokens), kept for
// the next encode of the same fragment. An agent re-sends its ~10k-token system prompt every turn,
// and encoding it (~1.2 ms for 7.5k tokens on the dev box) sits between the request and its first
// token. A fragment's ids do not depend on the text around it (special tokens split the text
// before the pre-tokenizer and BPE see it), so a hit gives exactly what encoding gives.
//
// Keys are whole texts (compared in full on a hit; the hash only finds the candidate); the least
// recently used entries go first once the texts and ids exceed the byte budget. Thread-safe: one
// mutex (HTTP threads encode in parallel; a lookup is a hash and a compare).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace t9::tok {

struct FragmentCacheConfig {
  size_t min_bytes = 2048;       // shorter fragments are encoded every time (cheap)
  size_t max_bytes = 32u << 20;  // texts + ids kept; 0 disables the cache
};

class FragmentCache {
 public:
  using Config = FragmentCacheConfig;
  struct Stats {
    long hits = 0, misses = 0;
    size_t bytes = 0, entries = 0;
  };

  explicit FragmentCache(Config c = {}) : min_bytes_(c.min_bytes), max_bytes_(c.max_bytes) {}

  bool wants(std::string_view text) const {
    return text.size() >= min_bytes_ && max_bytes_.load(std::memory_order_relaxed) > 0;
  }
  // Appends the ids of `text` to out and returns true when it is cached (a miss changes nothing).
  bool lookup(std::string_view text, std::vector<TokenId>& out);
  // Keeps ids as the encoding of text (evicting the least recently used past the budget).
  void insert(std::string_view text, std::span<const TokenId> ids);
  void set_max_bytes(size_t max_bytes);
  Stats stats() const;

 private:
  struct Entry {
    std::string text;
    std::vector<TokenId> ids;
    uint64_t hash;
    size_t bytes() const { return text.size() + ids.size() * sizeof(TokenId); }
  };
  using List = std::list<Entry>;  // most recently used first

  void evict_locked();

  const size_t min_bytes_;
  std::atomic<size_t> max_bytes_;  // set_max_bytes may run beside encodes
  mutable std::mutex mu_;
  List lru_;
  std::unordered_multimap<uint64_t, List::iterator> index_;
  size_t bytes_ = 0;
  long hits_ = 0, misses_ = 0;
};

}  // namespace t9::tok
