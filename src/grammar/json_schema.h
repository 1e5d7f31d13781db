// JSON Schema -> Grammar: the grammar of the JSON texts a schema admits, for structured output
// (OpenAI's response_format json_schema, Ollama's format). What is enforced:
//  - type (one or a list), enum, const, anyOf / oneOf, allOf of one schema, local $ref
//    ("#", "#/$defs/..", "#/definitions/..", recursion allowed), boolean schemas, nullable;
//  - object: properties in their declared order, required ones present, optional ones may be
//    left out; additionalProperties false / a schema / true (absent: none when properties are
//    declared, any otherwise) — extra keys come after the declared ones;
//  - array: items, minItems, maxItems; string: minLength, maxLength (in code points), valid
//    UTF-8 and JSON escapes; integer / number: JSON syntax, no minus sign when minimum >= 0;
//    digit runs are bounded (16 digits, 3 exponent digits) so a weak model cannot loop on them.
// Not enforced (annotations to the grammar): format, other numeric bounds, multipleOf,
// uniqueItems, title/description/default/examples. Rejected with an error naming the keyword:
// pattern, prefixItems, non-local $ref, allOf of several schemas, and a `false` schema.
// Whitespace between tokens: "", " ", or a newline and up to 20 spaces or tabs (bounded for the
// same reason). No whitespace before the value or after it: the output ends with the value (a
// preamble's marker may be followed by up to 8 spaces, tabs or newlines).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/result.h"
#include "grammar/grammar.h"

namespace t9::grammar {

using Json = nlohmann::ordered_json;

// Free text allowed before the JSON value: a reasoning block the model writes first.
struct Preamble {
  std::string open;   // "": the output starts inside the block; else the block is optional
  std::string close;  // "": no preamble at all
};

// Errors name the keyword's path under `path` ("schema.properties.age.type: ...").
Result<Grammar> json_schema_grammar(const Json& schema, const Preamble& preamble = {},
                                    const std::string& path = "schema");
// Any JSON object (OpenAI's json_object, Ollama's "json").
Grammar json_object_grammar(const Preamble& preamble = {});

}  // namespace t9::grammar
