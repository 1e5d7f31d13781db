// Regex pre-tokenization: splits text into the pieces BPE runs on, like Hugging Face's
// Split(behavior=Isolated) chain: each pattern splits every piece the previous one produced, and
// text between matches stays a piece of its own. PCRE2 (UTF + UCP, JIT-compiled).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/vocab.h"

namespace t9::tok {

// The regexes llama.cpp and the models' tokenizer.json use for each pre-tokenizer kind.
std::vector<std::string> pre_patterns(PreKind kind);

class PreTokenizer {
 public:
  static Result<PreTokenizer> create(const std::vector<std::string>& patterns);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the pieces of `text` (views into it, in order, covering it exactly) to `out`.
  // `text` must be valid UTF-8. Thread-safe. Fails only when PCRE2 runs out of its match limits.
  Status split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Impl;
  PreTokenizer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace t9::tok
