#include "model/synth/synth_vocab_json.h"

#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace t9::synth {
namespace {

// Text that the known pre-tokenizers split differently: contractions in both cases, a digit run
// (Qwen2 splits single digits, Llama 3 groups of three, GPT-2 whole runs), punctuation before
// letters, runs of spaces and newlines, non-ASCII letters.
constexpr std::string_view kProbe =
    "I'M sure they'RE here: 1234567 apples, x=3.14;\n\n  foo(bar)   \r\n\tÉcole 東京... we'll";

// A GGUF names its pre-tokenizer ("qwen2") instead of storing the regexes, so a file whose own
// split differs would load but tokenize unlike its tokenizer.json, silently. Compare the splits
// on a probe text (llama.cpp's converter likewise tells pre-tokenizers apart by tokenizing one).
// The NFC normalizer Qwen's tokenizer.json has is not checked: GGUF vocabs have none, here as in
// llama.cpp, and it changes nothing for text already in NFC.
Status check_pre_tokenizer(const tok::Vocab& v) {
  T9_ASSIGN_OR_RETURN(auto own, tok::PreTokenizer::create(v.custom_patterns));
  T9_ASSIGN_OR_RETURN(auto qwen2,
                      tok::PreTokenizer::create(tok::pre_patterns(tok::PreKind::kQwen2)));
  std::vector<std::string_view> a, b;
  T9_TRY(own.split(kProbe, a));
  T9_TRY(qwen2.split(kProbe, b));
  if (a != b)
    return error("its pre-tokenizer splits text unlike Qwen2's, the one the GGUF will name");
  if (v.ignore_merges) return error("model.ignore_merges=true is unsupported (Qwen2 merges all)");
  return {};
}

// An added token (control or user-defined) by its text; vocab entries spelled like one are
// ordinary BPE pieces, not the special token.
tok::TokenId find_added(const tok::Vocab& v, std::string_view text) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v.types[i] != tok::TokenType::kNormal && v.texts[i] == text)
      return static_cast<tok::TokenId>(i);
  return tok::kNoToken;
}

tok::TokenId first_of(tok::TokenId a, tok::TokenId b) {
  return a != tok::kNoToken ? a : b;
}

}  // namespace

Result<SynthVocab> synth_vocab_from_tokenizer_json(const std::string& path) {
  T9_ASSIGN_OR_RETURN(tok::Vocab v, tok::vocab_from_tokenizer_json_file(path));
  if (Status st = check_pre_tokenizer(v); !st.ok()) return error("{}: {}", path, st.message());
  // The ids the synthetic vocabulary uses, by name, so files compare like with like; otherwise
  // what tokenizer_config.json says.
  const tok::TokenId eos = first_of(find_added(v, "<|im_end|>"), v.eos);
  if (eos == tok::kNoToken)
    return error("{}: no <|im_end|> token and no eos_token in a tokenizer_config.json beside it",
                 path);
  const tok::TokenId bos = first_of(first_of(find_added(v, "<|endoftext|>"), v.bos), eos);
  const tok::TokenId pad = first_of(first_of(find_added(v, "<|endoftext|>"), v.pad), bos);

  SynthVocab s;
  s.tokens = std::move(v.texts);  // undefined ids are "" (write_tokenizer_metadata pads them)
  s.types.reserve(v.types.size());
  for (tok::TokenType t : v.types) s.types.push_back(static_cast<int32_t>(t));  // GGUF numbering
  s.merges.reserve(v.merges.size());
  for (const auto& [left, right] : v.merges) s.merges.push_back(left + ' ' + right);
  s.bos = static_cast<uint32_t>(bos);
  s.eos = static_cast<uint32_t>(eos);
  s.pad = static_cast<uint32_t>(pad);
  return s;
}

Status add_tokenizer_json_metadata(gguf::GgufWriter& w, const std::string& path, int n_vocab) {
  T9_ASSIGN_OR_RETURN(SynthVocab v, synth_vocab_from_tokenizer_json(path));
  return write_tokenizer_metadata(w, std::move(v), n_vocab, path);
}

}  // namespace t9::synth
