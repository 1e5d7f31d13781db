// SentencePiece BPE with scores (GGUF "llama" vocabs, e.g. Gemma 3): the text's characters are
// merged pairwise, always the adjacent pair whose concatenation is the vocab entry with the
// highest score (leftmost on ties); pieces that end up without a token are re-split along the
// merges that built them and, failing that, emitted as byte-fallback tokens <0xNN>.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab.h"

namespace t9::tok {

class SpmModel {
 public:
  static Result<std::unique_ptr<SpmModel>> create(const Vocab& vocab, const TokenMap& token_ids);

  // Appends the ids of `text`, which is already whitespace-escaped (spaces as U+2581). Thread-safe.
  void encode(std::string_view text, std::vector<TokenId>& out) const;

 private:
  SpmModel() = default;
  TokenId find(std::string_view text) const;

  const Vocab* vocab_ = nullptr;
  const TokenMap* token_ids_ = nullptr;
  TokenId byte_token_[256];  // <0xNN> tokens, or kNoToken
};

}  // namespace t9::tok
