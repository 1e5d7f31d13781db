// JSON Schema -> Grammar: documents each schema must admit and must refuse (exact texts), the
// errors for what it does not support, and random JSON values (compact and indented dumps) that
// the any-object grammar must admit while their corruptions are refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "unit/grammar/grammar_test_util.h"

namespace t9::grammar {
namespace {

using testing::admits;

std::shared_ptr<const Grammar> compile(const std::string& schema, const Preamble& pre = {}) {
  return testing::compiled(json_schema_grammar(Json::parse(schema), pre));
}

struct Case {
  const char* schema;
  std::vector<std::string> admitted;
  std::vector<std::string> refused;
};

TEST(JsonSchemaGrammar, AdmitsExactlyTheDocumentsOfEachSchema) {
  const std::vector<Case> cases = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0},
          "email":{"type":"string"}},"required":["name","age"]})",
       {R"({"name":"Bo","age":3})", R"({"name":"Bo","age":3,"email":"b@x"})",
        "{ \"name\": \"Bo\",\n  \"age\": 30 }", R"({"name":"","age":0})"},
       {R"({"name":"Bo"})", R"({"name":"Bo","age":"3"})", R"({"name":"Bo","age":3,"x":1})",
        R"({"age":3,"name":"Bo"})", R"({"name":"Bo","age":-3})", R"({"name":"Bo","age":3.5})",
        R"({"name":"Bo","age":03})", R"({"name":"Bo","email":"e"})", " {\"name\":\"Bo\",\"age\":3}",
        "{\"name\":\"Bo\",\"age\":3} "}},
      // A declared string stays a string: an order number is quoted, never a bare number.
      {R"({"type":"object","properties":{"order":{"type":"string"}},"required":["order"]})",
       {R"({"order":"00123"})"},
       {R"({"order":123})", R"({"order":null})"}},
      {R"({"enum":["red","green",3,null]})",
       {R"("red")", R"("green")", "3", "null"},
       {R"("blue")", R"("Red")", "4"}},
      {R"({"const":{"a":[1,true]}})", {R"({"a":[1,true]})"}, {R"({"a":[1,false]})"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})", {"12", "true"}, {"\"12\"", "1.5"}},
      {R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"}},
      {R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {"01", "1.", ".5", "+1", "1e"}},
      {R"({"type":"integer"})", {"9999999999999999"}, {"99999999999999999"}},  // 16 digits at most
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,2,3]", "[ 1, 2 ]"},
       {"[]", "[1,2,3,4]", "[\"1\"]"}},
      {R"({"type":"array","maxItems":0})", {"[]", "[ ]"}, {"[1]"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", "\"\xc3\xa9\xc3\xa9\"", R"("a\"b")", R"("\u00e9x")"},
       {R"("a")", R"("abcd")", "\"a\xff\"", "\"a\x01\"", R"("\x")"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {R"({})", R"({"a":1,"b":2})"},
       {R"({"a":"x"})"}},
      {R"({"type":"object","properties":{"a":{"type":"boolean"}},"additionalProperties":true})",
       {R"({"a":true,"z":[1,{"q":null}]})", R"({"z":1})"},
       {R"({"z":1,"a":true,})"}},
      {R"({"type":"object"})", {R"({})", R"({"k":{"n":[1,2,{}]}})"}, {"[]", "{\"k\"}"}},
      // Local references, recursion included.
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
          "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
          "$ref":"#/$defs/node"})",
       {R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]})"},
       {R"({"v":1,"kids":[{"w":2}]})"}},
      {R"({"type":"object","properties":{"x":{"type":"integer","nullable":true}},"required":["x"]})",
       {R"({"x":null})", R"({"x":-2})"},
       {R"({"x":"n"})"}},
  };
  for (const Case& c : cases) {
    auto g = compile(c.schema);
    ASSERT_NE(g, nullptr) << c.schema;
    for (const std::string& t : c.admitted) EXPECT_TRUE(admits(g, t)) << c.schema << "\n  " << t;
    for (const std::string& t : c.refused) EXPECT_FALSE(admits(g, t)) << c.schema << "\n  " << t;
  }
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreErrorsNamingTheirPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"object","properties":{"id":{"type":"string","pattern":"^a"}}})",
       "schema.properties.id.pattern: is not supported"},
      {R"({"type":"objekt"})", "schema.type: 'objekt' is not a JSON Schema type"},
      {R"({"$ref":"http://x/y.json"})", "schema.$ref: only references inside the schema"},
      {R"({"$ref":"#/$defs/missing"})", "schema.$ref: '#/$defs/missing' names nothing"},
      {R"({"type":"array","items":false})", "schema.items: a false schema admits no value"},
      {R"({"allOf":[{"type":"string"},{"maxLength":2}]})",
       "schema.allOf: only an allOf of exactly one"},
      {R"({"type":"string","minLength":3,"maxLength":2})",
       "schema.maxLength: is less than minLength"},
      {R"({"type":"array","minItems":-1})", "schema.minItems: must be an integer"},
      {R"(5)", "schema: must be an object or a boolean"},
  };
  for (const auto& [schema, want] : cases) {
    auto g = json_schema_grammar(Json::parse(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.message().rfind(want, 0), 0u) << schema << "\n  got: " << g.message();
  }
}

TEST(JsonSchemaGrammar, AHugeBoundIsAnErrorNotAnAllocation) {
  auto g = json_schema_grammar(Json::parse(R"({"type":"string","maxLength":1000000})"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.message().rfind("grammar too large", 0), 0u) << g.message();
  auto ok = json_schema_grammar(Json::parse(R"({"type":"string","maxLength":5000})"));
  EXPECT_TRUE(ok.ok()) << ok.message();
}

// What a schema forces: a key's rest once its quote is open (one property may come there), an
// enum value's rest once it is told apart; nothing where whitespace or a choice may come, or
// where the text may end.
TEST(JsonSchemaGrammar, ForcedBytesAreWhatNoChoiceCanChange) {
  auto g = compile(R"({"type":"object","properties":{"order_id":{"type":"string"},
      "kind":{"enum":["alpha","beta"]}},"required":["order_id","kind"]})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "{"},
      {"{", ""},
      {"{\"", "order_id\""},
      {"{\"order", "_id\""},
      {"{\"order_id\":", ""},
      {"{\"order_id\": \"x\",\"", "kind\""},
      {"{\"order_id\": \"x\",\"kind\":\"a", "lpha\""},
      {"{\"order_id\": \"x\",\"kind\":\"b", "eta\""}};
  for (const auto& [prefix, forced] : cases) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept(prefix)) << prefix;
    const std::string key = m.key();
    EXPECT_EQ(m.forced_bytes(64), forced) << prefix;
    EXPECT_EQ(m.key(), key);  // a look ahead only
  }
  GrammarMatcher m(g);
  EXPECT_EQ(m.forced_bytes(0), "");
  auto number = compile(R"({"type":"integer"})");
  GrammarMatcher n(number);
  ASSERT_TRUE(n.accept("1"));
  EXPECT_EQ(n.forced_bytes(64), "");  // "1" may end the text
}

TEST(JsonSchemaGrammar, PreambleIsFreeTextUpToTheMarker) {
  auto opened = compile(R"({"type":"integer"})", Preamble{"", "</think>"});
  EXPECT_TRUE(admits(opened, "hmm, 4 < 5 </thi nk></think>\n\n42"));
  EXPECT_FALSE(admits(opened, "42"));
  EXPECT_FALSE(admits(opened, "a</think>b</think>42"));  // the first marker ends the block
  auto optional = compile(R"({"type":"integer"})", Preamble{"<think>", "</think>"});
  EXPECT_TRUE(admits(optional, "42"));
  EXPECT_TRUE(admits(optional, "<think>x</think> 42"));
  EXPECT_FALSE(admits(optional, "x</think>42"));
}

// Random JSON values, as nlohmann dumps them compact and with indent 2 (depth <= 5: at most 10
// spaces of indent), each admitted by the any-object grammar; one byte changed to a structural
// character that cannot be valid there is refused.
Json random_value(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth >= 5 ? 5 : 7));
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng() % 100000) - 50000;
    case 3:
      return static_cast<double>(rng() % 1000) / 8.0 - 60.0;
    case 4: {
      std::string s;
      const char* parts[] = {"a", "\"", "\\", "\n", "\xc3\xa9", "\xe2\x82\xac", " ", "z", "\t"};
      for (int i = rng() % 6; i > 0; --i) s += parts[rng() % 9];
      return s;
    }
    case 5: {
      Json a = Json::array();
      for (int i = rng() % 4; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (int i = rng() % 4; i > 0; --i)
        o[fmt::format("k{}", rng() % 10)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonSchemaGrammar, AnyObjectAdmitsRandomDocuments) {
  auto g = std::make_shared<const Grammar>(json_object_grammar());
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    Json o = Json::object();
    for (int i = rng() % 5; i > 0; --i) o[fmt::format("key{}", i)] = random_value(rng, 1);
    for (const std::string& text : {o.dump(), o.dump(2)}) {
      ASSERT_TRUE(admits(g, text)) << text;
      std::string bad = text.substr(0, text.size() - 1);  // a trailing comma before the brace
      bad.push_back(',');
      bad.push_back('}');
      EXPECT_FALSE(admits(g, bad)) << bad;
    }
  }
  EXPECT_FALSE(admits(g, "[1]"));  // an object, not any value
}

}  // namespace
}  // namespace t9::grammar
