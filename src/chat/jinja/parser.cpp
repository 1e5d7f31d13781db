#include "chat/jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

namespace t9::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& toks) : t_(toks) {}

  Body parse_template() {
    Body body = parse_body({});
    if (cur().type != Tok::End) fail_here("unexpected '" + cur().text + "'");
    check_unknown();
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void fail_here(const std::string& msg) const {
    throw JinjaError{msg, cur().line, cur().col};
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::End:
        return "end of template";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::Data:
        return "template data";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail_here(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail_here("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail_here("expected '%}', got " + describe(cur()));
    ++i_;
  }
  ExprPtr node(ExprKind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  Body parse_body(std::initializer_list<const char*> end_tags);
  void parse_statement(Body& body);
  StmtPtr parse_for(const Token& at);
  StmtPtr parse_if(const Token& at);
  StmtPtr parse_set(const Token& at);
  StmtPtr parse_macro(const Token& at);
  StmtPtr parse_call_block(const Token& at);
  StmtPtr parse_filter_block(const Token& at);
  StmtPtr parse_with(const Token& at);
  std::vector<MacroParam> parse_params();
  std::vector<std::string> parse_targets();
  // The end tag we stopped at: consumes `{% name` and returns name.
  std::string take_end_tag();

  ExprPtr parse_tuple(bool with_condexpr = true);
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary(int level);
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_filter(ExprPtr e);
  ExprPtr parse_test(ExprPtr e);
  void parse_call_args(Expr& call);

  // jinja2 reports an unknown filter/test at compile time, except inside an `if` (test or
  // bodies) or an inline `a if c else b`, where it fails only when evaluated.
  void note_unknown(Expr& e);
  void soften(Expr& e);
  void check_unknown() const;

  const std::vector<Token>& t_;
  size_t i_ = 0;
  bool soft_ = false;
  struct Unknown {
    Expr* expr;
    bool soft;
  };
  std::vector<Unknown> unknown_;
};

void Parser::note_unknown(Expr& e) {
  e.unknown = true;
  unknown_.push_back({&e, soft_});
}

void Parser::soften(Expr& e) {
  if (e.unknown)
    for (auto& u : unknown_)
      if (u.expr == &e) u.soft = true;
  for (auto& c : e.items)
    if (c) soften(*c);
  for (auto& kv : e.kwargs) soften(*kv.second);
}

void Parser::check_unknown() const {
  for (const auto& u : unknown_)
    if (!u.soft)
      throw JinjaError{std::string("no ") + (u.expr->kind == ExprKind::Test ? "test" : "filter") +
                           " named '" + u.expr->name + "'",
                       u.expr->line, u.expr->col};
}

Body Parser::parse_body(std::initializer_list<const char*> end_tags) {
  Body body;
  while (true) {
    const Token& tok = cur();
    if (tok.type == Tok::End) {
      if (end_tags.size() == 0) return body;
      fail_here(std::string("unexpected end of template, expected '") + *end_tags.begin() + "'");
    }
    if (tok.type == Tok::Data) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Data;
      s->text = tok.text;
      s->line = tok.line;
      body.push_back(std::move(s));
      ++i_;
    } else if (tok.type == Tok::VarBegin) {
      ++i_;
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Output;
      s->line = tok.line;
      s->col = tok.col;
      s->expr = parse_tuple();
      if (cur().type != Tok::VarEnd) fail_here("expected '}}', got " + describe(cur()));
      ++i_;
      body.push_back(std::move(s));
    } else if (tok.type == Tok::BlockBegin) {
      const Token& name = peek();
      for (const char* e : end_tags)
        if (name.type == Tok::Name && name.text == e) return body;
      parse_statement(body);
    } else {
      fail_here("unexpected " + describe(tok));
    }
  }
}

std::string Parser::take_end_tag() {
  ++i_;  // {%
  return next().text;
}

void Parser::parse_statement(Body& body) {
  ++i_;  // {%
  const Token& at = cur();
  if (at.type != Tok::Name) fail_here("expected a tag name, got " + describe(at));
  std::string tag = next().text;
  StmtPtr s;
  bool saved_soft = soft_;
  // `if` makes its frame soft; loops, macros, call/filter/with blocks open a new frame.
  if (tag == "if")
    soft_ = true;
  else if (tag != "set" && tag != "break" && tag != "continue")
    soft_ = false;
  if (tag == "for")
    s = parse_for(at);
  else if (tag == "if")
    s = parse_if(at);
  else if (tag == "set")
    s = parse_set(at);
  else if (tag == "macro")
    s = parse_macro(at);
  else if (tag == "call")
    s = parse_call_block(at);
  else if (tag == "filter")
    s = parse_filter_block(at);
  else if (tag == "with")
    s = parse_with(at);
  else if (tag == "break" || tag == "continue") {
    s = std::make_unique<Stmt>();
    s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
    expect_block_end();
  } else if (tag == "generation") {
    // transformers' AssistantTracker tag: renders its body unchanged.
    expect_block_end();
    Body inner = parse_body({"endgeneration"});
    take_end_tag();
    expect_block_end();
    for (auto& st : inner) body.push_back(std::move(st));
    soft_ = saved_soft;
    return;
  } else {
    i_ -= 1;
    fail_here("unsupported or unknown tag '" + tag + "'");
  }
  soft_ = saved_soft;
  s->line = at.line;
  s->col = at.col;
  body.push_back(std::move(s));
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  bool paren = skip_op("(");
  do {
    names.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(const Token&) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::For;
  s->targets = parse_targets();
  if (!skip_name("in")) fail_here("expected 'in', got " + describe(cur()));
  s->expr = parse_tuple(false);
  if (skip_name("if")) s->cond = parse_expression();
  if (is_name("recursive")) fail_here("recursive for loops are not supported");
  expect_block_end();
  s->bodies.push_back(parse_body({"endfor", "else"}));
  if (take_end_tag() == "else") {
    expect_block_end();
    s->else_body = parse_body({"endfor"});
    take_end_tag();
  }
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_if(const Token&) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::If;
  s->conds.push_back(parse_tuple(false));
  expect_block_end();
  while (true) {
    s->bodies.push_back(parse_body({"elif", "else", "endif"}));
    std::string tag = take_end_tag();
    if (tag == "elif") {
      s->conds.push_back(parse_tuple(false));
      expect_block_end();
    } else if (tag == "else") {
      expect_block_end();
      s->else_body = parse_body({"endif"});
      take_end_tag();
      expect_block_end();
      return s;
    } else {
      expect_block_end();
      return s;
    }
  }
}

StmtPtr Parser::parse_set(const Token&) {
  auto s = std::make_unique<Stmt>();
  std::string first = expect_name();
  if (skip_op(".")) {
    s->target_is_attr = true;
    s->targets = {first};
    s->text = expect_name();
  } else {
    s->targets = {first};
    while (skip_op(",")) s->targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    s->kind = StmtKind::Set;
    s->expr = parse_tuple();
    expect_block_end();
    return s;
  }
  if (s->target_is_attr || s->targets.size() > 1) fail_here("expected '='");
  s->kind = StmtKind::SetBlock;
  if (is_op("|")) {
    auto placeholder = node(ExprKind::Name, cur());
    placeholder->name = "__body__";
    s->filter = std::move(placeholder);
    while (is_op("|")) s->filter = parse_filter(std::move(s->filter));
  }
  expect_block_end();
  s->bodies.push_back(parse_body({"endset"}));
  take_end_tag();
  expect_block_end();
  return s;
}

std::vector<MacroParam> Parser::parse_params() {
  std::vector<MacroParam> params;
  expect_op("(");
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    MacroParam p;
    p.name = expect_name();
    if (skip_op("=")) p.default_value = parse_expression();
    params.push_back(std::move(p));
  }
  expect_op(")");
  return params;
}

StmtPtr Parser::parse_macro(const Token&) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::Macro;
  s->text = expect_name();
  s->params = parse_params();
  expect_block_end();
  s->bodies.push_back(parse_body({"endmacro"}));
  take_end_tag();
  if (cur().type == Tok::Name) ++i_;  // {% endmacro name %}
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_call_block(const Token&) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::CallBlock;
  if (is_op("(")) s->params = parse_params();
  s->expr = parse_expression();
  if (s->expr->kind != ExprKind::Call) fail_here("expected a call in {% call %}");
  expect_block_end();
  s->bodies.push_back(parse_body({"endcall"}));
  take_end_tag();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_filter_block(const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::FilterBlock;
  auto placeholder = node(ExprKind::Name, at);
  placeholder->name = "__body__";
  s->filter = std::move(placeholder);
  do {
    if (!is_op("|")) {  // first filter has no leading pipe
      auto f = node(ExprKind::Filter, cur());
      f->name = expect_name();
      while (skip_op(".")) f->name += "." + expect_name();
      if (!has_filter(f->name)) note_unknown(*f);
      f->items.push_back(std::move(s->filter));
      if (is_op("(")) parse_call_args(*f);
      s->filter = std::move(f);
    } else {
      s->filter = parse_filter(std::move(s->filter));
    }
  } while (is_op("|"));
  expect_block_end();
  s->bodies.push_back(parse_body({"endfilter"}));
  take_end_tag();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_with(const Token&) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::With;
  while (cur().type != Tok::BlockEnd) {
    if (!s->assigns.empty()) expect_op(",");
    std::string name = expect_name();
    expect_op("=");
    s->assigns.emplace_back(name, parse_expression());
  }
  expect_block_end();
  s->bodies.push_back(parse_body({"endwith"}));
  take_end_tag();
  expect_block_end();
  return s;
}

// ---- expressions ----

ExprPtr Parser::parse_tuple(bool with_condexpr) {
  const Token& at = cur();
  ExprPtr first = parse_expression(with_condexpr);
  if (!is_op(",")) return first;
  auto t = node(ExprKind::Tuple, at);
  t->items.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) break;
    t->items.push_back(parse_expression(with_condexpr));
  }
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr e = parse_or();
  while (is_name("if")) {
    auto c = node(ExprKind::Cond, cur());
    ++i_;
    c->items.push_back(std::move(e));
    c->items.push_back(parse_or());
    c->items.push_back(skip_name("else") ? parse_condexpr() : nullptr);
    soften(*c);
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    auto n = node(ExprKind::Or, cur());
    ++i_;
    n->items.push_back(std::move(e));
    n->items.push_back(parse_and());
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    auto n = node(ExprKind::And, cur());
    ++i_;
    n->items.push_back(std::move(e));
    n->items.push_back(parse_not());
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    auto n = node(ExprKind::Not, cur());
    ++i_;
    n->items.push_back(parse_not());
    return n;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token& at = cur();
  ExprPtr e = parse_binary(0);
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
      i_ += 2;
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(ExprKind::Compare, at);
      cmp->items.push_back(std::move(e));
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parse_binary(0));
  }
  return cmp ? std::move(cmp) : std::move(e);
}

// Levels: 0 = + -, 1 = ~, 2 = * / // %, 3 = **.
ExprPtr Parser::parse_binary(int level) {
  static const std::vector<std::vector<std::string>> ops = {
      {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  auto sub = [&]() { return level == 3 ? parse_unary(true) : parse_binary(level + 1); };
  ExprPtr e = sub();
  while (cur().type == Tok::Op && std::find(ops[size_t(level)].begin(), ops[size_t(level)].end(),
                                            cur().text) != ops[size_t(level)].end()) {
    auto b = node(ExprKind::Binary, cur());
    b->name = next().text;
    b->items.push_back(std::move(e));
    b->items.push_back(sub());
    e = std::move(b);
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    auto n = node(is_op("-") ? ExprKind::Neg : ExprKind::Pos, cur());
    ++i_;
    n->items.push_back(parse_unary(false));
    e = std::move(n);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& at = cur();
  switch (at.type) {
    case Tok::Name: {
      ++i_;
      auto lit = node(ExprKind::Literal, at);
      const std::string& n = at.text;
      if (n == "true" || n == "True")
        lit->value = Value(true);
      else if (n == "false" || n == "False")
        lit->value = Value(false);
      else if (n == "none" || n == "None")
        lit->value = Value();
      else {
        auto nm = node(ExprKind::Name, at);
        nm->name = n;
        return nm;
      }
      return lit;
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) s += next().text;
      auto lit = node(ExprKind::Literal, at);
      lit->value = Value(std::move(s));
      return lit;
    }
    case Tok::Int:
    case Tok::Float: {
      ++i_;
      auto lit = node(ExprKind::Literal, at);
      if (at.type == Tok::Int) {
        errno = 0;
        long long v = std::strtoll(at.text.c_str(), nullptr, 10);
        if (errno == ERANGE) fail_here("integer literal out of range");
        lit->value = Value(int64_t(v));
      } else {
        lit->value = Value(std::strtod(at.text.c_str(), nullptr));
      }
      return lit;
    }
    case Tok::Op:
      if (at.text == "(") {
        ++i_;
        if (skip_op(")")) {
          auto t = node(ExprKind::Tuple, at);
          return t;
        }
        ExprPtr e = parse_expression();
        if (is_op(",")) {
          auto t = node(ExprKind::Tuple, at);
          t->items.push_back(std::move(e));
          while (skip_op(",") && !is_op(")")) t->items.push_back(parse_expression());
          e = std::move(t);
        }
        expect_op(")");
        return e;
      }
      if (at.text == "[") {
        ++i_;
        auto l = node(ExprKind::List, at);
        while (!is_op("]")) {
          if (!l->items.empty()) expect_op(",");
          if (is_op("]")) break;
          l->items.push_back(parse_expression());
        }
        expect_op("]");
        return l;
      }
      if (at.text == "{") {
        ++i_;
        auto d = node(ExprKind::DictLit, at);
        while (!is_op("}")) {
          if (!d->items.empty()) expect_op(",");
          if (is_op("}")) break;
          d->items.push_back(parse_expression());
          expect_op(":");
          d->items.push_back(parse_expression());
        }
        expect_op("}");
        return d;
      }
      break;
    default:
      break;
  }
  fail_here("unexpected " + describe(at));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    const Token& at = cur();
    if (skip_op(".")) {
      if (cur().type == Tok::Name) {
        auto g = node(ExprKind::GetAttr, at);
        g->name = next().text;
        g->items.push_back(std::move(e));
        e = std::move(g);
      } else if (cur().type == Tok::Int) {
        auto g = node(ExprKind::GetItem, at);
        g->items.push_back(std::move(e));
        auto lit = node(ExprKind::Literal, cur());
        lit->value = Value(int64_t(std::strtoll(next().text.c_str(), nullptr, 10)));
        g->items.push_back(std::move(lit));
        e = std::move(g);
      } else {
        fail_here("expected a name after '.'");
      }
    } else if (skip_op("[")) {
      // Slice or index.
      ExprPtr parts[3];
      int n_parts = 0;
      bool is_slice = false;
      while (true) {
        if (!is_op(":") && !is_op("]")) parts[n_parts] = parse_expression();
        if (skip_op(":")) {
          is_slice = true;
          if (++n_parts > 2) fail_here("too many ':' in slice");
          continue;
        }
        break;
      }
      expect_op("]");
      auto g = node(is_slice ? ExprKind::Slice : ExprKind::GetItem, at);
      g->items.push_back(std::move(e));
      if (is_slice) {
        for (auto& p : parts) g->items.push_back(std::move(p));
      } else {
        if (!parts[0]) fail_here("expected an index");
        g->items.push_back(std::move(parts[0]));
      }
      e = std::move(g);
    } else if (is_op("(")) {
      auto c = node(ExprKind::Call, at);
      c->line = e->line;  // errors point at the callee, not at '('
      c->col = e->col;
      c->items.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      e = parse_filter(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      auto c = node(ExprKind::Call, cur());
      c->items.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter(ExprPtr e) {
  expect_op("|");
  const Token& at = cur();
  auto f = node(ExprKind::Filter, at);
  f->name = expect_name();
  while (skip_op(".")) f->name += "." + expect_name();
  if (!has_filter(f->name)) note_unknown(*f);
  f->items.push_back(std::move(e));
  if (is_op("(")) parse_call_args(*f);
  return f;
}

ExprPtr Parser::parse_test(ExprPtr e) {
  ++i_;  // is
  const Token& at = cur();
  auto t = node(ExprKind::Test, at);
  t->negated = skip_name("not");
  t->name = expect_name();
  while (skip_op(".")) t->name += "." + expect_name();
  if (!has_test(t->name)) note_unknown(*t);
  t->items.push_back(std::move(e));
  if (is_op("(")) {
    parse_call_args(*t);
  } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
              cur().type == Tok::Float || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail_here("You cannot chain multiple tests with is");
    t->items.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**")) fail_here("*args / **kwargs in calls are not supported");
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      std::string key = next().text;
      ++i_;
      call.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call.kwargs.empty()) fail_here("positional argument after keyword argument");
      call.items.push_back(parse_expression());
    }
  }
  expect_op(")");
}

}  // namespace

Body parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_template();
}

}  // namespace t9::jinja
