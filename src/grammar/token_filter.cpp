#include "grammar/token_filter.h"

#include <algorithm>
#include <array>
#include <limits>
#include <unordered_map>

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
// token ending below a followed edge is allowed. The states met on the way are interned by key with
// a transition per byte, computed once (a DFA built lazily for this walk): inside a JSON string
// almost every byte leads back to the same state, so most of the ~330k nodes cost a table lookup,
// not a step of the stacks. Past max_states, subtrees are walked by stepping (frames rolled back
// per edge). Every frame is rolled back when the walk ends.
struct TrieWalk {
  static constexpr int32_t kUnknown = -2, kDead = -1;

  size_t max_states;
  GrammarMatcher& m;
  const TokenTrie& trie;
  TokenBits& bits;
  std::vector<GrammarMatcher::Heads> states;
  std::vector<std::array<int32_t, 256>> next;  // per state: byte -> state, kDead or kUnknown
  std::unordered_map<std::string, int32_t> ids;
  std::vector<GrammarMatcher::Heads> levels;  // the stepping walk's heads by depth

  void allow(uint32_t node) {
    const TokenTrie::Node& c = trie.node(node);
    for (uint32_t t = c.first_token; t < c.first_token + c.n_tokens; ++t) {
      const int32_t id = trie.token_at(t);
      bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
  }

  int32_t intern(GrammarMatcher::Heads heads) {
    auto [it, added] = ids.emplace(m.key_of(heads), static_cast<int32_t>(states.size()));
    if (added) {
      states.push_back(std::move(heads));
      next.emplace_back();
      next.back().fill(kUnknown);
    }
    return it->second;
  }

  // The state after byte b from state s; kUnknown when the table is full (step instead).
  int32_t transition(int32_t s, uint8_t b) {
    int32_t& to = next[s][b];
    if (to != kUnknown) return to;
    if (!m.may_take(states[s], b)) return to = kDead;
    if (states.size() >= max_states) return kUnknown;
    GrammarMatcher::Heads h;
    m.step(states[s], b, h);
    const int32_t id = intern(std::move(h));
    return next[s][b] = id;  // `to` may dangle: intern() can grow `next`
  }

  void walk(uint32_t node, int32_t s, size_t depth) {
    const TokenTrie::Node& n = trie.node(node);
    for (uint32_t e = n.first_edge; e < n.first_edge + n.n_edges; ++e) {
      const uint8_t b = trie.edge_byte(e);
      const int32_t to = transition(s, b);
      if (to == kDead) continue;
      const uint32_t child = trie.edge_node(e);
      if (to == kUnknown) {  // no room for more states: step this subtree
        if (levels.size() <= depth + 1) levels.resize(depth + 2);
        levels[depth] = states[s];
        step_edge(e, depth);
        continue;
      }
      allow(child);
      if (trie.node(child).n_edges > 0) walk(child, to, depth + 1);
    }
  }

  void step_edge(uint32_t e, size_t depth) {
    const size_t mark = m.arena_mark();
    if (m.step(levels[depth], trie.edge_byte(e), levels[depth + 1])) {
      const uint32_t child = trie.edge_node(e);
      allow(child);
      if (trie.node(child).n_edges > 0) step_walk(child, depth + 1);
    }
    m.arena_rollback(mark);
  }

  void step_walk(uint32_t node, size_t depth) {
    const TokenTrie::Node& n = trie.node(node);
    if (levels.size() <= depth + 1) levels.resize(depth + 2);
    for (uint32_t e = n.first_edge; e < n.first_edge + n.n_edges; ++e)
      if (m.may_take(levels[depth], trie.edge_byte(e))) step_edge(e, depth);
  }
};

bool has_bit(const TokenBits& bits, int32_t t) {
  return (bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
}

}  // namespace

TokenBits allowed_tokens(GrammarMatcher& matcher, const TokenTrie& trie, size_t max_states) {
  TokenBits bits((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  const size_t mark = matcher.arena_mark();
  TrieWalk w{std::max<size_t>(max_states, 1), matcher, trie, bits, {}, {}, {}, {}};
  w.walk(0, w.intern(matcher.heads()), 0);
  matcher.arena_rollback(mark);
  return bits;
}

TokenFilter::TokenFilter(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> stop_ids,
                         std::shared_ptr<MaskCache> cache)
    : trie_(std::move(trie)),
      matcher_(std::move(grammar)),
      stop_ids_(std::move(stop_ids)),
      cache_(cache ? std::move(cache) : std::make_shared<MaskCache>(kMaskCacheStates)) {}

std::shared_ptr<const TokenBits> TokenFilter::allowed() {
  const std::string key = matcher_.key();
  if (auto hit = cache_->find(key)) return *hit;
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

bool TokenFilter::allows(int32_t token) {
  if (std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end())
    return matcher_.accepting();
  if (token < 0 || token >= trie_->n_vocab() || !trie_->usable(token)) return false;
  return matcher_.can_take(trie_->piece(token));
}

bool TokenFilter::accept(int32_t token) {
  if (std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) return true;
  if (token < 0 || token >= trie_->n_vocab() || !trie_->usable(token)) return false;
  return matcher_.accept(trie_->piece(token));
}

}  // namespace t9::grammar
