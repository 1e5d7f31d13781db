// Structured output: a request's output format (OpenAI's response_format, Ollama's format, a
// required tool call) turned into an engine::TokenConstraint over the model's vocabulary. One
// StructuredOutputs per server holds the vocabulary's byte trie (built on the first constrained
// request) and the compiled grammars of recent formats with their mask caches, so agents that
// send the same schema or tools every turn compile them once and reuse the allowed sets of their
// states.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/lru_cache.h"
#include "engine/token_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_filter.h"
#include "grammar/tool_call_grammar.h"
#include "server/json_fields.h"

namespace t9::tok {
class Tokenizer;
}

namespace t9::server {

struct OutputFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema, kToolCall, kGbnf };
  Kind kind = Kind::kText;
  // kJsonSchema: the schema; kToolCall: the tools that may be called; kGbnf: the grammar's text
  // (llama-server's `grammar` field, grammar/gbnf.h; it covers the whole output, no preamble).
  Json schema;
  std::string field;  // where a schema was given, for errors: "response_format.json_schema.schema"
  grammar::ToolCallFormat tool_call;  // kToolCall
};

class StructuredOutputs {
 public:
  // Null for kText. Errors name the schema keyword under format.field.
  Result<std::shared_ptr<engine::TokenConstraint>> constraint(const tok::Tokenizer& tokenizer,
                                                              const OutputFormat& format,
                                                              const grammar::Preamble& preamble,
                                                              std::vector<int32_t> stop_ids);
  // The vocabulary's byte trie: every token but control and unknown ones (built on first use).
  std::shared_ptr<const grammar::TokenTrie> trie(const tok::Tokenizer& tokenizer);

 private:
  struct Compiled {
    std::shared_ptr<const grammar::Grammar> grammar;
    std::shared_ptr<grammar::MaskCache> masks;
  };
  static constexpr size_t kMaxCompiled = 32;

  std::once_flag trie_once_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  LruCache<Compiled> compiled_{kMaxCompiled};
};

}  // namespace t9::server
