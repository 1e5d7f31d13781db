#include "tokenizer/stream_decoder.h"

#include "tokenizer/unicode.h"

namespace t9::tok {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Whether s (1..3 bytes) can still become a valid UTF-8 character with more bytes.
bool can_complete(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  const size_t need = utf8_len(b0);
  if (need <= s.size() || b0 < 0xC2 || b0 > 0xF4) return false;
  for (size_t k = 1; k < s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[k]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) return false;
  }
  return true;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, DecodeOptions opt)
    : tok_(&tokenizer), opt_(opt) {}

Status StreamDecoder::push(TokenId id, std::string& out) {
  if (id < 0 || static_cast<size_t>(id) >= tok_->n_tokens())
    return error("stream decode: token id {} is out of range [0, {})", id, tok_->n_tokens());
  if (opt_.skip_special && tok_->is_special(id)) return {};
  std::string_view p = tok_->piece(id);
  if (first_ && tok_->strips_leading_space() && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  first_ = false;
  if (pending_.empty() && utf8_valid_prefix(p) == p.size()) {  // the common case: no copy
    out.append(p);
    return {};
  }
  pending_.append(p);
  std::string_view s = pending_;
  size_t i = 0;
  while (i < s.size()) {
    const size_t ok = utf8_valid_prefix(s.substr(i));
    out.append(s.substr(i, ok));
    i += ok;
    if (i == s.size() || can_complete(s.substr(i))) break;
    out.append(kReplacement);  // this byte can never start a valid character
    ++i;
  }
  pending_.erase(0, i);
  return {};
}

void StreamDecoder::finish(std::string& out) {
  for (size_t i = 0; i < pending_.size(); ++i) out.append(kReplacement);
  pending_.clear();
}

}  // namespace t9::tok
