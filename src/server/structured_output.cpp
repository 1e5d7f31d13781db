#include "server/structured_output.h"

#include "grammar/gbnf.h"
#include "tokenizer/tokenizer.h"

namespace t9::server {

namespace {

class GrammarConstraint final : public engine::TokenConstraint {
 public:
  GrammarConstraint(grammar::TokenFilter filter, const tok::Tokenizer& tokenizer)
      : filter_(std::move(filter)), tokenizer_(tokenizer) {}
  bool mask(std::span<float> logits) override { return filter_.mask(logits); }
  bool allows(int32_t token) override { return filter_.allows(token); }
  bool accept(int32_t token) override { return filter_.accept(token); }
  bool complete() const override { return filter_.complete(); }

  // The forced bytes (a JSON key's rest, `":` ...) as the tokenizer cuts them, without the last
  // token, which may merge with what the model writes after it.
  std::vector<int32_t> forced_tokens(int max_tokens) override {
    const std::string bytes = filter_.forced_bytes(kMaxForcedBytes);
    if (bytes.size() < 2) return {};
    auto ids = tokenizer_.encode(bytes, {/*add_special=*/false, /*parse_special=*/false});
    if (!ids.ok() || ids->size() < 2) return {};
    ids->pop_back();
    if (static_cast<int>(ids->size()) > max_tokens) ids->resize(static_cast<size_t>(max_tokens));
    return {ids->begin(), ids->end()};
  }

 private:
  static constexpr size_t kMaxForcedBytes = 64;
  grammar::TokenFilter filter_;
  const tok::Tokenizer& tokenizer_;
};

// The format's grammar (kText has none).
Result<grammar::Grammar> compile(const OutputFormat& format, const grammar::Preamble& preamble) {
  switch (format.kind) {
    case OutputFormat::Kind::kJsonObject:
      return grammar::json_object_grammar(preamble);
    case OutputFormat::Kind::kGbnf:
      return grammar::gbnf_grammar(format.schema.get<std::string>());
    case OutputFormat::Kind::kToolCall:
      return grammar::tool_call_grammar(format.schema, format.tool_call, preamble);
    case OutputFormat::Kind::kJsonSchema:
      return grammar::json_schema_grammar(format.schema, preamble, format.field);
    case OutputFormat::Kind::kText:
      break;
  }
  return error("no grammar for free text");
}

}  // namespace

std::shared_ptr<const grammar::TokenTrie> StructuredOutputs::trie(const tok::Tokenizer& tokenizer) {
  std::call_once(trie_once_, [&] {
    const int n = static_cast<int>(tokenizer.n_tokens());
    std::vector<std::string> pieces(static_cast<size_t>(n));
    std::vector<char> usable(static_cast<size_t>(n), 0);
    for (int t = 0; t < n; ++t) {
      pieces[t] = std::string(tokenizer.piece(t));
      usable[t] = !tokenizer.is_special(t);
    }
    trie_ = std::make_shared<const grammar::TokenTrie>(pieces, usable);
  });
  return trie_;
}

Result<std::shared_ptr<engine::TokenConstraint>> StructuredOutputs::constraint(
    const tok::Tokenizer& tokenizer, const OutputFormat& format, const grammar::Preamble& preamble,
    std::vector<int32_t> stop_ids) {
  if (format.kind == OutputFormat::Kind::kText) return std::shared_ptr<engine::TokenConstraint>();
  std::string key = std::to_string(static_cast<int>(format.kind));
  for (const std::string& part :
       {format.schema.dump(), format.tool_call.dialect,
        std::string(format.tool_call.parallel ? "1" : "0"),
        std::string(format.tool_call.lazy ? "1" : "0"), preamble.open, preamble.close})
    key += '\0' + part;
  Compiled c;
  if (auto hit = compiled_.find(key)) {
    c = *hit;
  } else {
    T9_ASSIGN_OR_RETURN(grammar::Grammar g, compile(format, preamble));
    c = {std::make_shared<const grammar::Grammar>(std::move(g)),
         std::make_shared<grammar::MaskCache>(grammar::kMaskCacheStates)};
    compiled_.insert(key, c);
  }
  return std::shared_ptr<engine::TokenConstraint>(std::make_shared<GrammarConstraint>(
      grammar::TokenFilter(c.grammar, trie(tokenizer), std::move(stop_ids), c.masks), tokenizer));
}

}  // namespace t9::server
