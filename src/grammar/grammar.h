// Grammar: a context-free grammar over bytes, the form structured output is checked in (what a
// JSON schema, a "json" format or a tool call's shape compiles to). Each rule is a list of
// alternatives; an alternative is a sequence of symbols, each a byte class (a set of the 256
// byte values) or a reference to a rule. No left recursion (the builders in this folder only
// write right recursion), so a recognizer can expand references eagerly (grammar/matcher.h).
//
// Compiled form (what the matcher walks): every alternative is stored in `code` as its symbols
// followed by an end marker, so a parse position is one index into `code`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace t9::grammar {

// A set of byte values: bit b of word b / 64.
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  void merge(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i];
  }
  bool operator==(const ByteSet&) const = default;

  static ByteSet of(uint8_t b) {
    ByteSet s;
    s.add(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return s;
  }
};

struct Elem {
  enum Kind : uint8_t { kBytes, kRef, kEnd };
  Kind kind = kEnd;
  uint32_t arg = 0;  // kBytes: index into Grammar::classes; kRef: rule id
};

class Grammar {
 public:
  // The rule a parse starts from.
  uint32_t root() const { return root_; }
  // Offsets into code() where each alternative of `rule` starts.
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
  const Elem& at(uint32_t pos) const { return code_[pos]; }
  const ByteSet& byte_class(uint32_t id) const { return classes_[id]; }
  size_t n_rules() const { return rules_.size(); }
  size_t code_size() const { return code_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // GBNF-like text, one rule a line (tests and debugging).
  std::string to_string() const;

 private:
  friend class GrammarBuilder;
  std::vector<std::vector<uint32_t>> rules_;
  std::vector<std::string> names_;
  std::vector<Elem> code_;
  std::vector<ByteSet> classes_;
  uint32_t root_ = 0;
};

// A symbol while building: a byte class or a rule reference.
struct Sym {
  bool is_ref = false;
  uint32_t id = 0;  // rule id, or class id
};
using Alt = std::vector<Sym>;

// Builds a Grammar. Rules are declared first (so they can refer to each other, recursion
// included) and defined once. Size limits keep a hostile schema from taking the server's memory.
class GrammarBuilder {
 public:
  static constexpr size_t kMaxCode = 1u << 20;  // symbols over all alternatives
  static constexpr size_t kMaxRules = 1u << 18;

  uint32_t declare(std::string name);
  void define(uint32_t rule, std::vector<Alt> alternatives);
  uint32_t rule(std::string name, std::vector<Alt> alternatives) {
    const uint32_t r = declare(std::move(name));
    define(r, std::move(alternatives));
    return r;
  }

  Sym bytes(const ByteSet& set);
  Sym byte(uint8_t b) { return bytes(ByteSet::of(b)); }
  static Sym ref(uint32_t rule) { return Sym{true, rule}; }
  // Appends the bytes of `text` to `alt`, one symbol each.
  void literal(Alt& alt, std::string_view text);
  Alt literal(std::string_view text) {
    Alt a;
    literal(a, text);
    return a;
  }
  // r ::= "" | alt
  uint32_t optional(std::string name, Alt alt);
  // r ::= "" | sym r   (zero or more)
  uint32_t star(std::string name, Sym sym);
  // Between min and max (max < 0: unbounded) repetitions of `sym`, as a rule.
  uint32_t repeat(std::string name, Sym sym, int min, int max);
  // Any bytes that do not contain `stop`, then `stop` (a KMP automaton as rules): free text up
  // to a closing marker.
  uint32_t text_until(std::string name, std::string_view stop);
  // Free text that may end anywhere, and once it contains `trigger` goes on as rule `then`: a
  // lazy grammar (tool calls enforced only from their opening marker on).
  uint32_t text_then(std::string name, std::string_view trigger, uint32_t then);

  // Fails when a declared rule was never defined or the limits were passed.
  Result<Grammar> build(uint32_t root) &&;

 private:
  uint32_t kmp_rules(std::string name, std::string_view stop, bool may_end,
                     std::optional<uint32_t> then);

  Grammar g_;
  std::vector<char> defined_;
  std::vector<std::vector<Alt>> alts_;
  size_t n_syms_ = 0;
  bool too_large_ = false;
};

}  // namespace t9::grammar
