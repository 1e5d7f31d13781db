#include "tokenizer/vocab.h"

#include <unordered_set>

namespace t9::tok {

PreKind pre_kind_from_name(std::string_view n) {
  if (n == "gpt-2" || n == "gpt2") return PreKind::kGpt2;
  if (n == "llama3" || n == "llama-v3" || n == "llama-bpe") return PreKind::kLlama3;
  if (n == "qwen2") return PreKind::kQwen2;
  if (n == "smollm") return PreKind::kSmollm;
  if (n == "default" || n.empty()) return PreKind::kDefault;
  return PreKind::kCustom;  // unknown to us: the caller rejects it
}

Status Vocab::validate() const {
  const size_t n = texts.size();
  if (n == 0) return error("vocab: no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return error("vocab: {} tokens is too many", n);
  if (types.size() != n) return error("vocab: {} token types for {} tokens", types.size(), n);
  if (kind == VocabKind::kSpm && scores.size() != n)
    return error("vocab: {} scores for {} tokens", scores.size(), n);
  if (kind == VocabKind::kBpe && merges.empty()) return error("vocab: BPE vocab without merges");
  for (size_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(types[i]);
    if (t < 0 || t > 6) return error("vocab: token {} has unknown type {}", i, t);
  }
  const std::pair<const char*, TokenId> ids[] = {
      {"bos", bos}, {"eos", eos}, {"eot", eot}, {"pad", pad}, {"unk", unk}};
  for (const auto& [name, id] : ids)
    if (id != kNoToken && (id < 0 || static_cast<size_t>(id) >= n))
      return error("vocab: {} token id {} out of range [0, {})", name, id, n);
  if (add_bos && bos == kNoToken) return error("vocab: add_bos is set but there is no bos token");
  if (add_eos && eos == kNoToken) return error("vocab: add_eos is set but there is no eos token");
  if (pre == PreKind::kCustom && kind == VocabKind::kBpe && custom_patterns.empty())
    return error("vocab: custom pre-tokenizer without patterns");
  return {};
}

}  // namespace t9::tok
