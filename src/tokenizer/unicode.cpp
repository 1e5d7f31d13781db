#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <vector>

#include "tokenizer/nfc_data.h"

namespace t9::tok {

namespace {

// Length of the valid sequence at s[i], or 0 when it is invalid or truncated.
size_t valid_seq_len(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // > U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  const auto b1 = static_cast<uint8_t>(s[i + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

size_t utf8_valid_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = valid_seq_len(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

Status check_utf8(std::string_view s) {
  const size_t n = utf8_valid_prefix(s);
  if (n == s.size()) return {};
  return error("invalid UTF-8 at byte offset {} (byte 0x{:02X})", n, static_cast<uint8_t>(s[n]));
}

uint32_t utf8_decode(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  const size_t n = std::min(utf8_len(b0), s.size() - i);
  if (n == 1) {
    ++i;
    return b0;
  }
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// GPT-2's map: printable Latin-1 bytes stand for themselves, the other 68 bytes are shifted to
// U+0100.. in byte order, so every byte has a visible, non-whitespace code point.
namespace {
struct ByteMap {
  std::array<uint32_t, 256> cp{};
  std::array<std::string, 256> text;
  ByteMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      utf8_append(text[b], cp[b]);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) {
  return byte_map().text[b];
}

int unicode_to_byte(uint32_t cp) {
  if (cp < 256) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || cp >= 0xAE;
    return printable ? static_cast<int>(cp) : -1;
  }
  const auto& m = byte_map();
  if (cp >= 256 + 68) return -1;
  for (int b = 0; b < 256; ++b)
    if (m.cp[b] == cp) return b;
  return -1;
}

// ---- NFC ------------------------------------------------------------------------------------

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr uint32_t kSCount = kLCount * kNCount;

uint8_t ccc_of(uint32_t cp) {
  using nfc_data::kCombiningClass;
  const auto* end = kCombiningClass + nfc_data::kNumCombiningClass;
  const auto* it = std::lower_bound(kCombiningClass, end, cp,
                                    [](const auto& e, uint32_t c) { return e.cp < c; });
  return (it != end && it->cp == cp) ? it->ccc : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  using nfc_data::kDecomposition;
  const auto* end = kDecomposition + nfc_data::kNumDecomposition;
  const auto* it =
      std::lower_bound(kDecomposition, end, cp, [](const auto& e, uint32_t c) { return e.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  decompose(it->first, out);
  if (it->second) decompose(it->second, out);
}

// The primary composite of (a, b), or 0.
uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  using nfc_data::kComposition;
  const auto* end = kComposition + nfc_data::kNumComposition;
  const auto* it = std::lower_bound(kComposition, end, std::pair{a, b}, [](const auto& e, auto k) {
    return e.first < k.first || (e.first == k.first && e.second < k.second);
  });
  return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

// Canonical ordering then canonical composition (UAX #15) over a decomposed buffer.
void reorder_and_compose(std::vector<uint32_t>& cps) {
  for (size_t i = 1; i < cps.size(); ++i) {  // stable insertion sort of non-starter runs
    const uint8_t c = ccc_of(cps[i]);
    if (c == 0) continue;
    size_t j = i;
    while (j > 0 && ccc_of(cps[j - 1]) > c) {
      std::swap(cps[j], cps[j - 1]);
      --j;
    }
  }
  if (cps.empty()) return;
  size_t starter = 0, out = 1;
  int last_ccc = ccc_of(cps[0]) == 0 ? 0 : 256;
  if (last_ccc != 0) starter = SIZE_MAX;
  for (size_t i = 1; i < cps.size(); ++i) {
    const uint32_t cp = cps[i];
    const int c = ccc_of(cp);
    if (starter != SIZE_MAX && (last_ccc < c || (last_ccc == 0 && out == starter + 1))) {
      if (const uint32_t comp = compose_pair(cps[starter], cp)) {
        cps[starter] = comp;
        continue;
      }
    }
    if (c == 0) {
      starter = out;
      last_ccc = 0;
    } else {
      last_ccc = c;
    }
    cps[out++] = cp;
  }
  cps.resize(out);
}

}  // namespace

bool nfc_needed(std::string_view s) {
  // Below U+0300 nothing decomposes or combines except a few Latin-1 letters that are already
  // composed; the first combining mark range starts at U+0300.
  for (char ch : s)
    if (static_cast<uint8_t>(ch) >= 0xCC) return true;
  return false;
}

std::string nfc(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose(utf8_decode(s, i), cps);
  reorder_and_compose(cps);
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : cps) utf8_append(out, cp);
  return out;
}

}  // namespace t9::tok
