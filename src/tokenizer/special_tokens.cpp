#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace t9::tok {

namespace {
bool is_special_type(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
}
}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) : vocab_(&vocab), trie_(1) {
  for (size_t id = 0; id < vocab.size(); ++id) {
    const auto& s = vocab.texts[id];
    if (!is_special_type(vocab.types[id]) || s.empty()) continue;
    int32_t node = 0;
    for (char c : s) {
      int32_t next = child(node, static_cast<uint8_t>(c));
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        trie_[node].kids.push_back({static_cast<uint8_t>(c), next});
        trie_.emplace_back();
      }
      node = next;
    }
    if (trie_[node].token == kNoToken) trie_[node].token = static_cast<TokenId>(id);
  }
}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t b) const {
  for (const auto& [c, n] : trie_[node].kids)
    if (c == b) return n;
  return -1;
}

std::vector<TokenId> SpecialTokenMatcher::occurring(std::string_view text,
                                                    bool parse_special) const {
  std::vector<TokenId> found;
  if (trie_[0].kids.empty()) return found;
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      const TokenId t = trie_[node].token;
      if (t == kNoToken) continue;
      if (!parse_special && vocab_->types[t] != TokenType::kUserDefined) continue;
      found.push_back(t);
    }
  }
  std::sort(found.begin(), found.end(), [&](TokenId a, TokenId b) {
    const size_t la = vocab_->texts[a].size(), lb = vocab_->texts[b].size();
    return la != lb ? la > lb : a < b;
  });
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

std::vector<Fragment> SpecialTokenMatcher::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags{{text, kNoToken}};
  if (text.empty()) return {};
  for (const TokenId t : occurring(text, parse_special)) {
    const std::string_view s = vocab_->texts[t];
    std::vector<Fragment> next;
    next.reserve(frags.size() + 2);
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = f.text.find(s, pos)) != std::string_view::npos;
           pos = hit + s.size()) {
        if (hit > pos) next.push_back({f.text.substr(pos, hit - pos), kNoToken});
        next.push_back({f.text.substr(hit, s.size()), t});
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos), kNoToken});
    }
    frags = std::move(next);
  }
  return frags;
}

}  // namespace t9::tok
