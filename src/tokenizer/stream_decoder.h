// Incremental detokenization for streaming responses: fed one token id at a time, returns only
// text that is complete UTF-8, holding back the bytes of a character split across tokens
// (byte-fallback <0xNN> tokens, byte-level BPE pieces of CJK or emoji). O(piece length) per token.
#pragma once

#include <string>

#include "core/result.h"
#include "tokenizer/tokenizer.h"

namespace t9::tok {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder. One decoder per generated sequence.
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions opt = {});

  // Appends the text that became complete with `id` to `out` (possibly nothing). An id out of
  // range is an Error and changes nothing. Concatenating every push() and finish() gives exactly
  // Tokenizer::decode of all ids whenever that decode is valid UTF-8; bytes that can never
  // become valid UTF-8 are replaced by U+FFFD (one per byte) instead of being held forever.
  Status push(TokenId id, std::string& out);
  // Ends the stream: held-back bytes (an unfinished character) come out as U+FFFD each.
  void finish(std::string& out);

  size_t n_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  DecodeOptions opt_;
  bool first_ = true;
  std::string pending_;  // bytes of an incomplete UTF-8 character (at most 3)
};

}  // namespace t9::tok
