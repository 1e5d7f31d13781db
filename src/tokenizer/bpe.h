// Byte-level BPE over one pre-token: the word's bytes start as single-byte tokens and the
// lowest-ranked adjacent pair is merged until no pair has a rank (leftmost first on ties), as
// GPT-2, Hugging Face and llama.cpp do. Results are cached per word.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "tokenizer/vocab.h"

namespace t9::tok {

// Heterogeneous string -> id map (find() by string_view without allocating).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `token_ids` maps vocab texts (byte-mapped) to ids; it must outlive the model.
  static Result<std::unique_ptr<BpeModel>> create(const Vocab& vocab, const TokenMap& token_ids);
  ~BpeModel();

  // Appends the ids of `word` (raw bytes, one pre-token) to `out`. Thread-safe.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  size_t n_merges() const { return merge_of_.size(); }

 private:
  struct Merge {
    int32_t rank;
    TokenId result;
  };
  struct Cache;
  BpeModel() = default;
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;
  static uint64_t pair_key(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  const TokenMap* token_ids_ = nullptr;
  bool ignore_merges_ = false;
  TokenId byte_token_[256];                       // id of each byte's mapped text, or kNoToken
  std::unordered_map<uint64_t, Merge> merge_of_;  // (left id, right id) -> rank and result
  std::unique_ptr<Cache> cache_;
};

}  // namespace t9::tok
