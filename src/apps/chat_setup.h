// What `tempo9 run` and `tempo9 serve` both need beside the weights: the model's chat template
// (from tokenizer.chat_template, with the vocab's special-token texts) and the end-of-generation
// token ids that stop every request.
#pragma once

#include <optional>
#include <vector>

#include "chat/chat_template.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace t9::apps {

// nullopt when the file has no template (base models); an Error when it has one we cannot parse.
Result<std::optional<chat::ChatTemplate>> load_chat_template(const gguf::GgufFile& file,
                                                             const tok::Tokenizer& tokenizer);

std::vector<tok::TokenId> eog_token_ids(const tok::Tokenizer& tokenizer);

}  // namespace t9::apps
