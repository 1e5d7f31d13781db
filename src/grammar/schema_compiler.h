// SchemaCompiler: JSON Schema -> grammar rules, the building block behind json_schema_grammar
// (json_schema.h) and the tool-call grammars (tool_call_grammar.h), which put several schemas'
// values inside one grammar with their own framing. What each keyword does is documented in
// json_schema.h.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace t9::grammar {

class SchemaCompiler {
 public:
  // lenient: a keyword or schema it cannot enforce admits any value there instead of failing
  // (tool schemas: an agent's tool with a "pattern" must still be callable).
  explicit SchemaCompiler(const Json& root, bool lenient = false)
      : root_(&root), lenient_(lenient) {}

  // The rule for the values `s` admits; `path` names it in errors. Local "$ref"s resolve in the
  // document set by set_root (the constructor's at first).
  uint32_t value(const Json& s, const std::string& path, int depth = 0);
  void set_root(const Json& root) { root_ = &root; }
  uint32_t any_object();
  uint32_t ws();  // "", " ", or a newline and up to 20 spaces or tabs
  GrammarBuilder& builder() { return b_; }
  bool ok() const { return err_.empty(); }
  // The grammar whose sentences are an optional preamble (json_schema.h) and then `body`.
  Result<Grammar> finish(uint32_t body, const Preamble& pre) &&;

 private:
  uint32_t fail(const std::string& path, const std::string& why);
  uint32_t literal_rule(const std::string& name, const std::string& text) {
    return b_.rule(name, {b_.literal(text)});
  }
  uint32_t null_rule() {
    return cached(null_, [&] { return literal_rule("null", "null"); });
  }
  uint32_t sep();  // ws "," ws
  uint32_t str_char();
  uint32_t any_string() {
    return cached(any_string_, [&] { return string_of("string", 0, -1); });
  }
  uint32_t string_of(const std::string& name, int min, int max);
  uint32_t int_part();
  uint32_t integer(bool negative);
  uint32_t number(bool negative);
  uint32_t boolean();
  uint32_t any_value();
  uint32_t any_array();
  void define_container(uint32_t r, const std::string& name, char open, uint32_t item, char close);
  uint32_t typed(const std::string& type, const Json& s, const std::string& path, int depth);
  uint32_t object(const Json& s, const std::string& path, int depth);
  uint32_t array(const Json& s, const std::string& path, int depth);
  uint32_t reference(const std::string& ref, const std::string& path, int depth);
  uint32_t alternatives(const std::string& name, const std::vector<uint32_t>& rules);
  std::optional<int> count(const Json& s, const char* key, const std::string& path);

  template <typename F>
  uint32_t cached(std::optional<uint32_t>& slot, F make) {
    if (!slot) slot = make();
    return *slot;
  }

  const Json* root_;
  bool lenient_;
  GrammarBuilder b_;
  std::string err_;
  std::optional<uint32_t> null_, ws_, sep_, char_, any_string_, int_part_, int_[2], num_[2], bool_,
      any_value_, any_object_, any_array_;
  std::unordered_map<std::string, uint32_t> refs_;  // by document address and reference
  int n_names_ = 0;
};

}  // namespace t9::grammar
