// Splits text around special (and user-defined) token strings before the model sees it, with
// llama.cpp's precedence: longer token strings claim their occurrences first, each token's
// occurrences are taken left to right, and shorter ones only search the text left between.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace t9::tok {

// A piece of the input: plain text (token == kNoToken) or one special token.
struct Fragment {
  std::string_view text;
  TokenId token = kNoToken;
};

class SpecialTokenMatcher {
 public:
  // Indexes the vocab's control, user-defined and unknown tokens (non-empty texts).
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // Fragments of `text` in order. Control and unknown tokens are recognised only when
  // `parse_special`; user-defined ones always (like Hugging Face's non-special added tokens).
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Node {
    TokenId token = kNoToken;  // a token ends here
    std::vector<std::pair<uint8_t, int32_t>> kids;
  };
  int32_t child(int32_t node, uint8_t b) const;
  // Tokens that occur anywhere in `text`, longest first (ties by id): only they can matter.
  std::vector<TokenId> occurring(std::string_view text, bool parse_special) const;

  const Vocab* vocab_;
  std::vector<Node> trie_;  // node 0 is the root
};

}  // namespace t9::tok
