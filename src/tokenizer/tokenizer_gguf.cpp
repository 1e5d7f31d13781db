// Vocab and Tokenizer from GGUF metadata (the keys llama.cpp's convert_hf_to_gguf.py writes).
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace t9::tok {

namespace {

// Optional token id: absent keys keep the default; a present key of another type is an error.
Status read_id(const gguf::GgufFile& f, std::string_view key, TokenId& id) {
  if (!f.find(key)) return {};
  T9_ASSIGN_OR_RETURN(const uint32_t v, f.get<uint32_t>(key));
  id = static_cast<TokenId>(v);
  return {};
}

Status read_flag(const gguf::GgufFile& f, std::string_view key, bool& flag) {
  if (!f.find(key)) return {};
  T9_ASSIGN_OR_RETURN(flag, f.get<bool>(key));
  return {};
}

Status read_merges(const gguf::GgufFile& f, Vocab& v) {
  T9_ASSIGN_OR_RETURN(auto merges, f.get_array<std::string>("tokenizer.ggml.merges"));
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& m = merges[i];
    // A merge is "left right"; left itself never starts with a space (spaces are byte-mapped),
    // so the first space separates the parts.
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      return error("tokenizer.ggml.merges[{}]: '{}' has no space between its parts", i, m);
    v.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return {};
}

// llama.cpp recognises some tokens by their text and makes them control tokens even when the
// GGUF says otherwise (e.g. "</s>", user-defined in Gemma 3, normal in Qwen2.5): they then stop
// generation, and with parse_special off their strings are plain text. We follow it, since
// llama.cpp is the reference for GGUF vocabs.
bool is_eog_text(std::string_view s) {
  static constexpr std::string_view kEog[] = {"<|eot_id|>",
                                              "<|im_end|>",
                                              "<|end|>",
                                              "<|return|>",
                                              "<|call|>",
                                              "<|flush|>",
                                              "<|calls|>",
                                              "<end_of_turn>",
                                              "<|endoftext|>",
                                              "</s>",
                                              "<|eom_id|>",
                                              "<EOT>",
                                              "_<EOT>",
                                              "[EOT]",
                                              "[EOS]",
                                              "<|end_of_text|>",
                                              "<end_of_utterance>",
                                              "<eos>",
                                              "<turn|>",
                                              "<|tool_response>",
                                              "<\xEF\xBD\x9C"
                                              "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                              "[e~["};
  for (auto e : kEog)
    if (s == e) return true;
  return false;
}

bool is_fim_text(std::string_view s) {
  static constexpr std::string_view kFim[] = {
      "<|fim_prefix|>",  "<fim-prefix>",    "<fim_prefix>",   "<PRE>",        "<|code_prefix|>",
      "<|prefix|>",      "<|fim_suffix|>",  "<fim-suffix>",   "<fim_suffix>", "<SUF>",
      "<|code_suffix|>", "<|suffix|>",      "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
      "<MID>",           "<|code_middle|>", "<|middle|>",     "<|fim_pad|>",  "<fim-pad>",
      "<fim_pad>",       "<PAD>",           "[PAD]",          "<|fim_repo|>", "<|repo_name|>",
      "<fim-repo>",      "<REPO>",          "<reponame>",     "<|file_sep|>"};
  for (auto f : kFim)
    if (s == f) return true;
  return false;
}

void apply_special_text_rules(Vocab& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string& t = v.texts[i];
    if (is_eog_text(t) || is_fim_text(t)) {
      v.types[i] = TokenType::kControl;
      if (v.eot == kNoToken && is_eog_text(t) && t != "</s>" && t != "<eos>")
        v.eot = static_cast<TokenId>(i);
    }
    // gpt-oss: always rendered and always matched.
    if (t == "<|channel|>" || t == "<|message|>" || t == "<|start|>" || t == "<|constrain|>")
      v.types[i] = TokenType::kUserDefined;
  }
}

}  // namespace

Result<Vocab> vocab_from_gguf(const gguf::GgufFile& f) {
  Vocab v;
  T9_ASSIGN_OR_RETURN(const std::string model, f.get<std::string>("tokenizer.ggml.model"));
  T9_ASSIGN_OR_RETURN(v.texts, f.get_array<std::string>("tokenizer.ggml.tokens"));
  const size_t n = v.texts.size();
  if (f.find("tokenizer.ggml.token_type")) {
    T9_ASSIGN_OR_RETURN(auto types, f.get_array<int32_t>("tokenizer.ggml.token_type"));
    if (types.size() != n)
      return error("tokenizer.ggml.token_type: {} entries for {} tokens", types.size(), n);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > 6)
        return error("tokenizer.ggml.token_type[{}]: unknown type {}", i, types[i]);
      v.types.push_back(static_cast<TokenType>(types[i]));
    }
  } else {
    v.types.assign(n, TokenType::kNormal);
  }
  if (f.find("tokenizer.ggml.scores")) {
    T9_ASSIGN_OR_RETURN(v.scores, f.get_array<float>("tokenizer.ggml.scores"));
    if (v.scores.size() != n)
      return error("tokenizer.ggml.scores: {} entries for {} tokens", v.scores.size(), n);
  }

  if (model == "gpt2") {
    v.kind = VocabKind::kBpe;
    T9_TRY(read_merges(f, v));
    const std::string pre = f.get_or<std::string>("tokenizer.ggml.pre", "default");
    v.pre = pre_kind_from_name(pre);
    if (v.pre == PreKind::kCustom) return error("tokenizer.ggml.pre: unsupported '{}'", pre);
    v.ignore_merges = v.pre == PreKind::kLlama3;  // as the Llama 3 tokenizer.json says
    v.add_bos = v.pre == PreKind::kLlama3;
  } else if (model == "llama") {
    v.kind = VocabKind::kSpm;
    if (v.scores.empty()) return error("tokenizer.ggml.scores: required for a 'llama' vocab");
    // SentencePiece defaults, overridden by the keys below when present.
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    return error("tokenizer.ggml.model: unsupported '{}' (gpt2 and llama are)", model);
  }

  T9_TRY(read_id(f, "tokenizer.ggml.bos_token_id", v.bos));
  T9_TRY(read_id(f, "tokenizer.ggml.eos_token_id", v.eos));
  T9_TRY(read_id(f, "tokenizer.ggml.eot_token_id", v.eot));
  T9_TRY(read_id(f, "tokenizer.ggml.padding_token_id", v.pad));
  T9_TRY(read_id(f, "tokenizer.ggml.unknown_token_id", v.unk));
  T9_TRY(read_flag(f, "tokenizer.ggml.add_bos_token", v.add_bos));
  T9_TRY(read_flag(f, "tokenizer.ggml.add_eos_token", v.add_eos));
  T9_TRY(read_flag(f, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  apply_special_text_rules(v);
  T9_TRY(v.validate());
  return v;
}

Result<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  auto v = vocab_from_gguf(file);
  if (!v.ok()) return error("{}: {}", file.name(), v.message());
  return create(std::move(v).value());
}

Result<Tokenizer> Tokenizer::from_gguf_file(const std::string& path) {
  T9_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::open(path));
  return from_gguf(file);
}

}  // namespace t9::tok
