// GBNF (llama.cpp's grammar format, the `grammar` field llama-server takes) -> Grammar.
//   rule ::= alternatives      names [a-zA-Z0-9_-]+, `root` is where a parse starts
//   alternatives: sequences separated by `|`; a sequence: items one after another
//   items: "literal" (escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH), [class] / [^class]
//          of code points and ranges, `.` (any code point), a rule name, ( group ), each with an
//          optional *, +, ?, {m}, {m,}, {m,n}; # starts a comment to the end of the line
// A rule ends at the end of its line unless the line break is inside ( ) or right after `|`
// (or the next line starts with `|`). Code points are matched as their UTF-8 bytes (the grammar
// is byte-level), so a class like [^"\\] admits every multi-byte character too. Errors give the
// line and column and what was expected.
#pragma once

#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace t9::grammar {

Result<Grammar> gbnf_grammar(std::string_view text);

}  // namespace t9::grammar
