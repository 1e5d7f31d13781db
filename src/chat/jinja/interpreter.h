// Tree-walking interpreter over the parsed template. Semantics follow jinja2 as transformers
// configures it (ImmutableSandboxedEnvironment, default Undefined): printing an undefined value
// gives "", but using it in arithmetic, attribute access or calls is an error; mutating list and
// dict methods are refused like the sandbox refuses them.
//
// Not thread-safe: one Interpreter renders one template once. Errors unwind as JinjaError.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace t9::jinja {

// One level of variables: a loop iteration, a macro call, the template top level.
struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;

  Value* find_local(std::string_view name);
  void set(std::string_view name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

struct MacroDef {
  std::string name;
  const std::vector<MacroParam>* params;
  const Body* body;
  std::shared_ptr<Scope> closure;  // the scope the macro was defined in
};

class Interpreter {
 public:
  // `context`: a dict of the variables the template sees (messages, tools, ...).
  explicit Interpreter(const Value& context);

  // Renders the template; throws JinjaError.
  std::string render(const Body& body);

  Value eval(const Expr& e);
  // Calls a callable value (macro, builtin, bound method).
  Value call(const Value& fn, CallArgs& args);
  Value get_attr(const Value& obj, std::string_view name);
  Value get_item(const Value& obj, const Value& key);
  // Python iteration: list/tuple items, dict keys, string characters; undefined is empty.
  std::vector<Value> iterate(const Value& v);

  // builtins.cpp
  Value apply_filter(std::string_view name, const Value& input, CallArgs& args);
  bool apply_test(std::string_view name, const Value& v, CallArgs& args);
  // Methods of str, dict and list (`s.startswith(x)`); `handled` false when `name` is not one.
  Value call_method(const Value& obj, std::string_view name, CallArgs& args, bool& handled);
  // A global function (range, namespace, dict, raise_exception, strftime_now), or undefined.
  static Value global(std::string_view name);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body);
  Flow exec_stmt(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  void exec_macro(const Stmt& s);
  void exec_call_block(const Stmt& s);
  Value invoke_macro(const MacroDef& m, CallArgs& a);
  std::string render_to_string(const Body& body, ScopePtr scope);
  Value apply_filter_chain(const Expr& chain, std::string body);

  Value eval_inner(const Expr& e);
  // The stored value `e` denotes (literal, variable, dict field), without copying; null when it
  // is not a plain stored value. The pointer is only valid until the next evaluation.
  const Value* eval_ref(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  bool eval_compare(const std::string& op, const Value& a, const Value& b);
  Value eval_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  Value lookup(const std::string& name);
  void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& item);
  CallArgs eval_args(const Expr& call, size_t first_arg);
  Value loop_attr(const Value& loop, std::string_view name);

  Value context_;
  ScopePtr scope_;
  std::string* out_ = nullptr;
  int depth_ = 0;  // macro call depth, bounded so a recursive template cannot exhaust the stack
};

// Python-style `in`: substring, list membership, dict key.
bool value_contains(const Value& container, const Value& item);
// str() of values joined, for `~` and the string filter.
std::string to_display(const Value& v);

}  // namespace t9::jinja
