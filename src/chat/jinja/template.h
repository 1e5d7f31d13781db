// A compiled Jinja2 chat template: parse once, render many times (render is const and may run on
// several threads at once). Rendering matches transformers' apply_chat_template environment
// (trim_blocks, lstrip_blocks, loopcontrols, sandboxed, its tojson/raise_exception/strftime_now).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/jinja/ast.h"
#include "core/result.h"

namespace t9::jinja {

class Template {
 public:
  // Errors name the template line and column: "line 3, column 12: unexpected '}'".
  static Result<Template> parse(std::string_view source);

  // `context`: a dict Value of the variables the template sees. Errors (raise_exception, misuse
  // of undefined values, type errors) name the line and column of the failing construct.
  Result<std::string> render(const Value& context) const;

 private:
  std::shared_ptr<const Body> body_;
};

// JSON -> Value keeping object key order (ordered_json), ints as ints and floats as floats, as
// Python's json.loads would.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace t9::jinja
