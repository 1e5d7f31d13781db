// Parses tokens into a statement tree following jinja2's grammar and operator precedence.
// Tags outside the supported set (include, extends, import, block, do, ...) and unknown filters or
// tests are parse errors naming the line and column: never a silent mis-render.
#pragma once

#include <string_view>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace t9::jinja {

// Throws JinjaError with line/col on a syntax error.
Body parse(const std::vector<Token>& tokens);

// Whether the engine implements a filter / test of this name (checked at parse time).
bool has_filter(std::string_view name);
bool has_test(std::string_view name);

}  // namespace t9::jinja
