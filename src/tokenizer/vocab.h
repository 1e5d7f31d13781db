// The vocabulary every tokenizer engine works from, whichever file it came from (GGUF metadata
// or a Hugging Face tokenizer.json): token texts, scores, types, merges and the special ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace t9::gguf {
class GgufFile;
}

namespace t9::tok {

using TokenId = int32_t;
constexpr TokenId kNoToken = -1;

// Token types as GGUF stores them (tokenizer.ggml.token_type; SentencePiece's numbering).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special: <|im_start|>, <bos>; matched only when parse_special is on
  kUserDefined = 4,  // added tokens: always matched as a whole, printed verbatim
  kUnused = 5,
  kByte = 6,  // SentencePiece byte fallback <0xNN>
};

enum class VocabKind {
  kBpe,  // byte-level BPE (GGUF "gpt2"): token texts are GPT-2 byte-mapped, merges ranked
  kSpm,  // SentencePiece BPE with scores and byte fallback (GGUF "llama")
};

// Which regex split runs before BPE (GGUF tokenizer.ggml.pre, or derived from tokenizer.json).
enum class PreKind { kDefault, kGpt2, kLlama3, kQwen2, kSmollm, kCustom };

struct Vocab {
  VocabKind kind = VocabKind::kBpe;
  PreKind pre = PreKind::kDefault;
  std::vector<std::string> custom_patterns;  // PreKind::kCustom: regexes applied in order

  std::vector<std::string> texts;  // [n_tokens] as stored (byte-mapped for BPE, ▁ for SPM)
  std::vector<float> scores;       // [n_tokens] SPM merge priority; empty for BPE
  std::vector<TokenType> types;    // [n_tokens]
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, in rank order

  TokenId bos = kNoToken, eos = kNoToken, eot = kNoToken, pad = kNoToken, unk = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend " " to text that follows the start or a special
  bool ignore_merges = false;     // BPE: a whole pre-token found in the vocab is one token
  bool nfc = false;               // normalize input to NFC first (Hugging Face "NFC" normalizer)

  size_t size() const { return texts.size(); }
  // Checks the invariants the engines rely on (sizes agree, ids in range, no duplicate texts
  // that would make lookups ambiguous); names the offending field.
  Status validate() const;
};

// GGUF keys tokenizer.ggml.* (model, pre, tokens, scores, token_type, merges, *_token_id,
// add_bos_token, add_eos_token, add_space_prefix).
Result<Vocab> vocab_from_gguf(const gguf::GgufFile& file);
// A Hugging Face tokenizer.json with a BPE model, ByteLevel/Split/Digits pre-tokenizers and an
// optional NFC normalizer; other components are rejected with an Error naming them.
Result<Vocab> vocab_from_tokenizer_json(std::string_view json_text);
Result<Vocab> vocab_from_tokenizer_json_file(const std::string& path);

PreKind pre_kind_from_name(std::string_view gguf_pre);

}  // namespace t9::tok
