#include "tokenizer/tokenizer.h"

#include <optional>

#include "core/check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/fragment_cache.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"

namespace t9::tok {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Control tokens that end a turn in the chat formats we serve, besides eos/eot.
bool is_eog_text(std::string_view s) {
  return s == "<|im_end|>" || s == "<|endoftext|>" || s == "<end_of_turn>" || s == "<|eot_id|>" ||
         s == "<|eom_id|>" || s == "<|end|>" || s == "<|return|>";
}

std::string bpe_piece(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const int b = unicode_to_byte(utf8_decode(text, i));
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(text.substr(start, i - start));  // not a mapped byte: keep it as it is
  }
  return out;
}

std::string spm_piece(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// "<0xAB>" -> 0xAB, or -1.
int byte_token_value(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (char c : s.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else
      return -1;
  }
  return v;
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  TokenMap ids;
  std::unique_ptr<BpeModel> bpe;
  std::unique_ptr<SpmModel> spm;
  std::optional<PreTokenizer> pre;
  std::optional<SpecialTokenMatcher> specials;
  std::vector<std::string> pieces;  // [n_tokens] decoded bytes
  std::vector<uint8_t> special;     // [n_tokens] control or unknown
  std::vector<uint8_t> eog;         // [n_tokens]
  // Long BPE fragments' ids for the next encode of the same text (fragment_cache.h).
  std::unique_ptr<FragmentCache> fragments = std::make_unique<FragmentCache>();

  Status build_pieces();
  Status encode_bpe_text(std::string_view text, std::vector<TokenId>& out) const;
  void encode_spm(const std::vector<Fragment>& frags, std::vector<TokenId>& out) const;
};

Status Tokenizer::Impl::build_pieces() {
  const size_t n = vocab.size();
  pieces.resize(n);
  special.assign(n, 0);
  eog.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = vocab.texts[i];
    switch (vocab.types[i]) {
      case TokenType::kNormal:
        pieces[i] = vocab.kind == VocabKind::kBpe ? bpe_piece(t) : spm_piece(t);
        break;
      case TokenType::kByte: {
        const int b = byte_token_value(t);
        if (b < 0) return error("vocab: byte token {} has text '{}', not <0xNN>", i, t);
        pieces[i] = std::string(1, static_cast<char>(b));
        break;
      }
      case TokenType::kControl:
      case TokenType::kUnknown:
        special[i] = 1;
        pieces[i] = t;
        break;
      case TokenType::kUserDefined:
        pieces[i] = t;
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;  // prints nothing, as llama.cpp
    }
    eog[i] = special[i] && is_eog_text(t);
  }
  for (TokenId id : {vocab.eos, vocab.eot})
    if (id != kNoToken) eog[id] = 1;
  return {};
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::create(Vocab vocab) {
  T9_TRY(vocab.validate());
  Tokenizer tk;
  tk.impl_ = std::make_unique<Impl>();
  Impl& m = *tk.impl_;
  m.vocab = std::move(vocab);
  m.ids.reserve(m.vocab.size());
  for (size_t i = 0; i < m.vocab.size(); ++i)
    if (m.vocab.types[i] != TokenType::kUnused || !m.vocab.texts[i].empty())
      m.ids.try_emplace(m.vocab.texts[i], static_cast<TokenId>(i));
  T9_TRY(m.build_pieces());
  m.specials.emplace(m.vocab);
  if (m.vocab.kind == VocabKind::kBpe) {
    T9_ASSIGN_OR_RETURN(m.bpe, BpeModel::create(m.vocab, m.ids));
    const auto patterns =
        m.vocab.pre == PreKind::kCustom ? m.vocab.custom_patterns : pre_patterns(m.vocab.pre);
    T9_ASSIGN_OR_RETURN(auto pre, PreTokenizer::create(patterns));
    m.pre.emplace(std::move(pre));
  } else {
    T9_ASSIGN_OR_RETURN(m.spm, SpmModel::create(m.vocab, m.ids));
  }
  return tk;
}

Result<Tokenizer> Tokenizer::from_tokenizer_json_file(const std::string& path) {
  T9_ASSIGN_OR_RETURN(auto v, vocab_from_tokenizer_json_file(path));
  return create(std::move(v));
}

Status Tokenizer::Impl::encode_bpe_text(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<std::string_view> words;
  T9_TRY(pre->split(text, words));
  for (const auto w : words) bpe->encode_word(w, out);
  return {};
}

void Tokenizer::Impl::encode_spm(const std::vector<Fragment>& frags,
                                 std::vector<TokenId>& out) const {
  bool prev_special = true;  // the start counts as "after a special": it gets the space prefix
  std::string escaped;
  for (const Fragment& f : frags) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    escaped.clear();
    if (vocab.add_space_prefix && prev_special) escaped += kSpmSpace;
    for (char c : f.text) {
      if (c == ' ')
        escaped += kSpmSpace;
      else
        escaped += c;
    }
    spm->encode(escaped, out);
    prev_special = false;
  }
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text, EncodeOptions opt) const {
  T9_TRY(check_utf8(text));
  const Impl& m = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (opt.add_special && m.vocab.add_bos) out.push_back(m.vocab.bos);
  const std::vector<Fragment> frags = m.specials->split(text, opt.parse_special);
  if (m.vocab.kind == VocabKind::kSpm) {
    m.encode_spm(frags, out);
  } else {
    std::string normalized;
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        continue;
      }
      const bool cached = m.fragments->wants(f.text);
      if (cached && m.fragments->lookup(f.text, out)) continue;
      const size_t first = out.size();
      if (m.vocab.nfc && nfc_needed(f.text)) {
        normalized = nfc(f.text);  // added tokens are matched on the raw text, as HF does
        T9_TRY(m.encode_bpe_text(normalized, out));
      } else {
        T9_TRY(m.encode_bpe_text(f.text, out));
      }
      if (cached) m.fragments->insert(f.text, std::span(out).subspan(first));
    }
  }
  if (opt.add_special && m.vocab.add_eos) out.push_back(m.vocab.eos);
  return out;
}

void Tokenizer::set_fragment_cache_bytes(size_t max_bytes) {
  impl_->fragments->set_max_bytes(max_bytes);
}

FragmentCache::Stats Tokenizer::fragment_cache_stats() const {
  return impl_->fragments->stats();
}

std::string_view Tokenizer::piece(TokenId id) const {
  T9_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->pieces.size(), "token id {}", id);
  return impl_->pieces[id];
}

bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[id];
}

bool Tokenizer::is_eog(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->eog.size() && impl_->eog[id];
}

bool Tokenizer::strips_leading_space() const {
  return impl_->vocab.kind == VocabKind::kSpm && impl_->vocab.add_space_prefix;
}

Result<std::string> Tokenizer::decode(std::span<const TokenId> ids, DecodeOptions opt) const {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    const TokenId id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= n_tokens())
      return error("decode: token id {} at position {} is out of range [0, {})", id, i, n_tokens());
    if (opt.skip_special && is_special(id)) continue;
    std::string_view p = impl_->pieces[id];
    if (first && strips_leading_space() && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    first = false;
    out.append(p);
  }
  return out;
}

TokenId Tokenizer::find(std::string_view token_text) const {
  const auto it = impl_->ids.find(token_text);
  return it == impl_->ids.end() ? kNoToken : it->second;
}

const Vocab& Tokenizer::vocab() const {
  return impl_->vocab;
}

Result<std::vector<TokenId>> Tokenizer::encode_prompt(std::string_view text) const {
  const Vocab& v = vocab();
  bool add_special = true;
  if (v.add_bos && v.bos >= 0) {
    const std::string& bos = v.texts[static_cast<size_t>(v.bos)];  // control tokens stored raw
    if (!bos.empty() && text.starts_with(bos)) add_special = false;
  }
  return encode(text, {.add_special = add_special, .parse_special = true});
}

}  // namespace t9::tok
