// Tokenizer with jinja2's whitespace rules as transformers configures them: trim_blocks (drop the
// first newline after a block or comment tag), lstrip_blocks (drop spaces before a block or
// comment tag that starts a line), `-`/`+` markers, raw blocks, and one trailing newline of the
// source removed (keep_trailing_newline=False).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace t9::jinja {

enum class Tok : uint8_t {
  Data,        // template text between tags
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value already unescaped
  Int,
  Float,
  Op,  // operator or punctuation, text in `text`
  End,
};

struct Token {
  Tok type;
  std::string text;
  int line = 1;
  int col = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws JinjaError (with line/col) on malformed input.
std::vector<Token> tokenize(std::string_view source, const LexOptions& opt = {});

}  // namespace t9::jinja
