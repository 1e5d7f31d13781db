#include "chat/jinja/text.h"

#include <algorithm>

#include "chat/jinja/value.h"

namespace t9::jinja {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (uint8_t(c) >= 0x80) return false;
  return true;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xc0) != 0x80;
  return n;
}

std::vector<char32_t> utf8_decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(utf8_next(s, i));
  return out;
}

std::string utf8_encode(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) utf8_append(out, c);
  return out;
}

bool is_space(char32_t c) {
  if (c <= 0x20) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return false;
  if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
      (c >= 0x205f && c <= 0x206f) || c == 0xfeff || c == 0x1680 || c == 0x3000)
    return false;
  if ((c >= 0xd800 && c <= 0xdfff) || (c >= 0xe000 && c <= 0xf8ff) || c >= 0xf0000) return false;
  return true;
}

// Case mapping for ASCII, Latin-1, Latin Extended-A pairs, Greek and Cyrillic: the scripts that
// appear in chat templates and role names. Other scripts pass through unchanged.
char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xb5) return c;
  if (c == 0xb5) return 0x39c;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  if (c == 0xff) return 0x178;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149) {
    bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xc0) return c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149) {
    bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool is_cased(char32_t c) {
  return to_upper(c) != c || to_lower(c) != c;
}

bool is_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || is_cased(c) || (c >= 0x80 && !is_space(c) && c > 0x2fff);
}

namespace {

template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  size_t n = 0;
  while (i < s.size()) utf8_append(out, f(utf8_next(s, i), n++));
  return out;
}

bool in_chars(char32_t c, const std::string* chars) {
  if (!chars) return is_space(c);
  for (size_t i = 0; i < chars->size();)
    if (utf8_next(*chars, i) == c) return true;
  return false;
}

}  // namespace

std::string py_upper(std::string_view s) {
  return map_chars(s, [](char32_t c, size_t) { return to_upper(c); });
}
std::string py_lower(std::string_view s) {
  return map_chars(s, [](char32_t c, size_t) { return to_lower(c); });
}
std::string py_capitalize(std::string_view s) {
  return map_chars(s, [](char32_t c, size_t n) { return n == 0 ? to_upper(c) : to_lower(c); });
}
std::string py_title(std::string_view s) {
  bool prev_cased = false;
  return map_chars(s, [&](char32_t c, size_t) {
    char32_t r = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = is_cased(c);
    return r;
  });
}

std::string_view py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  auto cps_begin = [&](size_t i) {
    while (i < s.size()) {
      size_t j = i;
      if (!in_chars(utf8_next(s, j), chars)) break;
      i = j;
    }
    return i;
  };
  size_t b = left ? cps_begin(0) : 0;
  size_t e = s.size();
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (uint8_t(s[start]) & 0xc0) == 0x80) --start;
      size_t j = start;
      if (!in_chars(utf8_next(s, j), chars)) break;
      e = start;
    }
  }
  return s.substr(b, e - b);
}

namespace {

std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  // Tokens as [begin, end) byte ranges of non-space runs.
  std::vector<std::pair<size_t, size_t>> runs;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (is_space(utf8_next(s, j))) {
      i = j;
      continue;
    }
    size_t b = i;
    while (i < s.size()) {
      j = i;
      if (is_space(utf8_next(s, j))) break;
      i = j;
    }
    runs.emplace_back(b, i);
  }
  std::vector<std::string> out;
  if (maxsplit < 0 || size_t(maxsplit) + 1 >= runs.size()) {
    for (auto [b, e] : runs) out.emplace_back(s.substr(b, e - b));
    return out;
  }
  size_t n = size_t(maxsplit);
  if (!from_right) {
    for (size_t k = 0; k < n; ++k)
      out.emplace_back(s.substr(runs[k].first, runs[k].second - runs[k].first));
    std::string rest(py_strip(s.substr(runs[n].first), nullptr, false, true));
    out.push_back(rest);
  } else {
    size_t first = runs.size() - n;
    out.emplace_back(py_strip(s.substr(0, runs[first - 1].second), nullptr, true, false));
    for (size_t k = first; k < runs.size(); ++k)
      out.emplace_back(s.substr(runs[k].first, runs[k].second - runs[k].first));
  }
  return out;
}

}  // namespace

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right) {
  if (!sep) return split_whitespace(s, maxsplit, from_right);
  if (sep->empty()) fail("empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  size_t end = s.size();
  while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t f = s.rfind(*sep, end - sep->size());
    if (f == std::string_view::npos) break;
    out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
    end = f;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `repl` before every code point and at the end
    size_t i = 0;
    int64_t n = 0;
    while (i < s.size()) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      size_t b = i;
      utf8_next(s, i);
      out.append(s.substr(b, i - b));
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out += repl;
    pos = f + old.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> out;
  size_t b = 0, i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = utf8_next(s, i);
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    out.emplace_back(s.substr(b, start - b));
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    b = i;
  }
  if (b < s.size()) out.emplace_back(s.substr(b));
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace t9::jinja
