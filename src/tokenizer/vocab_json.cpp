// Vocab from a Hugging Face tokenizer.json (plus tokenizer_config.json beside it when present,
// for the bos/eos/pad names). Only what byte-level BPE models use is accepted; anything else is
// an Error naming the component, so a model never silently tokenizes differently.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace t9::tok {

namespace {

using json = nlohmann::json;

std::string regex_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Status read_normalizer(const json& n, Vocab& v) {
  if (n.is_null()) return {};
  const std::string type = n.value("type", "");
  if (type == "NFC") {
    v.nfc = true;
    return {};
  }
  if (type == "Sequence") {
    for (const auto& sub : n.at("normalizers")) T9_TRY(read_normalizer(sub, v));
    return {};
  }
  return error("tokenizer.json normalizer: unsupported type '{}' (only NFC)", type);
}

Status read_pre_tokenizer(const json& p, Vocab& v, bool& byte_level) {
  if (p.is_null()) return {};
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : p.at("pretokenizers")) T9_TRY(read_pre_tokenizer(sub, v, byte_level));
    return {};
  }
  if (type == "ByteLevel") {
    byte_level = true;
    if (p.value("add_prefix_space", false))
      return error("tokenizer.json pre_tokenizer ByteLevel: add_prefix_space=true unsupported");
    if (p.value("use_regex", true)) v.custom_patterns.push_back(pre_patterns(PreKind::kGpt2)[0]);
    return {};
  }
  if (type == "Digits") {
    v.custom_patterns.push_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    return {};
  }
  if (type == "Split") {
    if (p.value("behavior", "") != "Isolated" || p.value("invert", false))
      return error("tokenizer.json pre_tokenizer Split: only behavior=Isolated, invert=false");
    const auto& pat = p.at("pattern");
    if (pat.contains("Regex"))
      v.custom_patterns.push_back(pat["Regex"].get<std::string>());
    else
      v.custom_patterns.push_back(regex_escape(pat.at("String").get<std::string>()));
    return {};
  }
  return error("tokenizer.json pre_tokenizer: unsupported type '{}'", type);
}

Status read_model(const json& m, Vocab& v) {
  if (m.value("type", "") != "BPE")
    return error("tokenizer.json model.type: '{}' unsupported (BPE is)", m.value("type", ""));
  if (m.value("byte_fallback", false))
    return error("tokenizer.json model.byte_fallback=true is unsupported for byte-level BPE");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty())
      return error("tokenizer.json model.{} is unsupported", key);
  v.ignore_merges = m.value("ignore_merges", false);
  for (const auto& [text, id_json] : m.at("vocab").items()) {
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id > 10'000'000)
      return error("tokenizer.json model.vocab['{}']: id {}", text, id);
    if (static_cast<size_t>(id) >= v.texts.size()) v.texts.resize(id + 1);
    v.texts[id] = text;
  }
  const auto& merges = m.at("merges");
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& e = merges[i];
    if (e.is_array() && e.size() == 2) {
      v.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else if (e.is_string()) {
      const auto s = e.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return error("tokenizer.json model.merges[{}]: '{}'", i, s);
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      return error("tokenizer.json model.merges[{}]: neither a string nor a pair", i);
    }
  }
  return {};
}

Status read_added_tokens(const json& added, Vocab& v) {
  v.types.assign(v.texts.size(), TokenType::kNormal);
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& a = added[i];
    const int64_t id = a.at("id").get<int64_t>();
    if (id < 0 || id > 10'000'000) return error("tokenizer.json added_tokens[{}]: id {}", i, id);
    if (static_cast<size_t>(id) >= v.texts.size()) {
      v.texts.resize(id + 1);
      v.types.resize(id + 1, TokenType::kUnused);
    }
    v.texts[id] = a.at("content").get<std::string>();
    v.types[id] = a.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
  }
  return {};
}

// Llama-style TemplateProcessing: a SpecialToken before $A means add_bos, after it add_eos.
void read_post_processor(const json& p, const std::unordered_map<std::string, TokenId>& ids,
                         Vocab& v) {
  if (p.is_null() || p.value("type", "") != "TemplateProcessing" || !p.contains("single")) return;
  bool seen_seq = false;
  for (const auto& piece : p["single"]) {
    if (piece.contains("Sequence")) {
      seen_seq = true;
    } else if (piece.contains("SpecialToken")) {
      const auto it = ids.find(piece["SpecialToken"].value("id", ""));
      if (it == ids.end()) continue;
      (seen_seq ? v.eos : v.bos) = it->second;
      (seen_seq ? v.add_eos : v.add_bos) = true;
    }
  }
}

std::string config_token_name(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const auto& t = cfg[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content")) return t["content"].get<std::string>();
  return {};
}

}  // namespace

Result<Vocab> vocab_from_tokenizer_json(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("tokenizer.json: not valid JSON");
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.pre = PreKind::kCustom;
  bool byte_level = false;
  try {
    T9_TRY(read_model(j.at("model"), v));
    T9_TRY(read_added_tokens(j.value("added_tokens", json::array()), v));
    T9_TRY(read_normalizer(j.value("normalizer", json()), v));
    T9_TRY(read_pre_tokenizer(j.value("pre_tokenizer", json()), v, byte_level));
  } catch (const json::exception& e) {
    return error("tokenizer.json: {}", e.what());
  }
  if (!byte_level) return error("tokenizer.json: no ByteLevel pre-tokenizer (only byte-level BPE)");
  std::unordered_map<std::string, TokenId> ids;
  for (size_t i = 0; i < v.texts.size(); ++i)
    if (v.types[i] == TokenType::kControl) ids.emplace(v.texts[i], static_cast<TokenId>(i));
  read_post_processor(j.value("post_processor", json()), ids, v);
  for (size_t i = 0; i < v.texts.size(); ++i)  // holes in the id space
    if (v.texts[i].empty()) v.types[i] = TokenType::kUnused;
  T9_TRY(v.validate());
  return v;
}

Result<Vocab> vocab_from_tokenizer_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = vocab_from_tokenizer_json(ss.str());
  if (!r.ok()) return error("{}: {}", path, r.message());
  Vocab v = std::move(r).value();
  // Special token names live in tokenizer_config.json, beside tokenizer.json.
  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::ifstream cfg_in(cfg_path, std::ios::binary);
  if (!cfg_in) return v;
  json cfg = json::parse(cfg_in, nullptr, false);
  if (cfg.is_discarded()) return error("{}: not valid JSON", cfg_path.string());
  std::unordered_map<std::string, TokenId> ids;
  for (size_t i = 0; i < v.texts.size(); ++i)
    if (v.types[i] != TokenType::kNormal) ids.emplace(v.texts[i], static_cast<TokenId>(i));
  auto set = [&](const char* key, TokenId& id) {
    const auto it = ids.find(config_token_name(cfg, key));
    if (it != ids.end() && id == kNoToken) id = it->second;
  };
  set("bos_token", v.bos);
  set("eos_token", v.eos);
  set("pad_token", v.pad);
  set("unk_token", v.unk);
  return v;
}

}  // namespace t9::tok
