#include "grammar/token_filter.h"

#include <algorithm>
#include <limits>

namespace t9::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, const std::vector<char>& usable)
    : n_vocab_(static_cast<int>(pieces.size())), pieces_(pieces), usable_(usable) {
  usable_.resize(pieces_.size(), 0);
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < n_vocab_; ++t)
    if (usable_[t] && !pieces_[t].empty())
      ids.push_back(t);
    else
      usable_[t] = 0;
  // Byte order (std::string compares as unsigned char), ties by id: a node's tokens come first.
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const int c = pieces_[a].compare(pieces_[b]);
    return c != 0 ? c < 0 : a < b;
  });
  build(ids, 0, ids.size(), 0);
}

// The node for the tokens ids[lo, hi), which share their first `depth` bytes.
uint32_t TokenTrie::build(const std::vector<int32_t>& ids, size_t lo, size_t hi, size_t depth) {
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  Node n;
  n.first_token = static_cast<uint32_t>(tokens_.size());
  size_t i = lo;
  while (i < hi && pieces_[ids[i]].size() == depth) tokens_.push_back(ids[i++]);
  n.n_tokens = static_cast<uint32_t>(tokens_.size()) - n.first_token;
  struct Group {
    uint8_t byte;
    size_t lo, hi;
  };
  std::vector<Group> groups;
  while (i < hi) {
    const uint8_t b = static_cast<uint8_t>(pieces_[ids[i]][depth]);
    size_t j = i;
    while (j < hi && static_cast<uint8_t>(pieces_[ids[j]][depth]) == b) ++j;
    groups.push_back({b, i, j});
    i = j;
  }
  n.first_edge = static_cast<uint32_t>(edge_byte_.size());
  n.n_edges = static_cast<uint32_t>(groups.size());
  edge_byte_.resize(edge_byte_.size() + groups.size());
  edge_node_.resize(edge_node_.size() + groups.size());
  nodes_[id] = n;
  for (size_t k = 0; k < groups.size(); ++k) {
    edge_byte_[n.first_edge + k] = groups[k].byte;
    const uint32_t child = build(ids, groups[k].lo, groups[k].hi, depth + 1);
    edge_node_[n.first_edge + k] = child;
  }
  return id;
}

namespace {

// Depth-first over the trie: an edge is followed only if some stack takes its byte, and every
// token ending below a followed edge is allowed. The trials' frames are rolled back per edge.
struct TrieWalk {
  GrammarMatcher& m;
  const TokenTrie& trie;
  TokenBits& bits;
  std::vector<GrammarMatcher::Heads> levels;

  void walk(uint32_t node, size_t depth) {
    const TokenTrie::Node& n = trie.node(node);
    if (levels.size() <= depth + 1) levels.resize(depth + 2);
    for (uint32_t e = n.first_edge; e < n.first_edge + n.n_edges; ++e) {
      const uint8_t b = trie.edge_byte(e);
      if (!m.may_take(levels[depth], b)) continue;
      const size_t mark = m.arena_mark();
      if (m.step(levels[depth], b, levels[depth + 1])) {
        const TokenTrie::Node& c = trie.node(trie.edge_node(e));
        for (uint32_t t = c.first_token; t < c.first_token + c.n_tokens; ++t) {
          const int32_t id = trie.token_at(t);
          bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
        }
        if (c.n_edges > 0) walk(trie.edge_node(e), depth + 1);
      }
      m.arena_rollback(mark);
    }
  }
};

bool has_bit(const TokenBits& bits, int32_t t) {
  return (bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
}

}  // namespace

TokenBits allowed_tokens(GrammarMatcher& matcher, const TokenTrie& trie) {
  TokenBits bits((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  TrieWalk w{matcher, trie, bits, {}};
  w.levels.resize(2);
  w.levels[0] = matcher.heads();
  w.walk(0, 0);
  return bits;
}

std::shared_ptr<const TokenBits> MaskCache::find(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void MaskCache::insert(const std::string& key, std::shared_ptr<const TokenBits> bits) {
  std::lock_guard lock(mu_);
  if (index_.count(key)) return;
  lru_.emplace_front(key, std::move(bits));
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t MaskCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

TokenFilter::TokenFilter(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> stop_ids,
                         std::shared_ptr<MaskCache> cache)
    : trie_(std::move(trie)),
      matcher_(std::move(grammar)),
      stop_ids_(std::move(stop_ids)),
      cache_(cache ? std::move(cache) : std::make_shared<MaskCache>()) {}

std::shared_ptr<const TokenBits> TokenFilter::allowed() {
  const std::string key = matcher_.key();
  if (auto hit = cache_->find(key)) return hit;
  auto bits = std::make_shared<const TokenBits>(allowed_tokens(matcher_, *trie_));
  cache_->insert(key, bits);
  return bits;
}

bool TokenFilter::mask(std::span<float> logits) {
  const std::shared_ptr<const TokenBits> bits = allowed();
  const bool end_ok = matcher_.accepting();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // A stop token is allowed exactly where the text may end (also if its piece is text).
  std::vector<std::pair<size_t, float>> stops;
  for (int32_t s : stop_ids_)
    if (s >= 0 && static_cast<size_t>(s) < logits.size())
      stops.emplace_back(static_cast<size_t>(s), end_ok ? logits[s] : kNegInf);
  const size_t n_trie = static_cast<size_t>(trie_->n_vocab());
  bool any = false;
  for (size_t t = 0; t < logits.size(); ++t) {
    const bool ok = t < n_trie && has_bit(*bits, static_cast<int32_t>(t));
    if (!ok) {
      logits[t] = kNegInf;
    } else if (!any) {
      any =
          std::find(stop_ids_.begin(), stop_ids_.end(), static_cast<int32_t>(t)) == stop_ids_.end();
    }
  }
  for (const auto& [t, v] : stops) logits[t] = v;
  return any || (end_ok && !stops.empty());
}

bool TokenFilter::accept(int32_t token) {
  if (std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) return true;
  if (token < 0 || token >= trie_->n_vocab() || !trie_->usable(token)) return false;
  return matcher_.accept(trie_->piece(token));
}

}  // namespace t9::grammar
