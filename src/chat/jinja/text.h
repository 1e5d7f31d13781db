// UTF-8 text helpers with Python str semantics: templates index, slice, strip and case-map by
// code point, so these work on code points while keeping the common ASCII path cheap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace t9::jinja {

using t9::utf8_append;  // core/utf8.h
using t9::utf8_next;
size_t utf8_length(std::string_view s);  // in code points
bool is_ascii(std::string_view s);
std::vector<char32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<char32_t>& cps);

// Python's str.isspace() / str.isprintable() for one code point (common ranges).
bool is_space(char32_t c);
bool is_printable(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);
bool is_alnum(char32_t c);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);  // str.title()

// strip/lstrip/rstrip: `chars` null = whitespace.
std::string_view py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit: `sep` null = runs of whitespace. maxsplit < 0 = unlimited.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);
// str.splitlines() without keepends.
std::vector<std::string> py_splitlines(std::string_view s);

// MarkupSafe's escape (Jinja's `escape` filter, `~` and `+` on markup): & < > " ' as entities.
std::string html_escape(std::string_view s);

}  // namespace t9::jinja
