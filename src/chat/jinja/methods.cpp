// Methods of str/dict/list values (as Python defines them) and the template globals that
// transformers installs (range, dict, namespace, raise_exception, strftime_now).
#include <ctime>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/text.h"

namespace t9::jinja {
namespace {

// Python unsupported-but-real str methods fail loudly instead of rendering as undefined.
bool is_other_str_method(std::string_view n) {
  static const char* names[] = {
      "isnumeric",  "isdecimal", "istitle",   "isidentifier", "swapcase",   "casefold",   "center",
      "ljust",      "rjust",     "zfill",     "partition",    "rpartition", "expandtabs", "encode",
      "format_map", "maketrans", "translate", "isascii",      "isprintable"};
  for (const char* m : names)
    if (n == m) return true;
  return false;
}

const std::string& need_str(const Value& v, const char* fn) {
  if (!v.is_string())
    fail(std::string(fn) + "() argument must be str, not " + std::string(v.type_name()));
  return v.str();
}

// Byte offset of code point index `cp` in s (clamped, Python slice style for negatives).
size_t cp_to_byte(std::string_view s, int64_t cp) {
  int64_t n = int64_t(utf8_length(s));
  if (cp < 0) cp = std::max<int64_t>(0, cp + n);
  if (cp > n) cp = n;
  if (is_ascii(s)) return size_t(cp);
  size_t i = 0;
  for (int64_t k = 0; k < cp; ++k) utf8_next(s, i);
  return i;
}

int64_t byte_to_cp(std::string_view s, size_t b) {
  return int64_t(utf8_length(s.substr(0, b)));
}

Value str_find(const std::string& s, const std::vector<Value>& a, bool reverse, bool must) {
  const std::string& sub = need_str(a[0], "find");
  size_t lo = a[1].is_int() ? cp_to_byte(s, a[1].as_int()) : 0;
  size_t hi = a[2].is_int() ? cp_to_byte(s, a[2].as_int()) : s.size();
  size_t r = std::string::npos;
  if (lo <= hi && hi - lo >= sub.size()) {
    std::string_view win(s.data() + lo, hi - lo);
    size_t f = reverse ? win.rfind(sub) : win.find(sub);
    if (f != std::string_view::npos) r = lo + f;
  }
  if (r == std::string::npos) {
    if (must) fail("substring not found");
    return Value(int64_t{-1});
  }
  return Value(byte_to_cp(s, r));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& v) {
    const std::string& x = need_str(v, prefix ? "startswith" : "endswith");
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& v : affix.list().items)
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

// str.format with {} / {0} / {name} fields, !r / !s conversions and no format specs.
std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conv = 0;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 0;
      field = field.substr(0, bang);
    }
    if (field.find(':') != std::string::npos) fail("format specs in str.format are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= a.args.size())
        fail("Replacement index " + std::to_string(auto_index) + " out of range");
      v = &a.args[auto_index++];
    } else if (std::isdigit(uint8_t(field[0]))) {
      size_t k = size_t(std::stoul(field));
      if (k >= a.args.size()) fail("Replacement index " + field + " out of range");
      v = &a.args[k];
    } else {
      for (const auto& [name, val] : a.kwargs)
        if (name == field) v = &val;
      if (!v) fail("KeyError: '" + field + "'");
    }
    if (conv == 'r')
      v->append_repr(out);
    else
      v->append_str(out);
  }
  return out;
}

template <typename Pred>
Value str_is(const std::string& s, Pred p) {
  if (s.empty()) return Value(false);
  for (size_t i = 0; i < s.size();)
    if (!p(utf8_next(s, i))) return Value(false);
  return Value(true);
}

Value string_method(Interpreter& in, const std::string& s, std::string_view n, CallArgs& args,
                    bool& handled) {
  handled = true;
  auto opt_str = [](const Value& v) -> const std::string* {
    return v.is_string() ? &v.str() : nullptr;
  };
  if (n == "startswith" || n == "endswith") {
    auto a = args.bind(n, {"prefix", "start", "end"});
    size_t lo = a[1].is_int() ? cp_to_byte(s, a[1].as_int()) : 0;
    size_t hi = a[2].is_int() ? cp_to_byte(s, a[2].as_int()) : s.size();
    std::string win = lo <= hi ? s.substr(lo, hi - lo) : std::string();
    return Value(affix_match(win, a[0], n == "startswith"));
  }
  if (n == "split" || n == "rsplit") {
    auto a = args.bind(n, {"sep", "maxsplit"});
    int64_t maxsplit = a[1].is_int() ? a[1].as_int() : -1;
    std::vector<Value> out;
    for (auto& part : py_split(s, opt_str(a[0]), maxsplit, n == "rsplit"))
      out.emplace_back(std::move(part));
    return Value::new_list(std::move(out));
  }
  if (n == "strip" || n == "lstrip" || n == "rstrip") {
    auto a = args.bind(n, {"chars"});
    return Value(std::string(py_strip(s, opt_str(a[0]), n != "rstrip", n != "lstrip")));
  }
  if (n == "lower") return Value(py_lower(s));
  if (n == "upper") return Value(py_upper(s));
  if (n == "title") return Value(py_title(s));
  if (n == "capitalize") return Value(py_capitalize(s));
  if (n == "replace") {
    auto a = args.bind(n, {"old", "new", "count"});
    return Value(py_replace(s, need_str(a[0], "replace"), need_str(a[1], "replace"),
                            a[2].is_int() ? a[2].as_int() : -1));
  }
  if (n == "find" || n == "rfind" || n == "index" || n == "rindex") {
    auto a = args.bind(n, {"sub", "start", "end"});
    return str_find(s, a, n[0] == 'r', n.find("index") != std::string_view::npos);
  }
  if (n == "count") {
    auto a = args.bind(n, {"sub"});
    const std::string& sub = need_str(a[0], "count");
    if (sub.empty()) return Value(int64_t(utf8_length(s)) + 1);
    int64_t c = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++c;
    return Value(c);
  }
  if (n == "format") return Value(str_format(s, args));
  if (n == "join") {
    auto a = args.bind(n, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : in.iterate(a[0])) {
      if (!first) out += s;
      first = false;
      out += need_str(v, "join");
    }
    return Value(std::move(out));
  }
  if (n == "splitlines") {
    std::vector<Value> out;
    for (auto& l : py_splitlines(s)) out.emplace_back(std::move(l));
    return Value::new_list(std::move(out));
  }
  if (n == "removeprefix" || n == "removesuffix") {
    auto a = args.bind(n, {"affix"});
    const std::string& x = need_str(a[0], "removeprefix");
    if (n == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value(s.substr(x.size()));
    if (n == "removesuffix" && !x.empty() && x.size() <= s.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  if (n == "isdigit") return str_is(s, [](char32_t c) { return c >= '0' && c <= '9'; });
  if (n == "isspace") return str_is(s, is_space);
  if (n == "isalpha")
    return str_is(s, [](char32_t c) { return is_alnum(c) && !(c >= '0' && c <= '9'); });
  if (n == "isalnum") return str_is(s, is_alnum);
  if (n == "islower" || n == "isupper") {
    bool any_cased = false;
    for (size_t i = 0; i < s.size();) {
      char32_t c = utf8_next(s, i);
      if (!is_cased(c)) continue;
      any_cased = true;
      if ((n == "islower") ? to_lower(c) != c : to_upper(c) != c) return Value(false);
    }
    return Value(any_cased);
  }
  if (is_other_str_method(n)) fail("str method '" + std::string(n) + "' is not supported");
  handled = false;
  return Value();
}

Value dict_items(const Dict& d) {
  std::vector<Value> out;
  out.reserve(d.items.size());
  for (const auto& [k, v] : d.items) out.push_back(Value::new_list({k, v}, true));
  return Value::new_list(std::move(out));
}

}  // namespace

Value Interpreter::call_method(const Value& obj, std::string_view n, CallArgs& args,
                               bool& handled) {
  handled = true;
  if (obj.is_string()) return string_method(*this, obj.str(), n, args, handled);
  if (obj.is_mapping()) {
    const Dict& d = obj.dict();
    if (n == "items") return dict_items(d);
    if (n == "keys" || n == "values") {
      std::vector<Value> out;
      for (const auto& [k, v] : d.items) out.push_back(n == "keys" ? k : v);
      return Value::new_list(std::move(out));
    }
    if (n == "get") {
      auto a = args.bind("get", {"key", "default"});
      if (const Value* v = d.find(a[0])) return *v;
      return a[1].is_undefined() ? Value() : a[1];
    }
    if (n == "copy") {
      Value c = Value::new_dict();
      c.dict().items = d.items;
      return c;
    }
  }
  if (obj.is_list()) {
    const auto& items = obj.list().items;
    if (n == "count") {
      auto a = args.bind("count", {"value"});
      int64_t c = 0;
      for (const Value& v : items) c += values_equal(v, a[0]);
      return Value(c);
    }
    if (n == "index") {
      auto a = args.bind("index", {"value"});
      for (size_t i = 0; i < items.size(); ++i)
        if (values_equal(items[i], a[0])) return Value(int64_t(i));
      fail("value is not in list");
    }
    if (n == "copy") return Value::new_list(items, obj.is_tuple());
  }
  handled = false;
  return Value();
}

namespace {

Value make_builtin(const char* name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = std::move(fn);
  return Value(CallablePtr(std::move(c)));
}

Value fn_range(Interpreter&, CallArgs& a) {
  if (!a.kwargs.empty()) fail("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) fail("range expected 1 to 3 arguments");
  for (const Value& v : a.args)
    if (!v.is_int() && !v.is_bool())
      fail("'" + std::string(v.type_name()) + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.args.size() == 1)
    stop = a.args[0].to_int();
  else {
    start = a.args[0].to_int();
    stop = a.args[1].to_int();
    if (a.args.size() == 3) step = a.args[2].to_int();
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000)  // the sandbox's MAX_RANGE
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.emplace_back(i);
  }
  return Value::new_list(std::move(out));
}

// dict(**kw), dict(mapping, **kw), dict(pairs, **kw); namespace() takes the same arguments.
Value fn_dict_like(Interpreter& in, CallArgs& a, bool is_namespace) {
  Value d = is_namespace ? Value::new_namespace() : Value::new_dict();
  if (a.args.size() > 1) fail("dict expected at most 1 argument");
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) d.dict().set(k, v);
    } else {
      for (const Value& pair : in.iterate(src)) {
        if (!pair.is_list() || pair.list().items.size() != 2)
          fail("dictionary update sequence element has wrong length; 2 is required");
        d.dict().set(pair.list().items[0], pair.list().items[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) d.dict().set(Value(k), v);
  if (is_namespace)
    for (const auto& [k, v] : d.dict().items)
      if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
        fail("Chat templates cannot store underscore-prefixed attributes on a namespace");
  return d;
}

Value fn_strftime_now(Interpreter&, CallArgs& a) {
  auto b = a.bind("strftime_now", {"format"});
  const std::string& fmt = need_str(b[0], "strftime_now");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::string out(256 + fmt.size() * 8, '\0');
  size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  return Value(std::move(out));
}

}  // namespace

Value Interpreter::global(std::string_view name) {
  static const Value range = make_builtin("range", fn_range);
  static const Value dict =
      make_builtin("dict", [](Interpreter& in, CallArgs& a) { return fn_dict_like(in, a, false); });
  static const Value ns = make_builtin(
      "namespace", [](Interpreter& in, CallArgs& a) { return fn_dict_like(in, a, true); });
  static const Value raise =
      make_builtin("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
        auto b = a.bind("raise_exception", {"message"});
        fail("template raised an exception: " + b[0].to_str());
      });
  static const Value strftime = make_builtin("strftime_now", fn_strftime_now);
  if (name == "range") return range;
  if (name == "dict") return dict;
  if (name == "namespace") return ns;
  if (name == "raise_exception") return raise;
  if (name == "strftime_now") return strftime;
  if (name == "lipsum" || name == "cycler" || name == "joiner")
    fail("global '" + std::string(name) + "' is not supported");
  return Value::undefined("'" + std::string(name) + "' is undefined");
}

}  // namespace t9::jinja
