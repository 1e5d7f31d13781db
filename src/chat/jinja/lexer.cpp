#include "chat/jinja/lexer.h"

#include <cstring>

#include "chat/jinja/text.h"
#include "chat/jinja/value.h"

namespace t9::jinja {
namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// \r\n and \r become \n; one trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& opt) : s_(std::move(src)), opt_(opt) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run();

 private:
  [[noreturn]] void error_at(size_t pos, const std::string& msg) {
    auto [line, col] = position(pos);
    throw JinjaError{msg, line, col};
  }
  std::pair<int, int> position(size_t pos) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      (line_starts_[mid] <= pos ? lo : hi) = mid;
    }
    return {int(lo) + 1, int(pos - line_starts_[lo]) + 1};
  }
  void emit(Tok t, std::string text, size_t pos) {
    auto [line, col] = position(pos);
    out_.push_back(Token{t, std::move(text), line, col});
  }
  size_t skip_ws(size_t p) const {
    while (p < s_.size() && is_ws(s_[p])) ++p;
    return p;
  }
  // Applies `-` (strip all trailing whitespace) or lstrip_blocks to text before a tag.
  void emit_data(size_t begin, size_t end, char sign, bool is_block_or_comment);
  size_t match_raw(size_t p, const char* word, char* sign) const;
  size_t lex_tag(size_t p, bool is_block);
  size_t lex_token(size_t p);
  size_t lex_string(size_t p);
  size_t lex_number(size_t p);

  std::string s_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  bool line_starting_ = true;
};

void Lexer::emit_data(size_t begin, size_t end, char sign, bool is_block_or_comment) {
  std::string_view text(s_.data() + begin, end - begin);
  if (sign == '-') {
    while (!text.empty() && is_ws(text.back())) text.remove_suffix(1);
  } else if (sign != '+' && opt_.lstrip_blocks && is_block_or_comment) {
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
      bool all_ws = true;
      for (size_t i = l_pos; i < text.size() && all_ws; ++i) all_ws = is_ws(text[i]);
      if (all_ws) text = text.substr(0, l_pos);
    }
  }
  if (!text.empty()) emit(Tok::Data, std::string(text), begin);
}

// Matches `{%[-+]?\s*WORD\s*` at p and returns the position after it (0 if no match).
size_t Lexer::match_raw(size_t p, const char* word, char* sign) const {
  if (s_.compare(p, 2, "{%") != 0) return 0;
  p += 2;
  *sign = 0;
  if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) *sign = s_[p++];
  p = skip_ws(p);
  size_t n = std::strlen(word);
  if (s_.compare(p, n, word) != 0) return 0;
  p += n;
  if (p < s_.size() && is_name_char(s_[p])) return 0;
  return skip_ws(p);
}

std::vector<Token> Lexer::run() {
  size_t pos = 0;
  while (pos < s_.size()) {
    size_t t = pos;
    while ((t = s_.find('{', t)) != std::string::npos) {
      if (t + 1 < s_.size() && (s_[t + 1] == '{' || s_[t + 1] == '%' || s_[t + 1] == '#')) break;
      ++t;
    }
    if (t == std::string::npos) {
      emit(Tok::Data, s_.substr(pos), pos);
      break;
    }
    char kind = s_[t + 1];
    char raw_sign = 0;
    size_t raw_end = kind == '%' ? match_raw(t, "raw", &raw_sign) : 0;
    if (raw_end) {
      size_t end_tag;
      if (s_.compare(raw_end, 3, "-%}") == 0)
        end_tag = skip_ws(raw_end + 3);
      else if (s_.compare(raw_end, 2, "%}") == 0)
        end_tag = raw_end + 2;
      else
        end_tag = 0;
      if (end_tag) {
        emit_data(pos, t, raw_sign, true);
        line_starting_ = s_[end_tag - 1] == '\n';
        // Find {%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)
        size_t q = end_tag;
        char end_sign = 0;
        size_t after = 0;
        while ((q = s_.find("{%", q)) != std::string::npos) {
          after = match_raw(q, "endraw", &end_sign);
          if (after && (s_.compare(after, 2, "%}") == 0 || s_.compare(after, 3, "-%}") == 0 ||
                        s_.compare(after, 3, "+%}") == 0))
            break;
          ++q;
        }
        if (q == std::string::npos) error_at(t, "Missing end of raw directive");
        emit_data(end_tag, q, end_sign, true);
        if (s_[after] == '+')
          after += 3;
        else if (s_[after] == '-')
          after = skip_ws(after + 3);
        else {
          after += 2;
          if (opt_.trim_blocks && after < s_.size() && s_[after] == '\n') ++after;
        }
        line_starting_ = s_[after - 1] == '\n';
        pos = after;
        continue;
      }
    }
    size_t p = t + 2;
    char sign = 0;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
    emit_data(pos, t, sign, kind != '{');
    if (kind == '#') {
      size_t q = s_.find("#}", p);
      if (q == std::string::npos) error_at(t, "Missing end of comment tag");
      char csign = (q > p && (s_[q - 1] == '-' || s_[q - 1] == '+')) ? s_[q - 1] : 0;
      size_t end = q + 2;
      if (csign == '-')
        end = skip_ws(end);
      else if (csign != '+' && opt_.trim_blocks && end < s_.size() && s_[end] == '\n')
        ++end;
      line_starting_ = s_[end - 1] == '\n';
      pos = end;
      continue;
    }
    emit(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, "", t);
    pos = lex_tag(p, kind == '%');
    line_starting_ = s_[pos - 1] == '\n';
  }
  emit(Tok::End, "", s_.size());
  return std::move(out_);
}

// Lexes the inside of a {{ }} or {% %} tag, returns the position after its end marker.
size_t Lexer::lex_tag(size_t p, bool is_block) {
  std::vector<char> brackets;
  size_t start = p;
  while (true) {
    p = skip_ws(p);
    if (p >= s_.size())
      error_at(start, is_block ? "unexpected end of template, expected '%}'"
                               : "unexpected end of template, expected '}}'");
    if (brackets.empty()) {
      const char* end = is_block ? "%}" : "}}";
      if (s_.compare(p, 2, end) == 0) {
        emit(is_block ? Tok::BlockEnd : Tok::VarEnd, "", p);
        p += 2;
        if (is_block && opt_.trim_blocks && p < s_.size() && s_[p] == '\n') ++p;
        return p;
      }
      if ((s_[p] == '-' || (is_block && s_[p] == '+')) && s_.compare(p + 1, 2, end) == 0) {
        emit(is_block ? Tok::BlockEnd : Tok::VarEnd, "", p);
        return s_[p] == '-' ? skip_ws(p + 3) : p + 3;
      }
    }
    char c = s_[p];
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) error_at(p, std::string("unexpected '") + c + "'");
      if (brackets.back() != c)
        error_at(p, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
      brackets.pop_back();
    }
    p = lex_token(p);
  }
}

size_t Lexer::lex_token(size_t p) {
  char c = s_[p];
  if (c == '\'' || c == '"') return lex_string(p);
  if (is_digit(c)) return lex_number(p);
  if (is_name_start(c)) {
    size_t e = p;
    while (e < s_.size() && is_name_char(s_[e])) ++e;
    emit(Tok::Name, s_.substr(p, e - p), p);
    return e;
  }
  static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                              "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                              "=",  ">",  "<",  ".",  ":",  "|",  ",", ";"};
  for (const char* op : ops) {
    size_t n = std::strlen(op);
    if (s_.compare(p, n, op) == 0) {
      emit(Tok::Op, op, p);
      return p + n;
    }
  }
  error_at(p, std::string("unexpected char '") + c + "'");
}

size_t Lexer::lex_string(size_t p) {
  char q = s_[p];
  std::string out;
  size_t i = p + 1;
  auto hex = [&](size_t at, int n) -> char32_t {
    if (at + size_t(n) > s_.size()) error_at(at, "truncated \\x/\\u escape in string");
    char32_t v = 0;
    for (int k = 0; k < n; ++k) {
      char h = s_[at + size_t(k)];
      int d = is_digit(h)              ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) error_at(at, "truncated \\x/\\u escape in string");
      v = v * 16 + char32_t(d);
    }
    return v;
  };
  while (true) {
    if (i >= s_.size()) error_at(p, "unterminated string literal");
    char c = s_[i];
    if (c == q) break;
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= s_.size()) error_at(p, "unterminated string literal");
    char e = s_[i + 1];
    i += 2;
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;  // line continuation
      case 'x':
        utf8_append(out, hex(i, 2));
        i += 2;
        break;
      case 'u':
        utf8_append(out, hex(i, 4));
        i += 4;
        break;
      case 'U':
        utf8_append(out, hex(i, 8));
        i += 8;
        break;
      case 'N':
        error_at(i - 2, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = char32_t(e - '0');
          for (int k = 0; k < 2 && i < s_.size() && s_[i] >= '0' && s_[i] <= '7'; ++k, ++i)
            v = v * 8 + char32_t(s_[i] - '0');
          utf8_append(out, v);
        } else {
          out += '\\';  // Python keeps unknown escapes verbatim
          i -= 1;
        }
    }
  }
  emit(Tok::String, std::move(out), p);
  return i + 1;
}

size_t Lexer::lex_number(size_t p) {
  auto digits = [&](size_t i) {
    while (i < s_.size() &&
           (is_digit(s_[i]) || (s_[i] == '_' && i + 1 < s_.size() && is_digit(s_[i + 1]))))
      ++i;
    return i;
  };
  size_t e = digits(p);
  bool is_float = false;
  if (e + 1 < s_.size() && s_[e] == '.' && is_digit(s_[e + 1])) {
    e = digits(e + 1);
    is_float = true;
  }
  if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
    size_t x = e + 1;
    if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
    if (x < s_.size() && is_digit(s_[x])) {
      e = digits(x);
      is_float = true;
    }
  }
  std::string text;
  for (size_t i = p; i < e; ++i)
    if (s_[i] != '_') text += s_[i];
  emit(is_float ? Tok::Float : Tok::Int, text, p);
  return e;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opt) {
  return Lexer(normalize_source(source), opt).run();
}

}  // namespace t9::jinja
