// Structured output over the real Qwen3 vocabulary (151k tokens, byte-level BPE, multi-byte
// pieces, added tokens): the trie walk's allowed set equals trying every token one by one at
// states along a document, the document's own tokens are each allowed and end the output, and a
// declared string refuses a bare number where its quote must come. And on SmolLM2's engine:
// pipelined steps with checked rows give the tokens of unpipelined ones.
#include <gtest/gtest.h>

#include <cmath>

#include <fstream>
#include <sstream>

#include "grammar/token_filter.h"
#include "model/engine_runner.h"
#include "server/prompt_builder.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"
#include "unit/integration/real_engine.h"

namespace t9::server {
namespace {

const tok::Tokenizer& qwen3() {
  static const tok::Tokenizer tk = [] {
    auto r = tok::Tokenizer::from_tokenizer_json_file(std::string(TEMPO9_SHARED_DIR) +
                                                      "/fixtures/tokenizers/qwen3/tokenizer.json");
    EXPECT_TRUE(r.ok()) << r.message();
    return std::move(r).value();
  }();
  return tk;
}

const Json kSchema = Json::parse(R"({"type":"object","properties":{
    "order_id":{"type":"string"},"qty":{"type":"integer","minimum":0},
    "note":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"enum":["a","b"]}}},
    "required":["order_id","qty","note"],"additionalProperties":false})");

std::vector<int32_t> encode(const std::string& text) {
  auto ids = qwen3().encode(text, {.add_special = false, .parse_special = false});
  EXPECT_TRUE(ids.ok());
  return std::vector<int32_t>(ids->begin(), ids->end());
}

TEST(StructuredOutput, TrieWalkEqualsEveryTokenOnTheRealVocabulary) {
  StructuredOutputs so;
  auto trie = so.trie(qwen3());
  auto g = grammar::json_schema_grammar(kSchema);
  ASSERT_TRUE(g.ok()) << g.message();
  grammar::GrammarMatcher m(std::make_shared<const grammar::Grammar>(std::move(g).value()));
  const std::string doc =
      "{\"order_id\": \"00123\", \"qty\": 5, \"note\": \"h\xc3\xa9llo \xe2\x82\xac\"}";
  size_t checked = 0;
  for (size_t cut : {size_t{0}, size_t{1}, size_t{14}, size_t{17}, size_t{29}, doc.size() - 4}) {
    grammar::GrammarMatcher at = m;
    ASSERT_TRUE(at.accept(doc.substr(0, cut))) << cut;
    const grammar::TokenBits got = grammar::allowed_tokens(at, *trie);
    size_t n_allowed = 0;
    for (int32_t t = 0; t < trie->n_vocab(); ++t) {
      bool want = false;
      if (trie->usable(t)) {
        grammar::GrammarMatcher copy = at;
        want = copy.accept(trie->piece(t));
      }
      ASSERT_EQ(((got[t >> 6] >> (t & 63)) & 1) != 0, want) << "cut " << cut << " token " << t;
      n_allowed += want;
    }
    EXPECT_GT(n_allowed, 0u);
    ++checked;
  }
  EXPECT_EQ(checked, 6u);
}

TEST(StructuredOutput, ADocumentsTokensAreAllowedAndCompleteIt) {
  StructuredOutputs so;
  const int32_t eos = 151645;  // <|im_end|>
  OutputFormat f{OutputFormat::Kind::kJsonSchema, kSchema, "schema", {}};
  auto c = so.constraint(qwen3(), f, {}, {eos});
  ASSERT_TRUE(c.ok()) << c.message();
  const std::string doc =
      "{\"order_id\": \"A-17\", \"qty\": 12, \"note\": \"caf\xc3\xa9 \xe2\x82\xac 5\", \"tags\": "
      "[\"b\"]}";
  const std::vector<int32_t> ids = encode(doc);
  std::vector<float> logits(151936);  // the model's padded row: ids past the vocabulary are masked
  for (size_t i = 0; i < ids.size(); ++i) {
    std::fill(logits.begin(), logits.end(), 0.5f);
    ASSERT_TRUE((*c)->mask(logits));
    EXPECT_EQ(logits[ids[i]], 0.5f) << "token " << i << " '" << qwen3().piece(ids[i]) << "'";
    EXPECT_TRUE(std::isinf(logits[eos]));  // not a whole document yet
    EXPECT_TRUE(std::isinf(logits[151935]));
    ASSERT_TRUE((*c)->accept(ids[i]));
    EXPECT_EQ((*c)->complete(), i + 1 == ids.size());
  }
}

TEST(StructuredOutput, ADeclaredStringRefusesABareNumber) {
  StructuredOutputs so;
  OutputFormat f{OutputFormat::Kind::kJsonSchema, kSchema, "schema", {}};
  auto c = so.constraint(qwen3(), f, {}, {});
  ASSERT_TRUE(c.ok());
  for (int32_t t : encode("{\"order_id\":")) ASSERT_TRUE((*c)->accept(t));
  std::vector<float> logits(qwen3().n_tokens(), 0.0f);
  ASSERT_TRUE((*c)->mask(logits));
  const std::vector<int32_t> digits = encode("00123");
  const std::vector<int32_t> quoted = encode("\"00123");
  EXPECT_TRUE(std::isinf(logits[digits[0]]));
  EXPECT_FALSE(std::isinf(logits[quoted[0]]));
}

// The forced rest of a key as tokens: a strict prefix of the forced bytes (the last token is left
// to the model), each token allowed in turn by the mask.
TEST(StructuredOutput, ForcedTokensSpellTheKeysRestAndAreAllowed) {
  StructuredOutputs so;
  OutputFormat f{OutputFormat::Kind::kJsonSchema, kSchema, "schema", {}};
  auto c = so.constraint(qwen3(), f, {}, {});
  ASSERT_TRUE(c.ok());
  for (int32_t t : encode("{\"")) ASSERT_TRUE((*c)->accept(t));
  const std::vector<int32_t> forced = (*c)->forced_tokens(8);
  ASSERT_FALSE(forced.empty());
  std::string text;
  for (int32_t t : forced) text += std::string(qwen3().piece(t));
  EXPECT_EQ(std::string("order_id\"").rfind(text, 0), 0u) << text;
  EXPECT_LT(text.size(), std::string("order_id\"").size());
  std::vector<float> logits(qwen3().n_tokens());
  for (int32_t t : forced) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    ASSERT_TRUE((*c)->mask(logits));
    EXPECT_FALSE(std::isinf(logits[t]));
    ASSERT_TRUE((*c)->accept(t));
  }
  EXPECT_EQ((*c)->forced_tokens(8).size(), 0u);  // `"` alone is left: one token, not proposed
}

TEST(StructuredOutput, TextIsUnconstrainedAndErrorsNameTheField) {
  StructuredOutputs so;
  OutputFormat bad{OutputFormat::Kind::kJsonSchema,
                   Json::parse(R"({"type":"array","items":{"pattern":"x"}})"),
                   "response_format.json_schema.schema",
                   {}};
  auto c = so.constraint(qwen3(), bad, {}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(), "response_format.json_schema.schema.items.pattern: is not supported");
  OutputFormat text;
  auto none = so.constraint(qwen3(), text, {}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

// Which format a chat request with tools gets: required (or named) -> the calls grammar;
// auto -> the lazy one only where the server turns it on; none without tools or for a dialect
// without a grammar; response_format is read after and replaces it (openai.cpp).
TEST(StructuredOutput, ChatRequestsWithToolsGetTheirToolCallFormat) {
  std::ifstream f(std::string(TEMPO9_SHARED_DIR) + "/fixtures/templates/qwen3.jinja");
  std::stringstream src;
  src << f.rdbuf();
  auto tmpl = chat::ChatTemplate::create(src.str());
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  ServerContext ctx;
  ctx.tokenizer = &qwen3();
  ctx.chat_template = &*tmpl;
  ctx.tool_dialect = "hermes";
  ChatInput in;
  in.messages = Json::array({{{"role", "user"}, {"content", "hi"}}});
  in.tools = Json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  struct Want {
    bool required, server_grammar;
    std::string dialect;
    OutputFormat::Kind kind;
    bool lazy;
  };
  const std::vector<Want> cases = {
      {true, false, "hermes", OutputFormat::Kind::kToolCall, false},
      {false, false, "hermes", OutputFormat::Kind::kText, false},
      {false, true, "hermes", OutputFormat::Kind::kToolCall, true},
      {false, true, "qwen_xml", OutputFormat::Kind::kToolCall, true},
      {false, true, "llama3_json", OutputFormat::Kind::kText, false},
  };
  for (const Want& w : cases) {
    ctx.tool_dialect = w.dialect;
    ctx.config.tool_grammar = w.server_grammar;
    in.tool_call_required = w.required;
    auto spec = chat_generation_spec(ctx, in);
    ASSERT_TRUE(spec.ok()) << spec.message();
    EXPECT_EQ(spec->format.kind, w.kind) << w.dialect << " required " << w.required;
    if (w.kind == OutputFormat::Kind::kToolCall) {
      EXPECT_EQ(spec->format.tool_call.lazy, w.lazy);
      EXPECT_EQ(spec->format.tool_call.dialect, w.dialect);
    }
  }
  // A required call in a dialect without a grammar cannot be enforced: an error naming
  // tool_choice, not prose.
  ctx.tool_dialect = "mistral";
  in.tool_call_required = true;
  auto refused = chat_generation_spec(ctx, in);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.message().rfind("tool_choice:", 0), 0u) << refused.message();
  in.tool_call_required = false;
  in.tools = Json();  // no tools: free text whatever the server says
  ctx.config.tool_grammar = true;
  auto spec = chat_generation_spec(ctx, in);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->format.kind, OutputFormat::Kind::kText);
}

}  // namespace
}  // namespace t9::server

namespace t9::integration {
namespace {

using server::Json;

// Constrained greedy requests on SmolLM2 (CPU runner), beside a free one: with pipelined steps
// the checked rows are planned ahead (EngineRunner checks in wait(), ModelRunner::
// checks_when_waited) and a refused token's lookahead row is dropped; the tokens must be those
// of the same engine without pipelining, byte for byte, and the constrained ones the schema's.
TEST(StructuredOutput, PipelinedCheckedStepsEqualUnpipelined) {
  auto rm = smollm2();
  ASSERT_TRUE(rm.ok()) << rm.message();
  const tok::Tokenizer& tk = *(*rm)->tokenizer;
  const int32_t eos = tk.find("<|im_end|>");
  ASSERT_GE(eos, 0);
  const Json schema = Json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"rank":{"type":"integer"}},)"
      R"("required":["city","rank"]})");
  const std::vector<std::string> texts = {
      "Name a big city and its rank as JSON:", "The answer, in JSON:", "Once upon a time"};
  std::vector<std::vector<TokenId>> got[2];
  int64_t pipelined = 0, discarded = 0;
  for (int pipe = 0; pipe < 2; ++pipe) {
    server::StructuredOutputs so;
    EngineSetup setup;
    setup.pipeline = pipe == 1;
    model::EngineRunner runner(*(*rm)->model);
    engine::Engine eng(make_engine_config(setup, (*rm)->model->config().kv_block_size), runner);
    std::vector<std::shared_ptr<std::vector<TokenId>>> outs;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = tk.encode_prompt(texts[i]);
      ASSERT_TRUE(ids.ok());
      engine::GenerateRequest r = greedy_request(*ids, 40);
      r.stop_token_ids = {eos};
      if (i < 2) {  // the third runs free beside them
        auto c = so.constraint(tk, {server::OutputFormat::Kind::kJsonSchema, schema, "schema", {}},
                               {}, {eos});
        ASSERT_TRUE(c.ok()) << c.message();
        r.constraint = *c;
      }
      auto out = std::make_shared<std::vector<TokenId>>();
      r.on_event = [out](const engine::TokenEvent& ev) {
        if (ev.token >= 0) out->push_back(ev.token);
        EXPECT_TRUE(ev.error.empty()) << ev.error;
      };
      ASSERT_TRUE(eng.submit(std::move(r)).ok());
      outs.push_back(out);
    }
    eng.run_until_idle();
    for (const auto& o : outs) got[pipe].push_back(*o);
    if (pipe == 1)
      pipelined = eng.stats().n_pipelined_steps, discarded = eng.stats().n_discarded_tokens;
  }
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(got[1][i], got[0][i]) << "request " << i;
  EXPECT_GT(pipelined, 10);         // the checked rows were planned ahead
  for (size_t i = 0; i < 2; ++i) {  // (40 tokens: a start of the document, whole or not)
    auto text = tk.decode(got[0][i]);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text->rfind("{\"city\"", 0), 0u) << *text;
  }
  std::printf("[pipelined check] %lld steps planned ahead, %lld lookahead tokens dropped\n",
              static_cast<long long>(pipelined), static_cast<long long>(discarded));
}

}  // namespace
}  // namespace t9::integration
