// Expression evaluation: operators, attribute/item access, slicing, calls, the loop object.
#include <cmath>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/text.h"

namespace t9::jinja {
namespace {

bool is_dict_attr(std::string_view n) {
  return n == "items" || n == "keys" || n == "values" || n == "get" || n == "copy";
}
bool is_dict_unsafe(std::string_view n) {
  return n == "pop" || n == "popitem" || n == "setdefault" || n == "update" || n == "clear";
}
bool is_list_unsafe(std::string_view n) {
  return n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" ||
         n == "reverse" || n == "sort" || n == "clear";
}

std::string no_attr(const Value& obj, std::string_view name) {
  std::string msg(1, '\'');
  msg += obj.is_none() ? std::string_view("None") : obj.type_name();
  msg += obj.is_none() ? "' has no attribute '" : " object' has no attribute '";
  msg += name;
  msg += '\'';
  return msg;
}

[[noreturn]] void unsafe(const Value& obj, std::string_view name) {
  fail("access to attribute '" + std::string(name) + "' of '" + std::string(obj.type_name()) +
       "' object is unsafe.");
}

Value bound_method(const Value& obj, std::string_view name) {
  auto c = std::make_shared<Callable>();
  c->name = std::string(obj.type_name()) + "." + std::string(name);
  std::string n(name);
  c->fn = [obj, n](Interpreter& in, CallArgs& args) {
    bool handled = false;
    Value r = in.call_method(obj, n, args, handled);
    if (!handled) fail(no_attr(obj, n));
    return r;
  };
  return Value(CallablePtr(std::move(c)));
}

[[noreturn]] void type_error(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail(a.str());
  if (b.is_undefined()) fail(b.str());
  fail(std::string("unsupported operand type(s) for ") + op + ": '" + std::string(a.type_name()) +
       "' and '" + std::string(b.type_name()) + "'");
}

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python's slice.indices() followed by the index walk.
std::vector<size_t> slice_indices(size_t n_items, const Value& start, const Value& stop,
                                  const Value& step) {
  auto as_index = [](const Value& v, const char* what) -> int64_t {
    if (!v.is_int() && !v.is_bool())
      fail(std::string("slice ") + what + " must be an integer or None");
    return v.to_int();
  };
  int64_t n = int64_t(n_items);
  int64_t st = (step.is_none() || step.is_undefined()) ? 1 : as_index(step, "step");
  if (st == 0) fail("slice step cannot be zero");
  int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto clamp = [&](const Value& v, int64_t dflt, const char* what) {
    if (v.is_none() || v.is_undefined()) return dflt;
    int64_t x = as_index(v, what);
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  int64_t b = clamp(start, st > 0 ? lower : upper, "start");
  int64_t e = clamp(stop, st > 0 ? upper : lower, "stop");
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(size_t(i));
  return out;
}

}  // namespace

Value Interpreter::lookup(const std::string& name) {
  for (Scope* s = scope_.get(); s; s = s->parent.get())
    if (Value* v = s->find_local(name)) return *v;
  if (const Value* v = context_.dict().find(std::string_view(name))) return *v;
  Value g = global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

const Value* Interpreter::eval_ref(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal:
      return &e.value;
    case ExprKind::Name:
      for (Scope* s = scope_.get(); s; s = s->parent.get())
        if (Value* v = s->find_local(e.name)) return v;
      return context_.dict().find(std::string_view(e.name));
    case ExprKind::GetAttr: {
      const Value* obj = eval_ref(*e.items[0]);
      if (!obj || !obj->is_dict()) return nullptr;
      if (!obj->is_namespace() && (is_dict_attr(e.name) || is_dict_unsafe(e.name))) return nullptr;
      return obj->dict().find(std::string_view(e.name));
    }
    default:
      return nullptr;
  }
}

Value Interpreter::eval(const Expr& e) {
  try {
    return eval_inner(e);
  } catch (JinjaError& err) {
    if (err.line == 0) {
      err.line = e.line;
      err.col = e.col;
    }
    throw;
  }
}

CallArgs Interpreter::eval_args(const Expr& call, size_t first_arg) {
  CallArgs a;
  a.args.reserve(call.items.size() - first_arg);
  for (size_t i = first_arg; i < call.items.size(); ++i) a.args.push_back(eval(*call.items[i]));
  for (const auto& [k, v] : call.kwargs) a.kwargs.emplace_back(k, eval(*v));
  return a;
}

Value Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal:
      return e.value;
    case ExprKind::Name:
      return lookup(e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& it : e.items) items.push_back(eval(*it));
      return Value::new_list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::DictLit: {
      Value d = Value::new_dict();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2)
        d.dict().set(eval(*e.items[i]), eval(*e.items[i + 1]));
      return d;
    }
    case ExprKind::GetAttr:
      if (const Value* v = eval_ref(e)) return *v;
      return get_attr(eval(*e.items[0]), e.name);
    case ExprKind::GetItem:
      return get_item(eval(*e.items[0]), eval(*e.items[1]));
    case ExprKind::Slice: {
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.items[size_t(i) + 1]) parts[i] = eval(*e.items[size_t(i) + 1]);
      return eval_slice(eval(*e.items[0]), parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call:
      return eval_call(e);
    case ExprKind::Filter: {
      Value input = eval(*e.items[0]);
      CallArgs args = eval_args(e, 1);
      return apply_filter(e.name, input, args);
    }
    case ExprKind::Test: {
      CallArgs args = eval_args(e, 1);
      if (const Value* v = eval_ref(*e.items[0]))
        return Value(apply_test(e.name, *v, args) != e.negated);
      Value v = eval(*e.items[0]);
      return Value(apply_test(e.name, v, args) != e.negated);
    }
    case ExprKind::Not:
      return Value(!eval(*e.items[0]).truthy());
    case ExprKind::Neg:
    case ExprKind::Pos: {
      Value v = eval(*e.items[0]);
      if (!v.is_number()) {
        if (v.is_undefined()) fail(v.str());
        fail("bad operand type for unary " + std::string(e.kind == ExprKind::Neg ? "-" : "+") +
             ": '" + std::string(v.type_name()) + "'");
      }
      if (e.kind == ExprKind::Pos) return v.is_bool() ? Value(v.to_int()) : v;
      return v.is_float() ? Value(-v.as_float()) : Value(-v.to_int());
    }
    case ExprKind::Binary:
      return eval_binary(e.name, eval(*e.items[0]), eval(*e.items[1]));
    case ExprKind::And: {
      Value a = eval(*e.items[0]);
      return a.truthy() ? eval(*e.items[1]) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.items[0]);
      return a.truthy() ? a : eval(*e.items[1]);
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0]);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        const Expr& re = *e.items[i + 1];
        if (i + 1 == e.ops.size()) {  // last operand: compare in place, nothing runs after it
          if (const Value* r = eval_ref(re)) return Value(eval_compare(e.ops[i], left, *r));
        }
        Value right = eval(re);
        if (!eval_compare(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::Cond: {
      if (eval(*e.items[1]).truthy()) return eval(*e.items[0]);
      if (e.items[2]) return eval(*e.items[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  fail("unknown expression");
}

Value Interpreter::eval_call(const Expr& e) {
  const Expr& callee = *e.items[0];
  if (callee.kind == ExprKind::GetAttr) {
    // Method calls on values (s.strip(), d.items()) without building a bound method.
    Value obj = eval(*callee.items[0]);
    if (obj.is_string() || obj.is_mapping() || obj.is_list()) {
      if (obj.is_list() && is_list_unsafe(callee.name)) unsafe(obj, callee.name);
      if (obj.is_mapping() && is_dict_unsafe(callee.name)) unsafe(obj, callee.name);
      if (!obj.is_mapping() || is_dict_attr(callee.name)) {
        CallArgs args = eval_args(e, 1);
        bool handled = false;
        Value r = call_method(obj, callee.name, args, handled);
        if (handled) return r;
      }
    }
    Value fn = get_attr(obj, callee.name);
    CallArgs args = eval_args(e, 1);
    return call(fn, args);
  }
  Value fn = eval(callee);
  CallArgs args = eval_args(e, 1);
  return call(fn, args);
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.kind() == Kind::Callable) return fn.callable().fn(*this, args);
  if (fn.is_undefined()) fail(fn.str());
  std::string msg(fn.type_name());
  fail("'" + msg + "' object is not callable");
}

Value Interpreter::get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      fail(obj.str());
    case Kind::Dict:
      if (obj.is_namespace()) {
        if (const Value* v = obj.dict().find(name)) return *v;
        return Value::undefined("'Namespace' object has no attribute '" + std::string(name) + "'");
      }
      if (is_dict_attr(name)) return bound_method(obj, name);
      if (is_dict_unsafe(name)) unsafe(obj, name);
      if (const Value* v = obj.dict().find(name)) return *v;
      break;
    case Kind::String: {
      static const char* methods[] = {
          "startswith", "endswith", "split",   "rsplit",       "strip",        "lstrip",  "rstrip",
          "lower",      "upper",    "title",   "capitalize",   "replace",      "find",    "rfind",
          "count",      "format",   "join",    "splitlines",   "isdigit",      "isalpha", "isalnum",
          "isspace",    "islower",  "isupper", "removeprefix", "removesuffix", "index",   "rindex"};
      for (const char* m : methods)
        if (name == m) return bound_method(obj, name);
      break;
    }
    case Kind::List:
      if (is_list_unsafe(name)) unsafe(obj, name);
      if (name == "index" || name == "count" || name == "copy") return bound_method(obj, name);
      break;
    case Kind::Loop:
      return loop_attr(obj, name);
    default:
      break;
  }
  return Value::undefined(no_attr(obj, name));
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::Undefined:
      fail(obj.str());
    case Kind::Dict:
      if (obj.is_namespace()) break;
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    case Kind::List:
    case Kind::String: {
      if (obj.is_iterator()) break;  // not subscriptable: jinja's getitem gives undefined
      if (!key.is_int() && !key.is_bool()) break;
      int64_t i = key.to_int();
      if (obj.is_list()) {
        const auto& items = obj.list().items;
        int64_t n = int64_t(items.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined(std::string(obj.type_name()) + " object has no element " +
                                  std::to_string(key.to_int()));
        return items[size_t(i)];
      }
      const std::string& s = obj.str();
      if (is_ascii(s)) {
        int64_t n = int64_t(s.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n)
          return Value::undefined("str object has no element " + std::to_string(key.to_int()));
        return Value(std::string(1, s[size_t(i)]));
      }
      auto cps = utf8_decode(s);
      int64_t n = int64_t(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::undefined("str object has no element " + std::to_string(key.to_int()));
      std::string out;
      utf8_append(out, cps[size_t(i)]);
      return Value(std::move(out));
    }
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.str());  // jinja falls back to getattr
  std::string k;
  key.append_repr(k);
  return Value::undefined(no_attr(obj, k));
}

Value Interpreter::eval_slice(const Value& obj, const Value& start, const Value& stop,
                              const Value& step) {
  if (obj.is_undefined()) fail(obj.str());
  if (obj.is_list() && !obj.is_iterator()) {
    const auto& items = obj.list().items;
    std::vector<Value> out;
    for (size_t i : slice_indices(items.size(), start, stop, step)) out.push_back(items[i]);
    return Value::new_list(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::string& s = obj.str();
    std::string out;
    if (is_ascii(s)) {
      for (size_t i : slice_indices(s.size(), start, stop, step)) out += s[i];
    } else {
      auto cps = utf8_decode(s);
      for (size_t i : slice_indices(cps.size(), start, stop, step)) utf8_append(out, cps[i]);
    }
    return Value(std::move(out));
  }
  // jinja's getitem turns the TypeError of an unsliceable object into undefined.
  std::string msg(1, '\'');
  msg += obj.type_name();
  msg += "' object is not subscriptable";
  return Value::undefined(std::move(msg));
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::List:
      return v.list().items;
    case Kind::Dict: {
      if (v.is_namespace()) break;
      std::vector<Value> keys;
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> out;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t b = i;
        utf8_next(s, i);
        out.emplace_back(s.substr(b, i - b));
      }
      return out;
    }
    case Kind::Undefined:
      return {};
    default:
      break;
  }
  fail("'" + std::string(v.type_name()) + "' object is not iterable");
}

Value Interpreter::loop_attr(const Value& loop_value, std::string_view name) {
  LoopState& l = loop_value.loop();
  if (!l.items) fail("the loop object is used outside of its loop");
  int64_t i = int64_t(l.index0), n = int64_t(l.items->size());
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(int64_t{l.depth});
  if (name == "depth0") return Value(int64_t{l.depth - 1});
  if (name == "previtem")
    return i > 0 ? (*l.items)[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < n ? (*l.items)[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle" || name == "changed") {
    auto c = std::make_shared<Callable>();
    c->name = "loop." + std::string(name);
    bool is_cycle = name == "cycle";
    LoopState* state = &l;
    Value keep = loop_value;  // keeps the state alive as long as the callable
    c->fn = [state, keep, is_cycle](Interpreter&, CallArgs& a) -> Value {
      if (is_cycle) {
        if (a.args.empty()) fail("no items for cycling given");
        return a.args[state->index0 % a.args.size()];
      }
      Value cur = Value::new_list(a.args, true);
      if (state->has_changed && values_equal(cur, state->last_changed)) return Value(false);
      state->has_changed = true;
      state->last_changed = cur;
      return Value(true);
    };
    return Value(CallablePtr(std::move(c)));
  }
  return Value::undefined("'LoopContext' object has no attribute '" + std::string(name) + "'");
}

bool Interpreter::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return value_contains(b, a);
  if (op == "notin") return !value_contains(b, a);
  if (op == "<") return values_less(a, b);
  if (op == ">") return values_less(b, a);
  if (op == "<=") return values_less(a, b) || values_equal(a, b);
  if (op == ">=") return values_less(b, a) || values_equal(a, b);
  fail("unknown comparison " + op);
}

Value Interpreter::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.to_str();
    b.append_str(s);
    return Value(std::move(s));
  }
  if (a.is_undefined()) fail(a.str());
  if (b.is_undefined()) fail(b.str());
  bool nums = a.is_number() && b.is_number();
  bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value(a.to_int() + b.to_int());
    if (nums) return Value(a.to_double() + b.to_double());
    if (a.is_string() && b.is_string()) {
      // Markup + str escapes the plain side, as markupsafe does.
      if (a.is_markup() != b.is_markup())
        return Value::markup(a.is_markup() ? a.str() + html_escape(b.str())
                                           : html_escape(a.str()) + b.str());
      return a.is_markup() ? Value::markup(a.str() + b.str()) : Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() &&
        !b.is_iterator()) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::new_list(std::move(items), a.is_tuple());
    }
    if (a.is_string() || b.is_string())
      fail("can only concatenate str (not \"" + std::string((a.is_string() ? b : a).type_name()) +
           "\") to str");
    type_error("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value(a.to_int() - b.to_int());
    if (nums) return Value(a.to_double() - b.to_double());
    type_error("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value(a.to_int() * b.to_int());
    if (nums) return Value(a.to_double() * b.to_double());
    const Value* seq = a.is_string() || a.is_list() ? &a : &b;
    const Value* n = seq == &a ? &b : &a;
    if ((seq->is_string() || (seq->is_list() && !seq->is_iterator())) &&
        (n->is_int() || n->is_bool())) {
      int64_t times = std::max<int64_t>(0, n->to_int());
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < times; ++i) out += seq->str();
        return Value(std::move(out));
      }
      std::vector<Value> out;
      for (int64_t i = 0; i < times; ++i)
        out.insert(out.end(), seq->list().items.begin(), seq->list().items.end());
      return Value::new_list(std::move(out), seq->is_tuple());
    }
    type_error("*", a, b);
  }
  if (!nums) {
    if (op == "%" && a.is_string()) fail("printf-style '%' string formatting is not supported");
    type_error(op.c_str(), a, b);
  }
  if (op == "/") {
    if (b.to_double() == 0.0) fail("division by zero");
    return Value(a.to_double() / b.to_double());
  }
  if (op == "//") {
    if (b.to_double() == 0.0) fail("integer division or modulo by zero");
    if (ints) return Value(py_floordiv(a.to_int(), b.to_int()));
    return Value(std::floor(a.to_double() / b.to_double()));
  }
  if (op == "%") {
    if (b.to_double() == 0.0) fail("integer division or modulo by zero");
    if (ints) return Value(py_mod(a.to_int(), b.to_int()));
    double r = std::fmod(a.to_double(), b.to_double());
    if (r != 0 && ((r < 0) != (b.to_double() < 0))) r += b.to_double();
    return Value(r);
  }
  if (op == "**") {
    if (ints && b.to_int() >= 0) {
      int64_t r = 1, base = a.to_int();
      for (int64_t i = 0; i < b.to_int(); ++i) r *= base;
      return Value(r);
    }
    return Value(std::pow(a.to_double(), b.to_double()));
  }
  fail("unknown operator " + op);
}

}  // namespace t9::jinja
