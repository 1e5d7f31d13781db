#include "apps/chat_setup.h"

namespace t9::apps {

Result<std::optional<chat::ChatTemplate>> load_chat_template(const gguf::GgufFile& file,
                                                             const tok::Tokenizer& tokenizer) {
  const std::string src = file.get_or<std::string>("tokenizer.chat_template", "");
  if (src.empty()) return std::optional<chat::ChatTemplate>();
  const auto& v = tokenizer.vocab();
  auto text_of = [&](tok::TokenId id) {
    return id >= 0 ? v.texts[static_cast<size_t>(id)] : std::string();
  };
  auto t = chat::ChatTemplate::create(
      src, {text_of(v.bos), text_of(v.eos), text_of(v.unk), text_of(v.pad)});
  if (!t.ok()) return error("{}: chat template: {}", file.name(), t.message());
  return std::optional<chat::ChatTemplate>(std::move(t).value());
}

std::vector<tok::TokenId> eog_token_ids(const tok::Tokenizer& tokenizer) {
  std::vector<tok::TokenId> ids;
  for (size_t id = 0; id < tokenizer.n_tokens(); ++id)
    if (tokenizer.is_eog(static_cast<tok::TokenId>(id))) ids.push_back(static_cast<tok::TokenId>(id));
  return ids;
}

}  // namespace t9::apps
