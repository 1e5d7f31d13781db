#include "tokenizer/spm.h"

#include <fmt/format.h>

#include <queue>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace t9::tok {

Result<std::unique_ptr<SpmModel>> SpmModel::create(const Vocab& vocab, const TokenMap& ids) {
  std::unique_ptr<SpmModel> m(new SpmModel());
  m->vocab_ = &vocab;
  m->token_ids_ = &ids;
  for (int b = 0; b < 256; ++b) {
    const auto it = ids.find(fmt::format("<0x{:02X}>", b));
    m->byte_token_[b] = it == ids.end() ? kNoToken : it->second;
  }
  return m;
}

TokenId SpmModel::find(std::string_view text) const {
  const auto it = token_ids_->find(text);
  return it == token_ids_->end() ? kNoToken : it->second;
}

namespace {

struct Symbol {
  int prev, next;
  size_t begin, len;  // bytes of the text; len 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int left, right;
  size_t len;  // combined length when queued: a mismatch later means it is stale
  bool operator<(const Bigram& o) const {  // max-heap: highest score, then leftmost
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

void SpmModel::encode(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> sym;
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
    off += n;
  }
  if (sym.empty()) return;
  std::priority_queue<Bigram> queue;
  // Which two symbols a merged text was built from, for re-splitting texts without a token.
  std::unordered_map<std::string_view, std::pair<int, int>> built_from;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const std::string_view merged = text.substr(sym[l].begin, sym[l].len + sym[r].len);
    const TokenId id = find(merged);
    if (id == kNoToken) return;
    queue.push({vocab_->scores[id], l, r, merged.size()});
    built_from[merged] = {l, r};
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Emit, re-splitting symbols whose text has no token (an iterative version of the recursion).
  std::vector<std::pair<size_t, size_t>> stack;  // (begin, len) still to emit, top = leftmost
  for (int i = 0; i >= 0; i = sym[i].next) {
    stack.push_back({sym[i].begin, sym[i].len});
    while (!stack.empty()) {
      const auto [begin, len] = stack.back();
      stack.pop_back();
      const std::string_view piece = text.substr(begin, len);
      if (const TokenId id = find(piece); id != kNoToken) {
        out.push_back(id);
        continue;
      }
      const auto it = built_from.find(piece);
      if (it == built_from.end()) {
        for (char c : piece) {
          const TokenId bt = byte_token_[static_cast<uint8_t>(c)];
          out.push_back(bt != kNoToken ? bt : vocab_->unk);
        }
        continue;
      }
      const Symbol& a = sym[it->second.first];
      const Symbol& c = sym[it->second.second];
      // The halves are recorded by their symbols, whose begin is fixed; their length then was
      // the piece split at the right symbol's begin.
      stack.push_back({c.begin, begin + len - c.begin});
      stack.push_back({a.begin, c.begin - a.begin});
    }
  }
}

}  // namespace t9::tok
