#include "chat/jinja/template.h"

#include "chat/jinja/interpreter.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"

namespace t9::jinja {
namespace {

Error located(const JinjaError& e) {
  if (e.line == 0) return Error{e.message};
  return error("line {}, column {}: {}", e.line, e.col, e.message);
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
  try {
    Template t;
    t.body_ = std::make_shared<const Body>(jinja::parse(tokenize(source)));
    return t;
  } catch (const JinjaError& e) {
    return located(e);
  }
}

Result<std::string> Template::render(const Value& context) const {
  if (!context.is_mapping()) return error("template context must be a dict");
  try {
    Interpreter in(context);
    return in.render(*body_);
  } catch (const JinjaError& e) {
    return located(e);
  }
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
      return Value();
    case T::boolean:
      return Value(j.get<bool>());
    case T::number_integer:
      return Value(j.get<int64_t>());
    case T::number_unsigned: {
      auto u = j.get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? Value(double(u)) : Value(int64_t(u));
    }
    case T::number_float:
      return Value(j.get<double>());
    case T::string:
      return Value(j.get_ref<const std::string&>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::new_list(std::move(items));
    }
    case T::object: {
      Value d = Value::new_dict();
      d.dict().items.reserve(j.size());
      for (const auto& [k, v] : j.items()) d.dict().set(Value(k), from_json(v));
      return d;
    }
    default:
      return Value();
  }
}

}  // namespace t9::jinja
