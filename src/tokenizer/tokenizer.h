// Tokenizer: text <-> token ids for one vocabulary (byte-level BPE or SentencePiece), loaded from
// a GGUF file or a Hugging Face tokenizer.json. Immutable after creation, so one instance is
// shared by all HTTP threads; encode/decode are const and thread-safe.
//
// Matches llama.cpp's llama_tokenize(add_special, parse_special) for GGUF vocabs and Hugging
// Face `tokenizers` encode(add_special_tokens) for tokenizer.json (tests/py/tokenizer).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/fragment_cache.h"
#include "tokenizer/vocab.h"

namespace t9::gguf {
class GgufFile;
}

namespace t9::tok {

struct EncodeOptions {
  bool add_special = true;    // add BOS/EOS where the vocab says so (add_bos/add_eos)
  bool parse_special = true;  // recognise control-token strings; false: they are plain text
};

struct DecodeOptions {
  bool skip_special = false;  // drop control/unknown tokens (user-defined ones always print)
};

class Tokenizer {
 public:
  static Result<Tokenizer> create(Vocab vocab);
  static Result<Tokenizer> from_gguf(const gguf::GgufFile& file);
  static Result<Tokenizer> from_gguf_file(const std::string& path);
  static Result<Tokenizer> from_tokenizer_json_file(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Invalid UTF-8 input is an Error naming the byte offset (never replaced silently).
  Result<std::vector<TokenId>> encode(std::string_view text, EncodeOptions opt = {}) const;
  // A prompt a chat template rendered (control tokens parsed): BOS is added when the vocab asks
  // for it, unless the text already starts with the BOS token's text (templates that print
  // bos_token themselves), so it is never doubled.
  Result<std::vector<TokenId>> encode_prompt(std::string_view text) const;

  // The bytes a token contributes to decoded text (GPT-2 bytes un-mapped, ▁ as space, <0xNN> as
  // its byte); empty for unused tokens. May be part of a UTF-8 sequence.
  std::string_view piece(TokenId id) const;
  bool is_special(TokenId id) const;  // control or unknown: what skip_special drops
  bool is_eog(TokenId id) const;      // eos, eot, or another end-of-generation control token
  // Decoded text of `ids`; invalid ids are an Error naming their position. The result may end
  // in (or contain) incomplete UTF-8 when the ids do; see StreamDecoder for streaming.
  Result<std::string> decode(std::span<const TokenId> ids, DecodeOptions opt = {}) const;
  // Whether a decode of a sequence starting at its first token drops that piece's leading space
  // (SentencePiece vocabs that add a space prefix when encoding).
  bool strips_leading_space() const;

  // Byte-level BPE keeps the ids of long fragments (text between special tokens, >= 2 KB) for
  // the next encode of the same text: an agent's re-sent system prompt (fragment_cache.h). The
  // ids are what encoding gives either way. Budget in bytes of texts + ids (default 32 MB; 0:
  // off); the counters for tests and metrics.
  void set_fragment_cache_bytes(size_t max_bytes);
  FragmentCache::Stats fragment_cache_stats() const;

  TokenId find(std::string_view token_text) const;  // by stored text; kNoToken if absent
  const Vocab& vocab() const;
  size_t n_tokens() const { return vocab().size(); }

 private:
  struct Impl;
  Tokenizer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace t9::tok
