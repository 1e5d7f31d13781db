#include "core/utf8.h"

#include <cstdint>

namespace t9 {

char32_t utf8_next(std::string_view s, size_t& i) {
  auto b = static_cast<uint8_t>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
    ++i;
    return b;
  }
  if (len == 1) {
    ++i;
    return b;
  }
  char32_t c = b & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    auto cb = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
    if ((cb & 0xc0) != 0x80) {
      ++i;
      return b;
    }
    c = (c << 6) | (cb & 0x3f);
  }
  i += static_cast<size_t>(len);
  return c;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

}  // namespace t9
