#include "tokenizer/bpe.h"

#include <array>
#include <mutex>
#include <queue>

#include "core/log.h"
#include "tokenizer/unicode.h"

namespace t9::tok {

// A sharded word -> ids cache: the HTTP threads tokenize concurrently, and a shard lock is held
// only for a lookup or an insert. Shards are simply cleared when full (words repeat heavily, so
// the hot ones come back immediately).
struct BpeModel::Cache {
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPerShard = 1 << 14;
  static constexpr size_t kMaxWordBytes = 128;  // longer words are rare: not worth the memory
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> map;
  };
  std::array<Shard, kShards> shards;
};

BpeModel::~BpeModel() = default;

Result<std::unique_ptr<BpeModel>> BpeModel::create(const Vocab& vocab, const TokenMap& ids) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->token_ids_ = &ids;
  m->ignore_merges_ = vocab.ignore_merges;
  for (int b = 0; b < 256; ++b) {
    const auto it = ids.find(byte_to_unicode(static_cast<uint8_t>(b)));
    m->byte_token_[b] = it == ids.end() ? kNoToken : it->second;
  }
  m->merge_of_.reserve(vocab.merges.size());
  size_t n_dropped = 0;
  std::string joined;
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const auto& [l, rt] = vocab.merges[r];
    joined = l + rt;
    const auto il = ids.find(l), ir = ids.find(rt), ij = ids.find(joined);
    if (il == ids.end() || ir == ids.end() || ij == ids.end()) {
      ++n_dropped;  // a merge that cannot produce a token can never take part
      continue;
    }
    m->merge_of_.try_emplace(pair_key(il->second, ir->second),
                             Merge{static_cast<int32_t>(r), ij->second});
  }
  if (n_dropped) T9_LOG_DEBUG("bpe: {} merges name unknown tokens and are ignored", n_dropped);
  m->cache_ = std::make_unique<Cache>();
  return m;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.size() > Cache::kMaxWordBytes) return merge_word(word, out);
  auto& shard = cache_->shards[StringHash{}(word) % Cache::kShards];
  {
    std::lock_guard lock(shard.mu);
    const auto it = shard.map.find(word);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge_word(word, out);
  std::lock_guard lock(shard.mu);
  if (shard.map.size() >= Cache::kMaxPerShard) shard.map.clear();
  shard.map.emplace(std::string(word), std::vector<TokenId>(out.begin() + start, out.end()));
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    std::string mapped;
    for (char c : word) mapped += byte_to_unicode(static_cast<uint8_t>(c));
    const auto it = token_ids_->find(mapped);
    if (it != token_ids_->end()) {
      out.push_back(it->second);
      return;
    }
  }
  const int n = static_cast<int>(word.size());
  // Symbols form a linked list over the word's bytes; merging folds the right one into the left.
  std::vector<TokenId> id(n);
  std::vector<int> next(n), prev(n);
  for (int i = 0; i < n; ++i) {
    id[i] = byte_token_[static_cast<uint8_t>(word[i])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int left;
    TokenId left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    const TokenId a = id[left], b = id[next[left]];
    if (a == kNoToken || b == kNoToken) return;
    const auto it = merge_of_.find(pair_key(a, b));
    if (it != merge_of_.end()) heap.push({it->second.rank, left, a, b});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int r = next[c.left];
    // Stale: either side was merged into something else since this pair was queued.
    if (id[c.left] != c.left_id || r < 0 || id[r] != c.right_id) continue;
    id[c.left] = merge_of_.find(pair_key(c.left_id, c.right_id))->second.result;
    id[r] = kNoToken;
    next[c.left] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.left;
    push(prev[c.left]);
    push(c.left);
  }
  for (int i = 0; i >= 0 && i < n; i = next[i]) {
    if (id[i] != kNoToken) out.push_back(id[i]);
    // A byte whose mapped text is not in the vocab has no token at all: it is dropped, as there
    // is nothing to emit (never happens with GPT-2 style vocabs, which hold all 256).
  }
}

}  // namespace t9::tok
