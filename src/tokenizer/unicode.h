// UTF-8 helpers the tokenizers share: validation, decoding, GPT-2's byte<->unicode map, NFC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/utf8.h"

namespace t9::tok {

// Length of the UTF-8 sequence starting with lead byte `b` (1 for stray continuation bytes and
// invalid leads, so callers that walk text byte-wise always make progress).
inline size_t utf8_len(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

// Number of bytes at the start of `s` that form complete, valid UTF-8 (no overlongs, no
// surrogates, <= U+10FFFF). Equals s.size() for valid text.
size_t utf8_valid_prefix(std::string_view s);

// An Error naming the byte offset of the first invalid sequence, or ok.
Status check_utf8(std::string_view s);

// Decodes one code point at s[i] (must be valid UTF-8); advances i.
uint32_t utf8_decode(std::string_view s, size_t& i);
using t9::utf8_append;  // core/utf8.h

// GPT-2 byte-level BPE: every byte maps to one printable code point ("Ġ" for space).
// byte_to_unicode returns its UTF-8 text.
const std::string& byte_to_unicode(uint8_t b);
// The byte a code point stands for, or -1 when it is not one of the 256 mapped code points.
int unicode_to_byte(uint32_t cp);

// Unicode canonical composition (NFC), as Hugging Face normalizers do. Input must be valid UTF-8.
// Fast path: returns false without touching `out` when `s` is already NFC by a quick check
// (all code points below U+0300), which covers ASCII and most Latin text.
bool nfc_needed(std::string_view s);
std::string nfc(std::string_view s);

}  // namespace t9::tok
