#include "chat/tool_calls/utf8_text.h"

#include <fmt/format.h>

namespace t9::chat {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the UTF-8 sequence a lead byte announces, 0 when it cannot start one.
int sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Whether byte `i` (1-based within the sequence) after `lead` is a valid continuation; checks the
// second byte's narrowed ranges so that overlongs, surrogates and > U+10FFFF are rejected.
bool valid_continuation(unsigned char lead, int i, unsigned char c) {
  if ((c & 0xC0) != 0x80) return false;
  if (i != 1) return true;
  if (lead == 0xE0) return c >= 0xA0;
  if (lead == 0xED) return c <= 0x9F;
  if (lead == 0xF0) return c >= 0x90;
  if (lead == 0xF4) return c <= 0x8F;
  return true;
}

enum class Seq { kValid, kInvalid, kIncomplete };

// Classifies the sequence starting at s[pos]; `len` gets the bytes it spans when valid.
Seq classify(std::string_view s, std::size_t pos, int& len) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  len = sequence_length(lead);
  if (len == 0) return Seq::kInvalid;
  for (int i = 1; i < len; ++i) {
    if (pos + i >= s.size()) return Seq::kIncomplete;
    if (!valid_continuation(lead, i, static_cast<unsigned char>(s[pos + i]))) return Seq::kInvalid;
  }
  return Seq::kValid;
}

}  // namespace

std::size_t utf8_decided_prefix(std::string_view s) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    int len = 0;
    switch (classify(s, pos, len)) {
      case Seq::kValid:
        pos += len;
        break;
      case Seq::kInvalid:
        pos += 1;
        break;
      case Seq::kIncomplete:
        return pos;
    }
  }
  return pos;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) {
    int len = 0;
    if (classify(s, pos, len) == Seq::kValid) {
      out.append(s.substr(pos, len));
      pos += len;
    } else {
      out.append(kReplacement);
      pos += 1;
    }
  }
  return out;
}

void append_json_escaped(std::string_view s, std::string& out) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += ch;
        }
    }
  }
}

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

void TextSink::append(std::string_view delta, std::string& out) {
  utf8_tail_.append(delta);
  const std::size_t n = utf8_decided_prefix(utf8_tail_);
  const std::string decided = sanitize_utf8(std::string_view(utf8_tail_).substr(0, n));
  utf8_tail_.erase(0, n);
  emit_decided(decided, out);
}

void TextSink::emit_decided(std::string_view bytes, std::string& out) {
  for (char c : bytes) {
    if (is_space(c)) {
      if (started_ && !after_break_) pending_ws_ += c;
      continue;
    }
    if (started_) out += pending_ws_;
    pending_ws_.clear();
    out += c;
    started_ = true;
    after_break_ = false;
  }
}

void TextSink::mark_break() {
  after_break_ = true;
}

void TextSink::finish(std::string& out) {
  const std::string rest = sanitize_utf8(utf8_tail_);
  utf8_tail_.clear();
  emit_decided(rest, out);
  pending_ws_.clear();
}

}  // namespace t9::chat
