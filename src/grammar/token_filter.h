// TokenFilter: which tokens of the vocabulary may come next under a grammar (structured output).
// The vocabulary is a byte trie (TokenTrie, built once per model); the allowed set is found by
// walking the trie with the matcher's state, trying each edge's byte on the state and dropping
// the subtree at the first byte the grammar refuses, so a JSON string's state visits the tokens
// that stay inside the string and a number's state only a few hundred; the states met on the way
// get a transition table per byte (a DFA built lazily), so a node costs a lookup. Sets are cached
// by the matcher's state key (MaskCache): a long string or a repeated object shape walks once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/lru_cache.h"
#include "grammar/matcher.h"

namespace t9::grammar {

using TokenBits = std::vector<uint64_t>;  // bit t of word t / 64: token t may come next

class TokenTrie {
 public:
  // pieces[t]: the bytes token t adds to the text; usable[t] == 0 leaves it out (control tokens,
  // empty pieces: they never advance a grammar).
  TokenTrie(const std::vector<std::string>& pieces, const std::vector<char>& usable);

  int n_vocab() const { return n_vocab_; }
  const std::string& piece(int32_t token) const { return pieces_[token]; }
  bool usable(int32_t token) const { return usable_[token] != 0; }
  size_t n_nodes() const { return nodes_.size(); }

  struct Node {
    uint32_t first_edge = 0, n_edges = 0;    // into edge_byte / edge_node
    uint32_t first_token = 0, n_tokens = 0;  // into tokens: the tokens whose bytes end here
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  uint8_t edge_byte(uint32_t e) const { return edge_byte_[e]; }
  uint32_t edge_node(uint32_t e) const { return edge_node_[e]; }
  int32_t token_at(uint32_t i) const { return tokens_[i]; }

 private:
  uint32_t build(const std::vector<int32_t>& ids, size_t lo, size_t hi, size_t depth);

  int n_vocab_ = 0;
  std::vector<std::string> pieces_;
  std::vector<char> usable_;
  std::vector<Node> nodes_;
  std::vector<uint8_t> edge_byte_;
  std::vector<uint32_t> edge_node_;
  std::vector<int32_t> tokens_;
};

// Every usable token whose bytes the matcher takes from its state (it is left unchanged).
// max_states bounds the walk's interned states (token_filter.cpp); past it subtrees are stepped.
TokenBits allowed_tokens(GrammarMatcher& matcher, const TokenTrie& trie, size_t max_states = 20000);

// Allowed sets by matcher state key, shared by the requests of one grammar (64 states: ~1.2 MB
// on a 151k vocabulary).
using MaskCache = LruCache<std::shared_ptr<const TokenBits>>;
inline constexpr size_t kMaskCacheStates = 64;

// One request's filter: the grammar's state after the tokens so far.
class TokenFilter {
 public:
  // stop_ids: end-of-generation tokens, allowed exactly where the text so far is a whole sentence.
  TokenFilter(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
              std::vector<int32_t> stop_ids, std::shared_ptr<MaskCache> cache = nullptr);

  // Sets logits[t] = -inf for each token t that may not come next (ids past the trie's vocabulary
  // included). False when no token may come next.
  bool mask(std::span<float> logits);
  // Whether mask() would leave `token`: its bytes may come next, or it is a stop token and the
  // text may end here. Steps the token's bytes alone: no walk of the vocabulary.
  bool allows(int32_t token);
  // Takes a token mask() left; a stop token changes nothing. False: the token's bytes do not fit.
  bool accept(int32_t token);
  // Nothing may follow the text so far.
  bool complete() const { return matcher_.complete(); }
  // The bytes the grammar forces next (GrammarMatcher::forced_bytes).
  std::string forced_bytes(size_t max_bytes) { return matcher_.forced_bytes(max_bytes); }
  const GrammarMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const TokenBits> allowed();

  std::shared_ptr<const TokenTrie> trie_;
  GrammarMatcher matcher_;
  std::vector<int32_t> stop_ids_;
  std::shared_ptr<MaskCache> cache_;
};

}  // namespace t9::grammar
