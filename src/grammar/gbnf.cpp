#include "grammar/gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace t9::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;  // one range per byte of a sequence

// The code points [lo, hi] as UTF-8 byte-range sequences (each byte of a sequence ranges
// independently): split where the encoded length changes, then where a continuation byte would
// not cover its whole range.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && max < hi) {
      utf8_sequences(lo, max, out);
      utf8_sequences(max + 1, hi, out);
      return;
    }
  }
  std::string a, b;
  utf8_append(a, lo);
  utf8_append(b, hi);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteRanges seq;
  for (size_t k = 0; k < n; ++k)
    seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  Result<Grammar> parse() && {
    skip_space(true);
    while (p_ < t_.size() && err_.empty()) {
      parse_rule();
      skip_space(true);
    }
    if (!err_.empty()) return error("{}", err_);
    auto root = rules_.find("root");
    if (root == rules_.end() || !defined_.count("root"))
      return error("grammar: no rule named 'root'");
    for (const auto& [name, id] : rules_)
      if (!defined_.count(name)) return error("grammar: rule '{}' is used but never defined", name);
    return std::move(b_).build(root->second);
  }

 private:
  bool fail(const std::string& what) {
    if (!err_.empty()) return false;
    int line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    err_ = fmt::format("grammar: line {}, column {}: {}", line, col, what);
    return false;
  }
  bool at(char c) const { return p_ < t_.size() && t_[p_] == c; }
  bool eof() const { return p_ >= t_.size(); }

  // Spaces, tabs and comments; line breaks too when `newlines`.
  void skip_space(bool newlines) {
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++p_;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }

  std::string parse_name() {
    const size_t start = p_;
    while (p_ < t_.size() && name_char(t_[p_])) ++p_;
    return std::string(t_.substr(start, p_ - start));
  }

  uint32_t rule_id(const std::string& name) {
    auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    const uint32_t id = b_.declare(name);
    rules_.emplace(name, id);
    return id;
  }

  uint32_t anonymous(std::vector<Alt> alts) {
    return b_.rule(fmt::format("_{}", n_anon_++), std::move(alts));
  }

  void parse_rule() {
    const std::string name = parse_name();
    if (name.empty()) return (void)fail("expected a rule name");
    skip_space(false);
    if (t_.substr(p_, 3) != "::=") return (void)fail("expected '::=' after '" + name + "'");
    p_ += 3;
    skip_space(true);
    if (defined_.count(name)) return (void)fail("rule '" + name + "' is defined twice");
    std::vector<Alt> alts;
    if (!parse_alternatives(false, alts)) return;
    skip_space(false);
    if (!eof() && !at('\n') && !at('\r')) return (void)fail("expected the end of the line");
    defined_.insert(name);
    b_.define(rule_id(name), std::move(alts));
  }

  bool parse_alternatives(bool nested, std::vector<Alt>& out) {
    for (;;) {
      Alt seq;
      if (!parse_sequence(nested, seq)) return false;
      out.push_back(std::move(seq));
      skip_space(nested);
      if (!nested && (at('\n') || at('\r'))) {  // a next line starting with '|' goes on
        const size_t save = p_;
        skip_space(true);
        if (!at('|')) {
          p_ = save;
          return true;
        }
      }
      if (!at('|')) return true;
      ++p_;
      skip_space(true);
    }
  }

  bool parse_sequence(bool nested, Alt& seq) {
    for (;;) {
      skip_space(nested);
      if (eof() || at('|') || at(')') || at('\n') || at('\r')) return true;
      if (!parse_item(seq)) return false;
    }
  }

  // One atom and its repetition suffix, appended to seq.
  bool parse_item(Alt& seq) {
    Alt atom;  // the atom's symbols (several for a multi-byte literal)
    if (at('"')) {
      ++p_;
      if (!parse_literal(atom)) return false;
    } else if (at('[')) {
      ++p_;
      Sym s;
      if (!parse_class(s)) return false;
      atom.push_back(s);
    } else if (at('.')) {
      ++p_;
      atom.push_back(code_points({{0, kMaxCodePoint}}));
    } else if (at('(')) {
      if (++depth_ > kMaxNesting)
        return fail(fmt::format("groups nested deeper than {}", kMaxNesting));
      ++p_;
      skip_space(true);
      std::vector<Alt> alts;
      if (!parse_alternatives(true, alts)) return false;
      --depth_;
      skip_space(true);
      if (!at(')')) return fail("expected ')'");
      ++p_;
      atom.push_back(GrammarBuilder::ref(anonymous(std::move(alts))));
    } else if (name_char(t_[p_])) {
      atom.push_back(GrammarBuilder::ref(rule_id(parse_name())));
    } else {
      return fail(fmt::format("unexpected '{}'", t_[p_]));
    }
    int min = 1, max = 1;
    if (at('*')) {
      ++p_;
      min = 0, max = -1;
    } else if (at('+')) {
      ++p_;
      min = 1, max = -1;
    } else if (at('?')) {
      ++p_;
      min = 0, max = 1;
    } else if (at('{')) {
      ++p_;
      if (!parse_count(min, max)) return false;
    }
    if (min == 1 && max == 1) {
      seq.insert(seq.end(), atom.begin(), atom.end());
      return true;
    }
    const Sym one = atom.size() == 1 ? atom[0] : GrammarBuilder::ref(anonymous({atom}));
    seq.push_back(GrammarBuilder::ref(b_.repeat(fmt::format("_{}", n_anon_++), one, min, max)));
    return true;
  }

  // {m}, {m,}, {m,n} (after '{').
  bool parse_count(int& min, int& max) {
    auto number = [&](int& v) {
      const size_t start = p_;
      int64_t n = 0;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9' && n <= 100000)
        n = n * 10 + (t_[p_++] - '0');
      v = static_cast<int>(n);
      return p_ > start && n <= 100000;
    };
    skip_space(false);
    if (!number(min)) return fail("expected a repetition count (0..100000)");
    skip_space(false);
    max = min;
    if (at(',')) {
      ++p_;
      skip_space(false);
      max = -1;
      if (!at('}') && !number(max)) return fail("expected a repetition count (0..100000)");
      skip_space(false);
    }
    if (!at('}')) return fail("expected '}'");
    ++p_;
    if (max >= 0 && max < min) return fail("a repetition's maximum is below its minimum");
    return true;
  }

  // One escape (after the backslash) or one UTF-8 character, as a code point.
  bool read_char(uint32_t& cp, bool& raw_byte) {
    raw_byte = false;
    if (eof()) return fail("unexpected end of the grammar");
    const auto c = static_cast<uint8_t>(t_[p_]);
    if (c == '\\') {
      ++p_;
      if (eof()) return fail("unexpected end of the grammar after '\\'");
      const char e = t_[p_++];
      int digits = 0;
      switch (e) {
        case 'n':
          cp = '\n';
          return true;
        case 'r':
          cp = '\r';
          return true;
        case 't':
          cp = '\t';
          return true;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
          cp = static_cast<uint8_t>(e);
          return true;
        case 'x':
          digits = 2;
          break;
        case 'u':
          digits = 4;
          break;
        case 'U':
          digits = 8;
          break;
        default:
          --p_;
          return fail(fmt::format("unknown escape '\\{}'", e));
      }
      cp = 0;
      for (int i = 0; i < digits; ++i) {
        if (eof() || !std::isxdigit(static_cast<unsigned char>(t_[p_])))
          return fail(fmt::format("expected {} hex digits", digits));
        const char h = t_[p_++];
        cp = cp * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      if (cp > kMaxCodePoint) return fail("code point above U+10FFFF");
      raw_byte = digits == 2;  // \xHH: one byte, as llama.cpp reads it in literals
      return true;
    }
    cp = utf8_next(t_, p_);  // a character of the grammar's own text (lenient, as llama.cpp)
    return true;
  }

  bool parse_literal(Alt& out) {
    std::string bytes;
    while (!at('"')) {
      if (eof() || at('\n')) return fail("unterminated string literal");
      uint32_t cp;
      bool raw;
      if (!read_char(cp, raw)) return false;
      if (raw)
        bytes.push_back(static_cast<char>(cp));
      else
        utf8_append(bytes, cp);
    }
    ++p_;
    b_.literal(out, bytes);
    return true;
  }

  bool parse_class(Sym& out) {
    const bool negated = at('^');
    if (negated) ++p_;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (!at(']')) {
      if (eof() || at('\n')) return fail("unterminated character class");
      uint32_t lo, hi;
      bool raw;
      if (!read_char(lo, raw)) return false;
      hi = lo;
      if (at('-') && p_ + 1 < t_.size() && t_[p_ + 1] != ']') {
        ++p_;
        if (!read_char(hi, raw)) return false;
        if (hi < lo) return fail("a character range's end is below its start");
      }
      ranges.emplace_back(lo, hi);
    }
    ++p_;
    std::sort(ranges.begin(), ranges.end());
    if (negated) {
      std::vector<std::pair<uint32_t, uint32_t>> rest;
      uint32_t next = 0;
      for (const auto& [lo, hi] : ranges) {
        if (lo > next) rest.emplace_back(next, lo - 1);
        next = std::max(next, hi + 1);
      }
      if (next <= kMaxCodePoint) rest.emplace_back(next, kMaxCodePoint);
      ranges = std::move(rest);
    }
    if (ranges.empty()) return fail("a character class that admits nothing");
    out = code_points(ranges);
    return true;
  }

  // A symbol for the code points in `ranges`: one byte class when all are ASCII, else a rule of
  // the UTF-8 sequences (the one-byte ones merged into one class).
  Sym code_points(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<ByteRanges> seqs;
    for (const auto& [lo, hi] : ranges) utf8_sequences(lo, hi, seqs);
    ByteSet single;
    std::vector<Alt> alts;
    for (const ByteRanges& s : seqs) {
      if (s.size() == 1) {
        single.add_range(s[0].first, s[0].second);
        continue;
      }
      Alt a;
      for (const auto& [lo, hi] : s) a.push_back(b_.bytes(ByteSet::range(lo, hi)));
      alts.push_back(std::move(a));
    }
    if (alts.empty()) return b_.bytes(single);
    if (!single.empty()) alts.push_back(Alt{b_.bytes(single)});
    return GrammarBuilder::ref(anonymous(std::move(alts)));
  }

  static constexpr int kMaxNesting = 256;  // ( ) groups: the parser recurses into each

  std::string_view t_;
  size_t p_ = 0;
  int depth_ = 0;
  GrammarBuilder b_;
  std::map<std::string, uint32_t> rules_;
  std::set<std::string> defined_;
  std::string err_;
  int n_anon_ = 0;
};

}  // namespace

Result<Grammar> gbnf_grammar(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace t9::grammar
