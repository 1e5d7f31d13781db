#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat/jinja/text.h"

namespace t9::jinja {

void fail(std::string message) {
  throw JinjaError{std::move(message)};
}

Value Value::undefined(std::string hint) {
  Value v;
  v.kind_ = Kind::Undefined;
  v.data_ = std::move(hint);
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::new_list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(std::move(l));
}

Value Value::new_iterator(std::vector<Value> items, const char* type) {
  Value v = new_list(std::move(items));
  v.list().iterator_type = type;
  return v;
}

Value Value::new_dict() {
  return Value(std::make_shared<Dict>());
}

Value Value::new_namespace() {
  auto d = std::make_shared<Dict>();
  d->is_namespace = true;
  return Value(std::move(d));
}

bool Value::is_namespace() const {
  return is_dict() && dict().is_namespace;
}
bool Value::is_tuple() const {
  return is_list() && list().is_tuple;
}
bool Value::is_iterator() const {
  return is_list() && list().iterator_type != nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_float() != 0.0;
    case Kind::String:
      return !str().empty();
    case Kind::List:
      return is_iterator() || !list().items.empty();
    case Kind::Dict:
      return is_namespace() || !dict().items.empty();
    default:
      return true;
  }
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      if (is_iterator()) return list().iterator_type;
      return is_tuple() ? "tuple" : "list";
    case Kind::Dict:
      return is_namespace() ? "Namespace" : "dict";
    case Kind::Callable:
      return "function";
    case Kind::Loop:
      return "LoopContext";
  }
  return "object";
}

std::string Value::to_str() const {
  if (is_string()) return str();
  std::string out;
  append_str(out);
  return out;
}

void Value::append_str(std::string& out) const {
  switch (kind_) {
    case Kind::Undefined:
      return;
    case Kind::String:
      out += str();
      return;
    case Kind::Callable:
      out += "<function " + callable().name + ">";
      return;
    case Kind::Loop:
      out += "<LoopContext " + std::to_string(loop().index0 + 1) + ">";
      return;
    default:
      append_repr(out);
  }
}

void append_float_repr(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);  // "-d.ddde+XX", shortest round-trip digits
  bool neg = sci[0] == '-';
  if (neg) sci.remove_prefix(1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits += c;
  int exp10 = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  if (neg) out += '-';
  if (exp10 < -4 || exp10 >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (exp10 < 0) {
    out += "0.";
    out.append(size_t(-exp10 - 1), '0');
    out += digits;
  } else {
    size_t int_len = size_t(exp10) + 1;
    if (digits.size() <= int_len) {
      out += digits;
      out.append(int_len - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, int_len);
      out += '.';
      out.append(digits, int_len, std::string::npos);
    }
  }
}

void append_string_repr(std::string& out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  out += q;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = utf8_next(s, i);
    char buf[16];
    if (c == char32_t(q) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) {
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      out += buf;
    } else if (!is_printable(c)) {
      std::snprintf(buf, sizeof buf, c > 0xffff ? "\\U%08x" : "\\u%04x", unsigned(c));
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += q;
}

void Value::append_repr(std::string& out) const {
  switch (kind_) {
    case Kind::Undefined:
      return;
    case Kind::None:
      out += "None";
      return;
    case Kind::Bool:
      out += as_bool() ? "True" : "False";
      return;
    case Kind::Int:
      out += std::to_string(as_int());
      return;
    case Kind::Float:
      append_float_repr(out, as_float());
      return;
    case Kind::String:
      append_string_repr(out, str());
      return;
    case Kind::List: {
      const List& l = list();
      if (l.iterator_type)  // Python prints "<generator object ... at 0x...>": no stable bytes
        fail(std::string("printing a ") + l.iterator_type + " object is not supported");
      out += l.is_tuple ? '(' : '[';
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        l.items[i].append_repr(out);
      }
      if (l.is_tuple && l.items.size() == 1) out += ',';
      out += l.is_tuple ? ')' : ']';
      return;
    }
    case Kind::Dict: {
      const Dict& d = dict();
      if (d.is_namespace) out += "<Namespace ";
      out += '{';
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        d.items[i].first.append_repr(out);
        out += ": ";
        d.items[i].second.append_repr(out);
      }
      out += '}';
      if (d.is_namespace) out += '>';
      return;
    }
    default:
      append_str(out);
  }
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items)
    if (values_equal(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (const Value* v = find(key)) {
    *const_cast<Value*>(v) = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

std::vector<Value> CallArgs::bind(std::string_view fn,
                                  std::initializer_list<std::string_view> names) const {
  std::vector<Value> out(names.size(), Value::undefined(""));
  if (args.size() > names.size())
    fail(std::string(fn) + "() takes at most " + std::to_string(names.size()) + " arguments");
  for (size_t i = 0; i < args.size(); ++i) out[i] = args[i];
  for (const auto& [k, v] : kwargs) {
    auto it = std::find(names.begin(), names.end(), k);
    if (it == names.end())
      fail(std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
    out[size_t(it - names.begin())] = v;
  }
  return out;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.to_int() == b.to_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      const List& x = a.list();
      const List& y = b.list();
      if (x.iterator_type || y.iterator_type) return &x == &y;
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!values_equal(x.items[i], y.items[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.is_namespace || y.is_namespace) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    case Kind::Callable:
      return &a.callable() == &b.callable();
    case Kind::Loop:
      return &a.loop() == &b.loop();
    default:
      return false;
  }
}

bool values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
    return a.to_int() < b.to_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() &&
      !b.is_iterator()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) fail(a.str());
  if (b.is_undefined()) fail(b.str());
  fail("'<' not supported between instances of '" + std::string(a.type_name()) + "' and '" +
       std::string(b.type_name()) + "'");
}

namespace {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = utf8_next(s, i);
    char buf[16];
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
      if (c > 0xffff) {  // UTF-16 surrogate pair, as json.dumps writes it
        char32_t u = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xd800 + (u >> 10)),
                      unsigned(0xdc00 + (u & 0x3ff)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      }
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += '"';
}

void append_json_float(std::string& out, double v) {
  if (std::isnan(v))
    out += "NaN";
  else if (std::isinf(v))
    out += v < 0 ? "-Infinity" : "Infinity";
  else
    append_float_repr(out, v);
}

// json.dumps turns str/int/float/bool/None keys into strings.
std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Kind::String:
      return k.str();
    case Kind::Bool:
      return k.as_bool() ? "true" : "false";
    case Kind::None:
      return "null";
    case Kind::Int:
      return std::to_string(k.as_int());
    case Kind::Float: {
      std::string s;
      append_json_float(s, k.as_float());
      return s;
    }
    default:
      fail("keys must be str, int, float, bool or None, not " + std::string(k.type_name()));
  }
}

void newline_indent(std::string& out, const JsonOptions& opt, int depth) {
  out += '\n';
  for (int i = 0; i < depth; ++i) out += opt.indent;
}

}  // namespace

void append_json(std::string& out, const Value& v, const JsonOptions& opt, int depth) {
  switch (v.kind()) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Kind::Float:
      append_json_float(out, v.as_float());
      return;
    case Kind::String:
      append_json_string(out, v.str(), opt.ensure_ascii);
      return;
    case Kind::List: {
      if (v.is_iterator()) break;
      const auto& items = v.list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += opt.item_sep;
        if (opt.has_indent) newline_indent(out, opt, depth + 1);
        append_json(out, items[i], opt, depth + 1);
      }
      if (opt.has_indent) newline_indent(out, opt, depth);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.is_namespace()) break;
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::string> keys;
      for (auto* kv : items) keys.push_back(json_key(kv->first));
      std::vector<size_t> order(items.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (opt.sort_keys)
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return keys[a] < keys[b]; });
      out += '{';
      for (size_t n = 0; n < order.size(); ++n) {
        if (n) out += opt.item_sep;
        if (opt.has_indent) newline_indent(out, opt, depth + 1);
        append_json_string(out, keys[order[n]], opt.ensure_ascii);
        out += opt.key_sep;
        append_json(out, items[order[n]]->second, opt, depth + 1);
      }
      if (opt.has_indent) newline_indent(out, opt, depth);
      out += '}';
      return;
    }
    default:
      break;
  }
  fail("Object of type " + std::string(v.type_name()) + " is not JSON serializable");
}

}  // namespace t9::jinja
