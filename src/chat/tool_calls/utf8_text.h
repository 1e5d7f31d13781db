// Byte-level helpers the streaming parsers share: UTF-8 hold-back (a delta may end inside a
// multi-byte character, and every emitted event must be valid UTF-8), JSON string escaping that
// matches nlohmann::json::dump byte for byte, and the whitespace policy of visible text.
#pragma once

#include <string>
#include <string_view>

namespace t9::chat {

// Length of the longest prefix of `s` that does not end inside an incomplete (but so far valid)
// UTF-8 sequence. Invalid bytes count as decided (they become U+FFFD in sanitize_utf8).
std::size_t utf8_decided_prefix(std::string_view s);

// `s` with every invalid or truncated UTF-8 sequence replaced by U+FFFD, one per offending byte.
// Left to right and local, so sanitizing a decided prefix and the rest separately equals
// sanitizing the whole.
std::string sanitize_utf8(std::string_view s);

// Appends the JSON escaping of valid UTF-8 `s` (without quotes), as nlohmann::json::dump does
// with ensure_ascii=false: \" \\ \b \f \n \r \t, other controls as \u00xx, the rest verbatim.
void append_json_escaped(std::string_view s, std::string& out);

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
std::string_view trim_space(std::string_view s);

// Streaming visible text (content or reasoning) with one whitespace policy, so that streamed and
// whole-text results agree without retracting anything:
//  - leading and trailing whitespace of the whole text is dropped (a trailing whitespace run is
//    held back until non-space text follows it);
//  - at a break (a tool call was cut out here), whitespace right after the break is dropped and
//    the run before it is emitted only if more text follows: "A.\n<call>\nB." -> "A.\nB.".
class TextSink {
 public:
  // Appends the part of `delta` that is certain to `out` (UTF-8 complete, sanitized).
  void append(std::string_view delta, std::string& out);
  void mark_break();
  // Whether any non-space text has been given (emitted or held as an incomplete character).
  bool started() const { return started_ || !utf8_tail_.empty(); }
  // End of text: a truncated UTF-8 tail becomes U+FFFD, trailing whitespace is dropped.
  void finish(std::string& out);

 private:
  void emit_decided(std::string_view bytes, std::string& out);

  std::string utf8_tail_;  // bytes of an incomplete UTF-8 sequence
  std::string pending_ws_;
  bool started_ = false;      // non-space text was emitted
  bool after_break_ = false;  // only whitespace since the last break
};

}  // namespace t9::chat
