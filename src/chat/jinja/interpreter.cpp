#include "chat/jinja/interpreter.h"

#include <cmath>

#include "chat/jinja/text.h"

namespace t9::jinja {
namespace {

constexpr int kMaxCallDepth = 256;

}  // namespace

Value* Scope::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  if (Value* cur = find_local(name))
    *cur = std::move(v);
  else
    vars.emplace_back(std::string(name), std::move(v));
}

bool value_contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + std::string(item.type_name()));
      return c.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& v : c.list().items)
        if (values_equal(v, item)) return true;
      return false;
    case Kind::Dict:
      return c.dict().find(item) != nullptr;
    case Kind::Undefined:
      return false;
    default:
      fail("argument of type '" + std::string(c.type_name()) + "' is not iterable");
  }
}

std::string to_display(const Value& v) {
  return v.to_str();
}

Interpreter::Interpreter(const Value& context) : context_(context) {}

std::string Interpreter::render(const Body& body) {
  std::string out;
  out.reserve(4096);
  out_ = &out;
  scope_ = std::make_shared<Scope>();
  Flow f = exec(body);
  if (f != Flow::Normal) fail("'break'/'continue' outside of a loop");
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s) {
  try {
    switch (s.kind) {
      case StmtKind::Data:
        *out_ += s.text;
        break;
      case StmtKind::Output:
        if (const Value* v = eval_ref(*s.expr))
          v->append_str(*out_);
        else
          eval(*s.expr).append_str(*out_);
        break;
      case StmtKind::If:
        for (size_t i = 0; i < s.conds.size(); ++i)
          if (eval(*s.conds[i]).truthy()) return exec(s.bodies[i]);
        return exec(s.else_body);
      case StmtKind::For:
        return exec_for(s);
      case StmtKind::Set:
        exec_set(s);
        break;
      case StmtKind::SetBlock: {
        std::string body = render_to_string(s.bodies[0], scope_);
        Value v =
            s.filter ? apply_filter_chain(*s.filter, std::move(body)) : Value(std::move(body));
        scope_->set(s.targets[0], std::move(v));
        break;
      }
      case StmtKind::Macro:
        exec_macro(s);
        break;
      case StmtKind::CallBlock:
        exec_call_block(s);
        break;
      case StmtKind::FilterBlock: {
        std::string body = render_to_string(s.bodies[0], scope_);
        apply_filter_chain(*s.filter, std::move(body)).append_str(*out_);
        break;
      }
      case StmtKind::With: {
        auto sc = std::make_shared<Scope>();
        sc->parent = scope_;
        for (const auto& [name, e] : s.assigns) sc->set(name, eval(*e));
        ScopePtr saved = scope_;
        scope_ = sc;
        Flow f = exec(s.bodies[0]);
        scope_ = saved;
        return f;
      }
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
    }
  } catch (JinjaError& e) {
    if (e.line == 0) {
      e.line = s.line;
      e.col = s.col;
    }
    throw;
  }
  return Flow::Normal;
}

void Interpreter::bind_targets(Scope& scope, const std::vector<std::string>& targets,
                               const Value& item) {
  if (targets.size() == 1) {
    scope.set(targets[0], item);
    return;
  }
  std::vector<Value> parts;
  if (item.is_list())
    parts = item.list().items;
  else if (item.is_string() || item.is_dict())
    parts = iterate(item);
  else
    fail("cannot unpack non-iterable " + std::string(item.type_name()) + " object");
  if (parts.size() != targets.size())
    fail(parts.size() < targets.size()
             ? "not enough values to unpack (expected " + std::to_string(targets.size()) +
                   ", got " + std::to_string(parts.size()) + ")"
             : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  for (size_t i = 0; i < parts.size(); ++i) scope.set(targets[i], std::move(parts[i]));
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
  Value seq = eval(*s.expr);
  std::vector<Value> owned;
  const std::vector<Value>* items;
  if (seq.is_list()) {
    items = &seq.list().items;  // `seq` keeps the list alive; the sandbox forbids mutating it
  } else {
    owned = iterate(seq);
    items = &owned;
  }
  ScopePtr saved = scope_;
  if (s.cond) {  // `for x in xs if cond`: filtered before the loop, so loop.length counts kept
                 // items
    std::vector<Value> kept;
    for (const Value& item : *items) {
      auto sc = std::make_shared<Scope>();
      sc->parent = saved;
      bind_targets(*sc, s.targets, item);
      scope_ = sc;
      bool keep = eval(*s.cond).truthy();
      scope_ = saved;
      if (keep) kept.push_back(item);
    }
    owned = std::move(kept);
    items = &owned;
  }
  if (items->empty()) return exec(s.else_body) == Flow::Break ? Flow::Break : Flow::Normal;
  auto loop = std::make_shared<LoopState>();
  loop->items = items;
  Value loop_value(loop);
  for (size_t i = 0; i < items->size(); ++i) {
    loop->index0 = i;
    auto sc = std::make_shared<Scope>();
    sc->parent = saved;
    sc->vars.reserve(s.targets.size() + 1);
    sc->vars.emplace_back("loop", loop_value);
    bind_targets(*sc, s.targets, (*items)[i]);
    scope_ = sc;
    Flow f = exec(s.bodies[0]);
    scope_ = saved;
    if (f == Flow::Break) break;
  }
  loop->items = nullptr;  // a `loop` that escapes the loop must not see freed items
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s) {
  Value v = eval(*s.expr);
  if (s.target_is_attr) {
    Value ns = lookup(s.targets[0]);
    if (!ns.is_namespace())
      fail("can't assign attribute '" + s.text + "' on a non-namespace object");
    if (!s.text.empty() && s.text[0] == '_')
      fail("Chat templates cannot store underscore-prefixed attributes on a namespace");
    ns.dict().set(Value(s.text), std::move(v));
    return;
  }
  if (s.targets.size() == 1)
    scope_->set(s.targets[0], std::move(v));
  else
    bind_targets(*scope_, s.targets, v);
}

std::string Interpreter::render_to_string(const Body& body, ScopePtr scope) {
  std::string out;
  std::string* saved_out = out_;
  ScopePtr saved_scope = scope_;
  out_ = &out;
  scope_ = std::move(scope);
  Flow f = exec(body);
  out_ = saved_out;
  scope_ = saved_scope;
  if (f != Flow::Normal) fail("'break'/'continue' outside of a loop");
  return out;
}

Value Interpreter::apply_filter_chain(const Expr& chain, std::string body) {
  auto sc = std::make_shared<Scope>();
  sc->parent = scope_;
  sc->set("__body__", Value(std::move(body)));
  ScopePtr saved = scope_;
  scope_ = sc;
  Value v = eval(chain);
  scope_ = saved;
  return v;
}

void Interpreter::exec_macro(const Stmt& s) {
  MacroDef def{s.text, &s.params, &s.bodies[0], scope_};
  auto c = std::make_shared<Callable>();
  c->name = s.text;
  c->fn = [def](Interpreter& in, CallArgs& a) { return in.invoke_macro(def, a); };
  scope_->set(s.text, Value(CallablePtr(std::move(c))));
}

void Interpreter::exec_call_block(const Stmt& s) {
  const Expr& call_expr = *s.expr;
  MacroDef def{"caller", &s.params, &s.bodies[0], scope_};
  auto c = std::make_shared<Callable>();
  c->name = "caller";
  c->fn = [def](Interpreter& in, CallArgs& a) { return in.invoke_macro(def, a); };
  Value fn = eval(*call_expr.items[0]);
  CallArgs args = eval_args(call_expr, 1);
  args.kwargs.emplace_back("caller", Value(CallablePtr(std::move(c))));
  call(fn, args).append_str(*out_);
}

// Binds parameters by jinja2 rules (extra positionals -> varargs, unknown keywords -> kwargs,
// missing ones -> default or undefined) and renders the body in a scope under the closure.
Value Interpreter::invoke_macro(const MacroDef& m, CallArgs& a) {
  if (depth_ >= kMaxCallDepth) fail("macro calls nested too deeply (recursion?)");
  auto sc = std::make_shared<Scope>();
  sc->parent = m.closure;
  const auto& params = *m.params;
  std::vector<Value> varargs;
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (i < params.size())
      sc->set(params[i].name, a.args[i]);
    else
      varargs.push_back(a.args[i]);
  }
  Value kwargs = Value::new_dict();
  for (auto& [k, v] : a.kwargs) {
    bool is_param = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name != k) continue;
      if (i < a.args.size())
        fail("macro '" + m.name + "' got multiple values for argument '" + k + "'");
      is_param = true;
    }
    if (is_param || k == "caller")
      sc->set(k, v);
    else
      kwargs.dict().set(Value(k), v);
  }
  ScopePtr saved = scope_;
  scope_ = sc;
  ++depth_;
  for (const auto& p : params) {
    if (sc->find_local(p.name)) continue;
    sc->set(p.name, p.default_value
                        ? eval(*p.default_value)
                        : Value::undefined("parameter '" + p.name + "' was not provided"));
  }
  sc->set("varargs", Value::new_list(std::move(varargs), true));
  sc->set("kwargs", kwargs);
  scope_ = saved;
  std::string out = render_to_string(*m.body, sc);
  --depth_;
  return Value(std::move(out));
}

}  // namespace t9::jinja
