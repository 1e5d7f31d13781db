// The template syntax tree. One node struct per category (expression, statement) with a kind tag
// keeps the parser and interpreter compact; unused fields stay empty.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace t9::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  Literal,  // value
  Name,     // name
  List,     // items
  Tuple,    // items
  DictLit,  // items as key, value pairs
  GetAttr,  // items[0] . name
  GetItem,  // items[0] [ items[1] ]
  Slice,    // items[0] [ items[1] : items[2] : items[3] ] (null = omitted)
  Call,     // items[0] ( items[1..], kwargs )
  Filter,   // items[0] | name ( items[1..], kwargs )
  Test,     // items[0] is [not] name ( items[1..] )
  Not,      // not items[0]
  Neg,      // -items[0]
  Pos,      // +items[0]
  Binary,   // items[0] op items[1]: + - * / // % ** ~
  And,
  Or,
  Compare,  // items[0] ops[0] items[1] ops[1] items[2] ...
  Cond,     // items[0] if items[1] else items[2] (items[2] null = undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int col = 0;
  Value value;       // Literal
  std::string name;  // Name, GetAttr, Filter, Test, Binary operator
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare operators: == != < <= > >= in notin
  bool negated = false;          // Test: `is not`
  bool unknown = false;          // Filter/Test name the engine lacks: fails when evaluated
};

enum class StmtKind : uint8_t {
  Data,         // text
  Output,       // {{ expr }}
  If,           // branches: conds[i] -> bodies[i]; else_body
  For,          // targets in expr [if cond] body [else else_body]
  Set,          // targets (or attr target) = expr
  SetBlock,     // {% set x %}body{% endset %}, optional filter (expr with Filter chain on null)
  Macro,        // name(params) body
  CallBlock,    // {% call(params) expr %} body
  FilterBlock,  // {% filter f %} body
  With,         // {% with a = 1 %} body
  Break,
  Continue,
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int col = 0;
  std::string text;  // Data text; Macro name; Set attribute (ns.attr)
  ExprPtr expr;      // Output / For iterable / Set value / CallBlock call
  ExprPtr cond;      // For `if` filter
  ExprPtr filter;    // SetBlock / FilterBlock: filter chain applied to a Name "__body__"
  std::vector<std::string> targets;  // For / Set names (several = tuple unpacking)
  bool target_is_attr = false;       // Set: targets[0].text = value
  std::vector<ExprPtr> conds;        // If
  std::vector<Body> bodies;          // If branch bodies; others use bodies[0]
  Body else_body;
  std::vector<MacroParam> params;                        // Macro / CallBlock caller params
  std::vector<std::pair<std::string, ExprPtr>> assigns;  // With
};

}  // namespace t9::jinja
