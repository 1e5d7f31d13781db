// jinja2's builtin filters and tests, plus transformers' tojson override
// (json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/parser.h"
#include "chat/jinja/text.h"

namespace t9::jinja {
namespace {

const char* kFilters[] = {"abs",    "attr",       "batch",    "capitalize", "center",   "count",
                          "d",      "default",    "dictsort", "e",          "escape",   "first",
                          "float",  "indent",     "int",      "items",      "join",     "last",
                          "length", "list",       "lower",    "map",        "max",      "min",
                          "reject", "rejectattr", "replace",  "reverse",    "round",    "safe",
                          "select", "selectattr", "sort",     "string",     "sum",      "title",
                          "tojson", "trim",       "unique",   "upper",      "wordcount"};
const char* kTests[] = {
    "defined",  "undefined", "none",   "boolean", "false",    "true",        "integer",
    "float",    "number",    "string", "mapping", "iterable", "sequence",    "callable",
    "sameas",   "escaped",   "lower",  "upper",   "even",     "odd",         "divisibleby",
    "eq",       "equalto",   "==",     "ne",      "!=",       "lt",          "<",
    "lessthan", "le",        "<=",     "gt",      ">",        "greaterthan", "ge",
    ">=",       "in",        "filter", "test"};

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::String:
      return int64_t(utf8_length(v.str()));
    case Kind::List:
      if (v.is_iterator()) break;
      return int64_t(v.list().items.size());
    case Kind::Dict:
      if (!v.is_namespace()) return int64_t(v.dict().items.size());
      break;
    case Kind::Undefined:
      return 0;
    default:
      break;
  }
  fail("object of type '" + std::string(v.type_name()) + "' has no len()");
}

// The sort key jinja uses: lower-cased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

// environment.getitem over a dotted attribute path ("a.b", "items.0").
Value attr_path(Interpreter& in, const Value& item, const std::string& path) {
  Value cur = item;
  size_t b = 0;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = in.get_item(cur, numeric ? Value(int64_t(std::stoll(part))) : Value(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

bool as_flag(const Value& v) {
  return !v.is_undefined() && v.truthy();
}

Value filter_tojson(const Value& in, CallArgs& args) {
  auto a = args.bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions opt;
  opt.ensure_ascii = as_flag(a[0]);
  if (!a[1].is_undefined() && !a[1].is_none()) {
    opt.has_indent = true;
    if (a[1].is_string())
      opt.indent = a[1].str();
    else if (a[1].is_int())
      opt.indent = std::string(size_t(std::max<int64_t>(0, a[1].as_int())), ' ');
    else
      fail("tojson: indent must be an int or a string");
    opt.item_sep = ",";
  }
  if (a[2].is_list() && a[2].list().items.size() == 2 && a[2].list().items[0].is_string() &&
      a[2].list().items[1].is_string()) {
    opt.item_sep = a[2].list().items[0].str();
    opt.key_sep = a[2].list().items[1].str();
  } else if (!a[2].is_undefined() && !a[2].is_none()) {
    fail("tojson: separators must be a pair of strings");
  }
  opt.sort_keys = as_flag(a[3]);
  std::string out;
  append_json(out, in, opt);
  return Value(std::move(out));
}

Value filter_indent(const Value& in, CallArgs& args) {
  auto a = args.bind("indent", {"width", "first", "blank"});
  std::string ind =
      a[0].is_string()
          ? a[0].str()
          : std::string(size_t(a[0].is_undefined() ? 4 : std::max<int64_t>(0, a[0].to_int())), ' ');
  std::string s = in.to_str() + "\n";
  std::vector<std::string> lines = py_splitlines(s);
  std::string out;
  if (as_flag(a[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + ind;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += ind;
      out += lines[i];
    }
  }
  if (as_flag(a[1])) out = ind + out;
  return Value(std::move(out));
}

Value filter_round(const Value& in, CallArgs& args) {
  auto a = args.bind("round", {"precision", "method"});
  int64_t prec = a[0].is_undefined() ? 0 : a[0].to_int();
  std::string method = a[1].is_string() ? a[1].str() : "common";
  if (!in.is_number()) fail("round: value must be a number");
  if (method == "common") {
    if (!in.is_float()) return Value(in.to_int());  // Python round(int, n) stays an int
    double v = in.as_float();
    if (prec == 0) return Value(std::nearbyint(v));  // round-half-even, as Python
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", int(std::clamp<int64_t>(prec, 0, 300)), v);
    return Value(std::strtod(buf, nullptr));  // correctly rounded like Python's round()
  }
  double scale = std::pow(10.0, double(prec));
  if (method == "floor") return Value(std::floor(in.to_double() * scale) / scale);
  if (method == "ceil") return Value(std::ceil(in.to_double() * scale) / scale);
  fail("method must be common, ceil or floor");
}

Value parse_int(const Value& in, const Value& dflt, int base) {
  Value fallback = dflt.is_undefined() ? Value(int64_t{0}) : dflt;
  if (in.is_int() || in.is_bool()) return Value(in.to_int());
  if (in.is_float()) return std::isfinite(in.as_float()) ? Value(int64_t(in.as_float())) : fallback;
  if (!in.is_string()) return fallback;
  std::string s(py_strip(in.str(), nullptr, true, true));
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, base);
  if (!s.empty() && *end == '\0' && errno == 0) return Value(int64_t(v));
  double d = std::strtod(s.c_str(), &end);  // jinja retries int(float(value))
  if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value(int64_t(d));
  return fallback;
}

Value parse_float(const Value& in, const Value& dflt) {
  Value fallback = dflt.is_undefined() ? Value(0.0) : dflt;
  if (in.is_number()) return Value(in.to_double());
  if (!in.is_string()) return fallback;
  std::string s(py_strip(in.str(), nullptr, true, true));
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return fallback;
  return Value(d);
}

std::vector<Value> sorted_items(Interpreter& in, const Value& seq, bool reverse, bool cs,
                                const Value& attribute) {
  std::vector<Value> items = in.iterate(seq);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    Value k = attribute.is_string() ? attr_path(in, items[i], attribute.str()) : items[i];
    keyed.emplace_back(sort_key(k, cs), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? values_less(y.first, x.first) : values_less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& [k, i] : keyed) out.push_back(items[i]);
  return out;
}

// select/reject/selectattr/rejectattr: args after the (attribute and) test name go to the test.
Value filter_select(Interpreter& in, const Value& seq, CallArgs& args, bool with_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (with_attr) {
    if (args.args.empty() || !args.args[0].is_string()) fail("selectattr: missing attribute name");
    attr = args.args[0].str();
    next = 1;
  }
  std::string test;
  if (next < args.args.size()) test = args.args[next++].to_str();
  CallArgs test_args;
  test_args.args.assign(args.args.begin() + long(std::min(next, args.args.size())),
                        args.args.end());
  test_args.kwargs = args.kwargs;
  std::vector<Value> out;
  if (!seq.truthy()) return Value::new_iterator({});  // jinja's select_or_reject checks `if value`
  for (const Value& item : in.iterate(seq)) {
    Value v = with_attr ? attr_path(in, item, attr) : item;
    bool pass = test.empty() ? v.truthy() : in.apply_test(test, v, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::new_iterator(std::move(out));
}

Value filter_map(Interpreter& in, const Value& seq, CallArgs& args) {
  std::vector<Value> out;
  for (const auto& [k, v] : args.kwargs) {
    if (k != "attribute" && k != "default") fail("map: unexpected keyword argument '" + k + "'");
  }
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, v] : args.kwargs) (k == "attribute" ? attribute : dflt) = &v;
  if (!seq.truthy()) return Value::new_iterator({});  // do_map checks `if value` first
  if (attribute) {
    for (const Value& item : in.iterate(seq)) {
      Value v = attr_path(in, item, attribute->to_str());
      out.push_back(v.is_undefined() && dflt ? *dflt : v);
    }
    return Value::new_iterator(std::move(out));
  }
  if (args.args.empty()) fail("map requires a filter name or attribute=");
  std::string name = args.args[0].to_str();
  if (!has_filter(name)) fail("no filter named '" + name + "'");
  CallArgs rest;
  rest.args.assign(args.args.begin() + 1, args.args.end());
  for (const Value& item : in.iterate(seq)) {
    CallArgs a = rest;
    out.push_back(in.apply_filter(name, item, a));
  }
  return Value::new_iterator(std::move(out));
}

Value filter_dictsort(const Value& in, CallArgs& args) {
  auto a = args.bind("dictsort", {"case_sensitive", "by", "reverse"});
  if (!in.is_mapping()) fail("You can only sort by either \"key\" or \"value\" of a dict");
  bool by_value = a[1].is_string() && a[1].str() == "value";
  bool cs = as_flag(a[0]), rev = as_flag(a[2]);
  std::vector<Value> items;
  for (const auto& [k, v] : in.dict().items) items.push_back(Value::new_list({k, v}, true));
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(x.list().items[by_value], cs), ky = sort_key(y.list().items[by_value], cs);
    return rev ? values_less(ky, kx) : values_less(kx, ky);
  });
  return Value::new_list(std::move(items));
}

Value filter_title(const Value& in) {
  // jinja's do_title: words start after runs of [-\s({[<]; each is capitalized.
  std::string s = in.to_str(), out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8_next(s, i);
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
    utf8_append(out, sep ? c : word_start ? to_upper(c) : to_lower(c));
    word_start = sep;
  }
  return Value(std::move(out));
}

Value min_max(Interpreter& in, const Value& seq, CallArgs& args, bool want_max) {
  auto a = args.bind(want_max ? "max" : "min", {"case_sensitive", "attribute"});
  std::vector<Value> items = in.iterate(seq);
  if (items.empty())
    return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  auto key = [&](size_t i) {
    Value k = a[1].is_string() ? attr_path(in, items[i], a[1].str()) : items[i];
    return sort_key(k, as_flag(a[0]));
  };
  for (size_t i = 1; i < items.size(); ++i)
    if (want_max ? values_less(key(best), key(i)) : values_less(key(i), key(best))) best = i;
  return items[best];
}

}  // namespace

bool has_filter(std::string_view name) {
  for (const char* f : kFilters)
    if (name == f) return true;
  return false;
}

bool has_test(std::string_view name) {
  for (const char* t : kTests)
    if (name == t) return true;
  return false;
}

Value Interpreter::apply_filter(std::string_view n, const Value& in, CallArgs& args) {
  if (n == "default" || n == "d") {
    auto a = args.bind(n, {"default_value", "boolean"});
    bool use_default = in.is_undefined() || (as_flag(a[1]) && !in.truthy());
    if (!use_default) return in;
    return a[0].is_undefined() ? Value(std::string()) : a[0];
  }
  if (n == "tojson") return filter_tojson(in, args);
  if (n == "length" || n == "count") return Value(length_of(in));
  if (n == "string") return in.is_string() ? in : Value(in.to_str());
  if (n == "safe") return Value::markup(in.to_str());
  if (n == "escape" || n == "e")
    return in.is_markup() ? in : Value::markup(html_escape(in.to_str()));
  if (n == "trim") {
    auto a = args.bind("trim", {"chars"});
    std::string s = in.to_str();
    return Value(std::string(py_strip(s, a[0].is_string() ? &a[0].str() : nullptr, true, true)));
  }
  if (n == "lower") return Value(py_lower(in.to_str()));
  if (n == "upper") return Value(py_upper(in.to_str()));
  if (n == "capitalize") return Value(py_capitalize(in.to_str()));
  if (n == "title") return filter_title(in);
  if (n == "replace") {
    auto a = args.bind("replace", {"old", "new", "count"});
    return Value(
        py_replace(in.to_str(), a[0].to_str(), a[1].to_str(), a[2].is_int() ? a[2].as_int() : -1));
  }
  if (n == "items") {
    if (in.is_undefined()) return Value::new_iterator({});
    if (!in.is_mapping()) fail("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [k, v] : in.dict().items) out.push_back(Value::new_list({k, v}, true));
    return Value::new_iterator(std::move(out));
  }
  if (n == "list") return Value::new_list(iterate(in));
  if (n == "join") {
    auto a = args.bind("join", {"d", "attribute"});
    std::string sep = a[0].is_undefined() ? "" : a[0].to_str(), out;
    bool first = true;
    for (const Value& v : iterate(in)) {
      if (!first) out += sep;
      first = false;
      (a[1].is_string() ? attr_path(*this, v, a[1].str()) : v).append_str(out);
    }
    return Value(std::move(out));
  }
  if (n == "first" || n == "last") {
    if (n == "last" && in.is_iterator())
      fail("'" + std::string(in.type_name()) + "' object is not reversible");
    std::vector<Value> items = iterate(in);
    if (items.empty())
      return Value::undefined(std::string("No ") + std::string(n) + " item, sequence was empty.");
    return n == "first" ? items.front() : items.back();
  }
  if (n == "reverse") {
    if (in.is_string()) {
      auto cps = utf8_decode(in.str());
      std::reverse(cps.begin(), cps.end());
      return Value(utf8_encode(cps));
    }
    std::vector<Value> items = iterate(in);
    std::reverse(items.begin(), items.end());
    // reversed(list) is an iterator; a generator is first turned into a list, as do_reverse does.
    if (in.is_list() && !in.is_iterator())
      return Value::new_iterator(std::move(items), "list_reverseiterator");
    return Value::new_list(std::move(items));
  }
  if (n == "map") return filter_map(*this, in, args);
  if (n == "select" || n == "reject") return filter_select(*this, in, args, false, n == "select");
  if (n == "selectattr" || n == "rejectattr")
    return filter_select(*this, in, args, true, n == "selectattr");
  if (n == "int") {
    auto a = args.bind("int", {"default", "base"});
    return parse_int(in, a[0], a[1].is_int() ? int(a[1].as_int()) : 10);
  }
  if (n == "float") return parse_float(in, args.bind("float", {"default"})[0]);
  if (n == "abs") {
    if (in.is_float()) return Value(std::fabs(in.as_float()));
    if (in.is_number()) return Value(int64_t(std::llabs(in.to_int())));
    fail("bad operand type for abs(): '" + std::string(in.type_name()) + "'");
  }
  if (n == "round") return filter_round(in, args);
  if (n == "sort") {
    auto a = args.bind("sort", {"reverse", "case_sensitive", "attribute"});
    return Value::new_list(sorted_items(*this, in, as_flag(a[0]), as_flag(a[1]), a[2]));
  }
  if (n == "unique") {
    auto a = args.bind("unique", {"case_sensitive", "attribute"});
    std::vector<Value> out, seen;
    for (const Value& v : iterate(in)) {
      Value k = sort_key(a[1].is_string() ? attr_path(*this, v, a[1].str()) : v, as_flag(a[0]));
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, k); }))
        continue;
      seen.push_back(k);
      out.push_back(v);
    }
    return Value::new_iterator(std::move(out));
  }
  if (n == "dictsort") return filter_dictsort(in, args);
  if (n == "sum") {
    auto a = args.bind("sum", {"attribute", "start"});
    Value total = a[1].is_undefined() ? Value(int64_t{0}) : a[1];
    for (const Value& v : iterate(in)) {
      const Value item = a[0].is_string() ? attr_path(*this, v, a[0].str()) : v;
      if (!item.is_number() || !total.is_number()) fail("sum: items must be numbers");
      total = (total.is_float() || item.is_float()) ? Value(total.to_double() + item.to_double())
                                                    : Value(total.to_int() + item.to_int());
    }
    return total;
  }
  if (n == "max" || n == "min") return min_max(*this, in, args, n == "max");
  if (n == "indent") return filter_indent(in, args);
  if (n == "wordcount") {
    std::string s = in.to_str();
    int64_t count = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.size();) {
      char32_t c = utf8_next(s, i);
      bool w = is_alnum(c) || c == '_';
      if (w && !in_word) ++count;
      in_word = w;
    }
    return Value(count);
  }
  if (n == "center") {
    auto a = args.bind("center", {"width"});
    std::string s = in.to_str();
    int64_t width = a[0].is_undefined() ? 80 : a[0].to_int();
    int64_t len = int64_t(utf8_length(s));
    if (width <= len) return Value(s);
    int64_t total = width - len;
    int64_t left = total / 2 + (total & width & 1);  // CPython's str.center split
    return Value(std::string(size_t(left), ' ') + s + std::string(size_t(total - left), ' '));
  }
  if (n == "batch") {
    auto a = args.bind("batch", {"linecount", "fill_with"});
    int64_t size = a[0].to_int();
    if (size <= 0) fail("batch: linecount must be positive");
    std::vector<Value> out, cur;
    for (const Value& v : iterate(in)) {
      cur.push_back(v);
      if (int64_t(cur.size()) == size) out.push_back(Value::new_list(std::exchange(cur, {})));
    }
    if (!cur.empty()) {
      if (!a[1].is_undefined())
        while (int64_t(cur.size()) < size) cur.push_back(a[1]);
      out.push_back(Value::new_list(std::move(cur)));
    }
    return Value::new_iterator(std::move(out));
  }
  if (n == "attr") {
    auto a = args.bind("attr", {"name"});
    return get_attr(in, a[0].to_str());
  }
  fail("no filter named '" + std::string(n) + "'");
}

bool Interpreter::apply_test(std::string_view n, const Value& v, CallArgs& args) {
  auto arg = [&]() -> const Value& {
    if (args.args.empty()) fail("test '" + std::string(n) + "' needs an argument");
    return args.args[0];
  };
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.is_bool();
  if (n == "false") return v.is_bool() && !v.as_bool();
  if (n == "true") return v.is_bool() && v.as_bool();
  if (n == "integer") return v.is_int();
  if (n == "float") return v.is_float();
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_mapping();
  if (n == "iterable")
    return v.is_string() || v.is_list() || v.is_mapping() || v.is_undefined() ||
           v.kind() == Kind::Loop;
  if (n == "sequence")
    return v.is_string() || (v.is_list() && !v.is_iterator()) || v.is_mapping() || v.is_undefined();
  if (n == "callable") return v.kind() == Kind::Callable;
  if (n == "escaped") return v.is_markup();
  if (n == "sameas") {
    const Value& o = arg();
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    if (v.is_list()) return &v.list() == &o.list();
    if (v.is_dict()) return &v.dict() == &o.dict();
    return values_equal(v, o);
  }
  if (n == "lower" || n == "upper") {
    bool handled = false;
    CallArgs none;
    return call_method(Value(v.to_str()), n == "lower" ? "islower" : "isupper", none, handled)
        .truthy();
  }
  if (n == "even" || n == "odd") {
    if (!v.is_int() && !v.is_bool()) fail("test '" + std::string(n) + "' needs an integer");
    return (v.to_int() % 2 == 0) == (n == "even");
  }
  if (n == "divisibleby") {
    const Value& d = arg();
    if (d.to_int() == 0) fail("integer division or modulo by zero");
    return v.to_int() % d.to_int() == 0;
  }
  if (n == "eq" || n == "equalto" || n == "==") return values_equal(v, arg());
  if (n == "ne" || n == "!=") return !values_equal(v, arg());
  if (n == "lt" || n == "<" || n == "lessthan") return values_less(v, arg());
  if (n == "le" || n == "<=") return values_less(v, arg()) || values_equal(v, arg());
  if (n == "gt" || n == ">" || n == "greaterthan") return values_less(arg(), v);
  if (n == "ge" || n == ">=") return values_less(arg(), v) || values_equal(v, arg());
  if (n == "in") return value_contains(arg(), v);
  if (n == "filter") return has_filter(v.to_str());
  if (n == "test") return has_test(v.to_str());
  fail("no test named '" + std::string(n) + "'");
}

}  // namespace t9::jinja
