#include "grammar/grammar.h"

#include <fmt/format.h>

#include <map>

namespace t9::grammar {

namespace {

std::string byte_text(int b) {
  if (b == '\\' || b == ']' || b == '[' || b == '-' || b == '"') return fmt::format("\\{:c}", b);
  if (b >= 0x20 && b < 0x7f) return std::string(1, static_cast<char>(b));
  return fmt::format("\\x{:02X}", b);
}

std::string class_text(const ByteSet& s) {
  int n = 0;
  for (int b = 0; b < 256; ++b) n += s.has(static_cast<uint8_t>(b));
  if (n == 1) {
    for (int b = 0; b < 256; ++b)
      if (s.has(static_cast<uint8_t>(b))) return fmt::format("\"{}\"", byte_text(b));
  }
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.has(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.has(static_cast<uint8_t>(e + 1))) ++e;
    out += byte_text(b);
    if (e > b) out += fmt::format("-{}", byte_text(e));
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += names_[r] + " ::=";
    for (size_t a = 0; a < rules_[r].size(); ++a) {
      if (a > 0) out += " |";
      uint32_t pos = rules_[r][a];
      if (code_[pos].kind == Elem::kEnd) out += " \"\"";
      for (; code_[pos].kind != Elem::kEnd; ++pos) {
        const Elem& e = code_[pos];
        out += " " + (e.kind == Elem::kRef ? names_[e.arg] : class_text(classes_[e.arg]));
      }
    }
    out += "\n";
  }
  return out;
}

uint32_t GrammarBuilder::declare(std::string name) {
  if (g_.rules_.size() >= kMaxRules) too_large_ = true;
  g_.names_.push_back(std::move(name));
  g_.rules_.emplace_back();
  alts_.emplace_back();
  defined_.push_back(0);
  return static_cast<uint32_t>(g_.rules_.size() - 1);
}

void GrammarBuilder::define(uint32_t rule, std::vector<Alt> alternatives) {
  for (const Alt& a : alternatives) n_syms_ += a.size() + 1;
  if (n_syms_ > kMaxCode) too_large_ = true;
  alts_[rule] = std::move(alternatives);
  defined_[rule] = 1;
}

Sym GrammarBuilder::bytes(const ByteSet& set) {
  for (size_t i = 0; i < g_.classes_.size(); ++i)
    if (g_.classes_[i] == set) return Sym{false, static_cast<uint32_t>(i)};
  g_.classes_.push_back(set);
  return Sym{false, static_cast<uint32_t>(g_.classes_.size() - 1)};
}

void GrammarBuilder::literal(Alt& alt, std::string_view text) {
  for (char c : text) alt.push_back(byte(static_cast<uint8_t>(c)));
}

uint32_t GrammarBuilder::optional(std::string name, Alt alt) {
  return rule(std::move(name), {Alt{}, std::move(alt)});
}

uint32_t GrammarBuilder::star(std::string name, Sym sym) {
  const uint32_t r = declare(std::move(name));
  define(r, {Alt{}, Alt{sym, ref(r)}});
  return r;
}

uint32_t GrammarBuilder::repeat(std::string name, Sym sym, int min, int max) {
  Alt head(static_cast<size_t>(min), sym);
  if (max < 0) {
    head.push_back(ref(star(name + "-more", sym)));
  } else if (max > min) {
    // tail_k ::= "" | sym tail_{k-1}: up to k more.
    uint32_t tail = optional(fmt::format("{}-1", name), Alt{sym});
    for (int k = 2; k <= max - min && !too_large_; ++k)
      tail = optional(fmt::format("{}-{}", name, k), Alt{sym, ref(tail)});
    head.push_back(ref(tail));
  }
  return rule(std::move(name), {std::move(head)});
}

uint32_t GrammarBuilder::text_until(std::string name, std::string_view stop) {
  return kmp_rules(std::move(name), stop, /*may_end=*/false, std::nullopt);
}

uint32_t GrammarBuilder::text_then(std::string name, std::string_view trigger, uint32_t then) {
  return kmp_rules(std::move(name), trigger, /*may_end=*/true, then);
}

// The KMP automaton of `stop` as rules: state i (i bytes of stop matched) has one alternative per
// next state, its bytes as one class; reaching the whole stop ends the rule (or goes on as
// `then`); with may_end every state may also end the text.
uint32_t GrammarBuilder::kmp_rules(std::string name, std::string_view stop, bool may_end,
                                   std::optional<uint32_t> then) {
  const int n = static_cast<int>(stop.size());
  // KMP failure function: fail[i] = length of the longest proper border of stop[0..i).
  std::vector<int> fail(static_cast<size_t>(n) + 1, 0);
  for (int i = 1, k = 0; i < n; ++i) {
    while (k > 0 && stop[i] != stop[k]) k = fail[k];
    if (stop[i] == stop[k]) ++k;
    fail[i + 1] = k;
  }
  auto next = [&](int state, uint8_t b) {
    while (state > 0 && static_cast<uint8_t>(stop[state]) != b) state = fail[state];
    return static_cast<uint8_t>(stop[state]) == b ? state + 1 : 0;
  };
  std::vector<uint32_t> states(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) states[i] = declare(i == 0 ? name : fmt::format("{}-{}", name, i));
  for (int i = 0; i < n; ++i) {
    std::map<int, ByteSet> by_next;  // next state -> the bytes that lead there
    for (int b = 0; b < 256; ++b)
      by_next[next(i, static_cast<uint8_t>(b))].add(static_cast<uint8_t>(b));
    std::vector<Alt> alts;
    if (may_end) alts.push_back(Alt{});
    for (const auto& [to, set] : by_next) {
      Alt a{bytes(set)};
      if (to < n)
        a.push_back(ref(states[to]));
      else if (then)
        a.push_back(ref(*then));  // the whole stop: go on as `then`, or end
      alts.push_back(std::move(a));
    }
    define(states[i], std::move(alts));
  }
  return states[0];
}

Result<Grammar> GrammarBuilder::build(uint32_t root) && {
  if (too_large_)
    return error("grammar too large (more than {} rules or {} symbols)", kMaxRules, kMaxCode);
  for (size_t r = 0; r < alts_.size(); ++r)
    if (!defined_[r]) return error("grammar rule '{}' is used but never defined", g_.names_[r]);
  g_.code_.reserve(n_syms_);
  for (size_t r = 0; r < alts_.size(); ++r) {
    for (const Alt& alt : alts_[r]) {
      g_.rules_[r].push_back(static_cast<uint32_t>(g_.code_.size()));
      for (const Sym& s : alt) g_.code_.push_back(Elem{s.is_ref ? Elem::kRef : Elem::kBytes, s.id});
      g_.code_.push_back(Elem{Elem::kEnd, 0});
    }
  }
  g_.root_ = root;
  return std::move(g_);
}

}  // namespace t9::grammar
