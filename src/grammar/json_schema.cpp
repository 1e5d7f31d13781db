#include "grammar/json_schema.h"

#include "grammar/schema_compiler.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <unordered_map>

namespace t9::grammar {

namespace {

constexpr int kMaxDepth = 64;       // nested schemas (references aside)
constexpr int kMaxIndent = 20;      // spaces or tabs after a newline
constexpr int kMaxIntDigits = 16;   // an integer part's digits
constexpr int kMaxFracDigits = 16;  // a fraction's digits
constexpr int kMaxExpDigits = 3;    // an exponent's digits

}  // namespace

uint32_t SchemaCompiler::fail(const std::string& path, const std::string& why) {
  if (lenient_) return any_value();
  if (err_.empty()) err_ = path + ": " + why;
  return null_rule();
}

uint32_t SchemaCompiler::ws() {
  return cached(ws_, [&] {
    const uint32_t indent = b_.repeat("indent", b_.bytes([] {
      ByteSet s = ByteSet::of(' ');
      s.add('\t');
      return s;
    }()),
                                      0, kMaxIndent);
    return b_.rule("ws", {Alt{}, b_.literal(" "), Alt{b_.byte('\n'), GrammarBuilder::ref(indent)}});
  });
}

uint32_t SchemaCompiler::sep() {
  return cached(sep_, [&] {
    return b_.rule("sep",
                   {Alt{GrammarBuilder::ref(ws()), b_.byte(','), GrammarBuilder::ref(ws())}});
  });
}

// One JSON string character: printable ASCII but '"' and '\', a valid UTF-8 sequence of 2-4
// bytes, or an escape.
uint32_t SchemaCompiler::str_char() {
  return cached(char_, [&] {
    ByteSet plain = ByteSet::range(0x20, 0x7f);
    plain.bits[0x22 >> 6] &= ~(uint64_t{1} << (0x22 & 63));
    plain.bits[0x5c >> 6] &= ~(uint64_t{1} << (0x5c & 63));
    const Sym cont = b_.bytes(ByteSet::range(0x80, 0xbf));
    ByteSet simple_esc;
    for (char c : std::string("\"\\/bfnrt")) simple_esc.add(static_cast<uint8_t>(c));
    ByteSet hex = ByteSet::range('0', '9');
    hex.add_range('a', 'f');
    hex.add_range('A', 'F');
    const Sym h = b_.bytes(hex);
    const uint32_t esc =
        b_.rule("escape", {Alt{b_.bytes(simple_esc)}, Alt{b_.byte('u'), h, h, h, h}});
    return b_.rule("char", {Alt{b_.bytes(plain)}, Alt{b_.bytes(ByteSet::range(0xc2, 0xdf)), cont},
                            Alt{b_.bytes(ByteSet::range(0xe0, 0xef)), cont, cont},
                            Alt{b_.bytes(ByteSet::range(0xf0, 0xf4)), cont, cont, cont},
                            Alt{b_.byte('\\'), GrammarBuilder::ref(esc)}});
  });
}

uint32_t SchemaCompiler::string_of(const std::string& name, int min, int max) {
  const uint32_t chars = b_.repeat(name + "-chars", GrammarBuilder::ref(str_char()), min, max);
  return b_.rule(name, {Alt{b_.byte('"'), GrammarBuilder::ref(chars), b_.byte('"')}});
}

uint32_t SchemaCompiler::int_part() {
  return cached(int_part_, [&] {
    const uint32_t rest =
        b_.repeat("digits", b_.bytes(ByteSet::range('0', '9')), 0, kMaxIntDigits - 1);
    return b_.rule("int-part", {b_.literal("0"), Alt{b_.bytes(ByteSet::range('1', '9')),
                                                     GrammarBuilder::ref(rest)}});
  });
}

uint32_t SchemaCompiler::integer(bool negative) {
  return cached(int_[negative], [&] {
    std::vector<Alt> alts{Alt{GrammarBuilder::ref(int_part())}};
    if (negative) alts.push_back(Alt{b_.byte('-'), GrammarBuilder::ref(int_part())});
    return b_.rule(negative ? "integer" : "integer-nonneg", std::move(alts));
  });
}

uint32_t SchemaCompiler::number(bool negative) {
  return cached(num_[negative], [&] {
    const Sym digit = b_.bytes(ByteSet::range('0', '9'));
    const uint32_t frac = b_.optional(
        "frac",
        Alt{b_.byte('.'), GrammarBuilder::ref(b_.repeat("frac-digits", digit, 1, kMaxFracDigits))});
    ByteSet e = ByteSet::of('e');
    e.add('E');
    ByteSet sign = ByteSet::of('-');
    sign.add('+');
    const uint32_t exp = b_.optional(
        "exp", Alt{b_.bytes(e), GrammarBuilder::ref(b_.optional("exp-sign", Alt{b_.bytes(sign)})),
                   GrammarBuilder::ref(b_.repeat("exp-digits", digit, 1, kMaxExpDigits))});
    const Alt tail{GrammarBuilder::ref(int_part()), GrammarBuilder::ref(frac),
                   GrammarBuilder::ref(exp)};
    std::vector<Alt> alts{tail};
    if (negative) {
      Alt neg{b_.byte('-')};
      neg.insert(neg.end(), tail.begin(), tail.end());
      alts.push_back(std::move(neg));
    }
    return b_.rule(negative ? "number" : "number-nonneg", std::move(alts));
  });
}

uint32_t SchemaCompiler::boolean() {
  return cached(bool_, [&] {
    return b_.rule("boolean", {b_.literal("true"), b_.literal("false")});
  });
}

// value ::= object | array | string | number | true | false | null (recursive).
uint32_t SchemaCompiler::any_value() {
  if (any_value_) return *any_value_;
  const uint32_t v = b_.declare("value");
  any_value_ = v;
  b_.define(v, {Alt{GrammarBuilder::ref(any_object())}, Alt{GrammarBuilder::ref(any_array())},
                Alt{GrammarBuilder::ref(any_string())}, Alt{GrammarBuilder::ref(number(true))},
                Alt{GrammarBuilder::ref(boolean())}, Alt{GrammarBuilder::ref(null_rule())}});
  return v;
}

uint32_t SchemaCompiler::any_object() {
  if (any_object_) return *any_object_;
  const auto R = GrammarBuilder::ref;
  any_object_ = b_.declare("object");
  const uint32_t member =
      b_.rule("member", {Alt{R(any_string()), R(ws()), b_.byte(':'), R(ws()), R(any_value())}});
  define_container(*any_object_, "object", '{', member, '}');
  return *any_object_;
}

uint32_t SchemaCompiler::any_array() {
  if (any_array_) return *any_array_;
  any_array_ = b_.declare("array");
  define_container(*any_array_, "array", '[', any_value(), ']');
  return *any_array_;
}

// r ::= open ws (close | item (ws "," ws item)* ws close)
void SchemaCompiler::define_container(uint32_t r, const std::string& name, char open, uint32_t item,
                                      char close) {
  const auto R = GrammarBuilder::ref;
  const uint32_t more =
      b_.star(name + "-more", R(b_.rule(name + "-next", {Alt{R(sep()), R(item)}})));
  const uint32_t body = b_.rule(
      name + "-body", {Alt{b_.byte(static_cast<uint8_t>(close))},
                       Alt{R(item), R(more), R(ws()), b_.byte(static_cast<uint8_t>(close))}});
  b_.define(r, {Alt{b_.byte(static_cast<uint8_t>(open)), R(ws()), R(body)}});
}

uint32_t SchemaCompiler::alternatives(const std::string& name, const std::vector<uint32_t>& rules) {
  if (rules.size() == 1) return rules[0];
  std::vector<Alt> alts;
  for (uint32_t r : rules) alts.push_back(Alt{GrammarBuilder::ref(r)});
  return b_.rule(name, std::move(alts));
}

std::optional<int> SchemaCompiler::count(const Json& s, const char* key, const std::string& path) {
  auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 20)) {
    fail(path + "." + key, "must be an integer in 0..1048576");
    return std::nullopt;
  }
  return static_cast<int>(it->get<int64_t>());
}

uint32_t SchemaCompiler::reference(const std::string& ref, const std::string& path, int depth) {
  const std::string key = fmt::format("{}#{}", static_cast<const void*>(root_), ref);
  if (auto it = refs_.find(key); it != refs_.end()) return it->second;
  if (ref.empty() || ref[0] != '#')
    return fail(path + ".$ref", "only references inside the schema (\"#/...\") are supported");
  const Json* target = root_;
  if (ref.size() > 1) {
    try {
      target = &root_->at(Json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      return fail(path + ".$ref", "'" + ref + "' names nothing in the schema");
    }
  }
  const uint32_t r = b_.declare("ref" + std::to_string(n_names_++));
  refs_.emplace(key, r);  // before compiling the target: it may refer to itself
  const uint32_t t = value(*target, ref, depth + 1);
  b_.define(r, {Alt{GrammarBuilder::ref(t)}});
  return r;
}

uint32_t SchemaCompiler::value(const Json& s, const std::string& path, int depth) {
  if (!ok()) return null_rule();
  if (depth > kMaxDepth) return fail(path, fmt::format("nested more than {} levels", kMaxDepth));
  if (s.is_boolean())
    return s.get<bool>() ? any_value() : fail(path, "a false schema admits no value");
  if (!s.is_object()) return fail(path, "must be an object or a boolean");
  if (auto it = s.find("$ref"); it != s.end()) {
    if (!it->is_string()) return fail(path + ".$ref", "must be a string");
    return reference(it->get<std::string>(), path, depth);
  }
  for (const char* k : {"pattern", "prefixItems", "patternProperties"})
    if (s.contains(k) && !lenient_) return fail(path + "." + k, "is not supported");
  if (auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array() || it->empty()) return fail(path + ".enum", "must be a non-empty array");
    std::vector<uint32_t> alts;
    for (const Json& v : *it) alts.push_back(literal_rule("enum-value", v.dump()));
    return alternatives("enum", alts);
  }
  if (auto it = s.find("const"); it != s.end()) return literal_rule("const", it->dump());
  for (const char* k : {"anyOf", "oneOf"}) {
    auto it = s.find(k);
    if (it == s.end()) continue;
    if (!it->is_array() || it->empty()) return fail(path + "." + k, "must be a non-empty array");
    std::vector<uint32_t> alts;
    for (size_t i = 0; i < it->size(); ++i)
      alts.push_back(value((*it)[i], fmt::format("{}.{}[{}]", path, k, i), depth + 1));
    return alternatives(k, alts);
  }
  if (auto it = s.find("allOf"); it != s.end()) {
    if (!it->is_array() || it->size() != 1)
      return fail(path + ".allOf", "only an allOf of exactly one schema is supported");
    return value((*it)[0], path + ".allOf[0]", depth + 1);
  }
  std::vector<std::string> types;
  if (auto it = s.find("type"); it != s.end()) {
    if (it->is_string()) {
      types.push_back(it->get<std::string>());
    } else if (it->is_array() && !it->empty()) {
      for (const Json& t : *it) {
        if (!t.is_string()) return fail(path + ".type", "must be a string or an array of strings");
        types.push_back(t.get<std::string>());
      }
    } else {
      return fail(path + ".type", "must be a string or an array of strings");
    }
  } else if (s.contains("properties") || s.contains("additionalProperties") ||
             s.contains("required")) {
    types.push_back("object");
  } else if (s.contains("items")) {
    types.push_back("array");
  } else {
    return any_value();  // no type: any JSON value (null included)
  }
  if (auto it = s.find("nullable"); it != s.end() && it->is_boolean() && it->get<bool>())
    types.push_back("null");
  std::vector<uint32_t> alts;
  for (const std::string& t : types) alts.push_back(typed(t, s, path, depth));
  return alternatives("types", alts);
}

uint32_t SchemaCompiler::typed(const std::string& type, const Json& s, const std::string& path,
                               int depth) {
  if (type == "object") return object(s, path, depth);
  if (type == "array") return array(s, path, depth);
  if (type == "null") return null_rule();
  if (type == "boolean") return boolean();
  if (type == "integer" || type == "number") {
    bool negative = true;  // minimum >= 0 (or exclusiveMinimum >= 0): no minus sign
    for (const char* k : {"minimum", "exclusiveMinimum"})
      if (auto it = s.find(k); it != s.end() && it->is_number() && it->get<double>() >= 0)
        negative = false;
    return type == "integer" ? integer(negative) : number(negative);
  }
  if (type == "string") {
    const auto min = count(s, "minLength", path);
    const auto max = count(s, "maxLength", path);
    if (!min && !max) return any_string();
    if (min && max && *max < *min) return fail(path + ".maxLength", "is less than minLength");
    return string_of("string" + std::to_string(n_names_++), min.value_or(0), max.value_or(-1));
  }
  return fail(path + ".type", "'" + type +
                                  "' is not a JSON Schema type (object, array, string, integer, "
                                  "number, boolean, null)");
}

// "{" ws head(0) ws "}": head(i) is the members from property i on with none written yet, tail(i)
// the same after one was (each then starts with a comma). Required properties appear in order;
// an optional one may be skipped; extra members (additionalProperties) come last.
uint32_t SchemaCompiler::object(const Json& s, const std::string& path, int depth) {
  std::vector<std::pair<std::string, const Json*>> props;
  static const Json kAny = true;
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) return fail(path + ".properties", "must be an object");
    for (auto p = it->begin(); p != it->end(); ++p) props.emplace_back(p.key(), &p.value());
  }
  std::set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return fail(path + ".required", "must be an array of strings");
    for (const Json& r : *it) {
      if (!r.is_string()) return fail(path + ".required", "must be an array of strings");
      required.insert(r.get<std::string>());
    }
  }
  for (const std::string& r : required) {  // required but undeclared: any value
    bool declared = false;
    for (const auto& p : props) declared = declared || p.first == r;
    if (!declared) props.emplace_back(r, &kAny);
  }
  const Json* extra = props.empty() ? &kAny : nullptr;
  if (auto it = s.find("additionalProperties"); it != s.end()) {
    if (it->is_boolean())
      extra = it->get<bool>() ? &kAny : nullptr;
    else if (it->is_object())
      extra = &*it;
    else
      return fail(path + ".additionalProperties", "must be a boolean or a schema");
  }
  if (props.empty() && extra == &kAny) return any_object();

  const auto R = GrammarBuilder::ref;
  std::vector<uint32_t> kv;
  for (const auto& [name, schema] : props) {
    const uint32_t v = value(*schema, path + ".properties." + name, depth + 1);
    Alt a = b_.literal(Json(name).dump());
    a.insert(a.end(), {R(ws()), b_.byte(':'), R(ws()), R(v)});
    kv.push_back(b_.rule("kv-" + name, {std::move(a)}));
  }
  std::optional<uint32_t> extras;  // ("," member)*
  uint32_t extra_kv = 0;
  if (extra) {
    const uint32_t v = value(*extra, path + ".additionalProperties", depth + 1);
    extra_kv = b_.rule("extra-kv", {Alt{R(any_string()), R(ws()), b_.byte(':'), R(ws()), R(v)}});
    extras = b_.star("extras", R(b_.rule("sep-extra", {Alt{R(sep()), R(extra_kv)}})));
  }
  const size_t n = props.size();
  std::vector<uint32_t> tail(n + 1), head(n + 1);
  tail[n] = extras ? *extras : b_.rule("end", {Alt{}});
  head[n] = extras ? b_.rule("extras-first", {Alt{}, Alt{R(extra_kv), R(*extras)}}) : tail[n];
  for (size_t i = n; i-- > 0;) {
    const bool req = required.count(props[i].first) > 0;
    std::vector<Alt> t{Alt{R(sep()), R(kv[i]), R(tail[i + 1])}};
    if (!req) t.push_back(Alt{R(tail[i + 1])});
    tail[i] = b_.rule("tail", std::move(t));
    std::vector<Alt> h{Alt{R(kv[i]), R(tail[i + 1])}};
    if (!req) h.push_back(Alt{R(head[i + 1])});
    head[i] = b_.rule("head", std::move(h));
  }
  return b_.rule("obj", {Alt{b_.byte('{'), R(ws()), R(head[0]), R(ws()), b_.byte('}')}});
}

uint32_t SchemaCompiler::array(const Json& s, const std::string& path, int depth) {
  const auto R = GrammarBuilder::ref;
  const auto it = s.find("items");
  if (it != s.end() && !it->is_object() && !it->is_boolean())
    return fail(path + ".items", "must be a schema");
  const int min = count(s, "minItems", path).value_or(0);
  const int max = count(s, "maxItems", path).value_or(-1);
  if (max >= 0 && max < min) return fail(path + ".maxItems", "is less than minItems");
  if (it == s.end() && min == 0 && max < 0) return any_array();
  const uint32_t item = it == s.end() ? any_value() : value(*it, path + ".items", depth + 1);
  if (max == 0) return b_.rule("arr", {Alt{b_.byte('['), R(ws()), b_.byte(']')}});
  const uint32_t more = b_.repeat("items", R(b_.rule("sep-item", {Alt{R(sep()), R(item)}})),
                                  std::max(min - 1, 0), max < 0 ? -1 : max - 1);
  const uint32_t body = b_.rule("items-body", {Alt{R(item), R(more)}});
  const uint32_t inner = min == 0 ? b_.optional("items-opt", Alt{R(body)}) : body;
  return b_.rule("arr", {Alt{b_.byte('['), R(ws()), R(inner), R(ws()), b_.byte(']')}});
}

Result<Grammar> SchemaCompiler::finish(uint32_t value_rule, const Preamble& pre) && {
  if (!ok()) return error("{}", err_);
  const auto R = GrammarBuilder::ref;
  uint32_t root = value_rule;
  if (!pre.close.empty()) {
    const uint32_t until = b_.text_until("preamble", pre.close);
    ByteSet space = ByteSet::of(' ');
    for (char c : {'\t', '\n', '\r'}) space.add(static_cast<uint8_t>(c));
    const uint32_t gap = b_.repeat("preamble-gap", b_.bytes(space), 0, 8);  // "</think>\n\n"
    if (pre.open.empty()) {
      root = b_.rule("root", {Alt{R(until), R(gap), R(value_rule)}});
    } else {
      Alt opened = b_.literal(pre.open);
      opened.insert(opened.end(), {R(until), R(gap)});
      root = b_.rule("root",
                     {Alt{R(b_.optional("preamble-block", std::move(opened))), R(value_rule)}});
    }
  }
  return std::move(b_).build(root);
}

Result<Grammar> json_schema_grammar(const Json& schema, const Preamble& preamble,
                                    const std::string& path) {
  SchemaCompiler c(schema);
  const uint32_t v = c.value(schema, path, 0);
  return std::move(c).finish(v, preamble);
}

Grammar json_object_grammar(const Preamble& preamble) {
  static const Json kEmpty = Json::object();
  SchemaCompiler c(kEmpty);
  const uint32_t v = c.any_object();
  auto g = std::move(c).finish(v, preamble);
  return std::move(g).value();  // a fixed grammar: cannot fail
}

}  // namespace t9::grammar
