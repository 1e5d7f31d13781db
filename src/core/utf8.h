// UTF-8 code points: the encoder and the lenient decoder the chat templates (chat/jinja) and the
// grammars (grammar/gbnf) share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace t9 {

// Decodes the code point at s[i] and advances i; invalid bytes decode as themselves (U+0080..FF).
char32_t utf8_next(std::string_view s, size_t& i);
// Appends c's encoding (1-4 bytes).
void utf8_append(std::string& out, char32_t c);

}  // namespace t9
