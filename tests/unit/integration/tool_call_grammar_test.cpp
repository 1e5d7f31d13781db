// Tool-call grammars against the parsers that read the calls back: every text the grammar admits
// here parses (chat::parse_chat_output, same dialect) into exactly the calls written, with the
// arguments converted by the tool's schema; texts the grammar refuses are the mistakes a model
// makes (prose first, an unknown tool, a missing required argument, a string where an integer
// is declared, a call cut off).
#include <gtest/gtest.h>

#include "chat/tool_calls/chat_output_parser.h"
#include "grammar/matcher.h"
#include "grammar/tool_call_grammar.h"
#include "unit/grammar/grammar_test_util.h"

namespace t9::grammar {
namespace {

const Json kTools = Json::parse(R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"enum":["c","f"]}},
    "required":["city","days"]}}},
  {"type":"function","function":{"name":"lookup_order","parameters":{"type":"object",
    "properties":{"order_id":{"type":"string","pattern":"^[0-9]+$"}},"required":["order_id"]}}}
])");

bool admits(const Grammar& g, std::string_view text) {
  return testing::admits(std::make_shared<const Grammar>(g), text);
}

chat::ParsedMessage parse(std::string_view text, const std::string& dialect) {
  chat::ChatParserConfig cfg;
  cfg.tool_dialect = dialect;
  cfg.make_call_id = [](size_t i) { return "call_" + std::to_string(i); };
  auto tools = chat::ToolSet::from_json(nlohmann::json::parse(kTools.dump()));
  EXPECT_TRUE(tools.ok());
  auto m = chat::parse_chat_output(text, cfg, std::move(tools).value());
  EXPECT_TRUE(m.ok()) << m.message();
  return std::move(m).value();
}

struct DialectCase {
  std::string dialect;
  std::vector<std::pair<std::string, std::vector<chat::ToolCall>>> admitted;
  std::vector<std::string> refused;
};

TEST(ToolCallGrammar, AdmittedCallsParseBackExactlyAndMistakesAreRefused) {
  const std::vector<DialectCase> cases = {
      {"hermes",
       {{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
         "3}}\n</tool_call>",
         {{"call_0", "get_weather", R"({"city":"Paris","days":3})"}}},
        {"<tool_call>\n{\"name\": \"lookup_order\", \"arguments\": {\"order_id\": "
         "\"00123\"}}\n</tool_call>\n"
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": "
         "1, \"unit\": \"c\"}}\n</tool_call>",
         {{"call_0", "lookup_order", R"({"order_id":"00123"})"},
          {"call_1", "get_weather", R"({"city":"Oslo","days":1,"unit":"c"})"}}}},
       {"Sure! <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
        "\"days\": 3}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
        "\"3\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"lookup_order\", \"arguments\": {\"order_id\": "
        "123}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
        "3}}"}},
      {"qwen_xml",
       {{"<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Jos\xc3\xa9\n</parameter>\n"
         "<parameter=days>\n5\n</parameter>\n</function>\n</tool_call>",
         {{"call_0", "get_weather", "{\"city\":\"San Jos\xc3\xa9\",\"days\":5}"}}},
        {"<tool_call>\n<function=lookup_order>\n<parameter=order_id>\n00123\n</parameter>\n</"
         "function>\n</tool_call>",
         {{"call_0", "lookup_order", R"({"order_id":"00123"})"}}},
        {"<tool_call>\n<function=get_weather>\n<parameter=city>\nline "
         "one\n<b>two</b>\n</parameter>\n"
         "<parameter=days>\n2\n</parameter>\n<parameter=unit>\nf\n</parameter>\n</function>\n</"
         "tool_call>",
         {{"call_0", "get_weather", R"({"city":"line one\n<b>two</b>","days":2,"unit":"f"})"}}}},
       {"<tool_call>\n<function=get_weather>\n<parameter=days>\n5\n</parameter>\n</function>\n</"
        "tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</"
        "parameter>\n<parameter=days>\n1\n</parameter>\n"
        "<parameter=unit>\nk\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</"
        "parameter>\n<parameter=days>\nfive\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=nope>\n</function>\n</tool_call>",
        "I will call "
        "it.\n<tool_call>\n<function=lookup_order>\n<parameter=order_id>\n1\n</parameter>\n</"
        "function>\n</tool_call>"}},
      {"llama3_json",
       {{"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 2}}",
         {{"call_0", "get_weather", R"({"city":"Rome","days":2})"}}}},
       {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 2}}",
        "{\"name\": \"lookup_order\", \"parameters\": {}}"}},
  };
  for (const DialectCase& c : cases) {
    auto g = tool_call_grammar(kTools, {c.dialect, true});
    ASSERT_TRUE(g.ok()) << g.message();
    for (const auto& [text, calls] : c.admitted) {
      EXPECT_TRUE(admits(*g, text)) << c.dialect << "\n" << text;
      const chat::ParsedMessage m = parse(text, c.dialect);
      EXPECT_EQ(m.tool_calls, calls) << c.dialect << "\n" << text;
      EXPECT_EQ(m.content, "") << c.dialect << "\n" << text;
    }
    for (const std::string& text : c.refused)
      EXPECT_FALSE(admits(*g, text)) << c.dialect << "\n" << text;
  }
}

TEST(ToolCallGrammar, OneCallWithoutParallelAndUnsupportedDialects) {
  auto g = tool_call_grammar(kTools, {"hermes", false});
  ASSERT_TRUE(g.ok());
  const std::string one =
      "<tool_call>\n{\"name\": \"lookup_order\", \"arguments\": {\"order_id\": "
      "\"7\"}}\n</tool_call>";
  GrammarMatcher m(std::make_shared<const Grammar>(*g));
  ASSERT_TRUE(m.accept(one));
  EXPECT_TRUE(m.complete());  // nothing may follow the one call
  auto bad = tool_call_grammar(kTools, {"mistral", true});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'mistral'"), std::string::npos);
  auto none = tool_call_grammar(Json::array(), {"hermes", true});
  EXPECT_FALSE(none.ok());
}

// tool_choice auto with the grammar on: prose may end anywhere (a partial marker is prose too),
// and a call, once its marker is written, must be well formed; after the calls, only more calls.
TEST(ToolCallGrammar, LazyGrammarLeavesProseFreeAndChecksCalls) {
  for (const std::string dialect : {"hermes", "qwen_xml"}) {
    auto g = tool_call_grammar(kTools, {dialect, true, /*lazy=*/true});
    ASSERT_TRUE(g.ok()) << g.message();
    const std::string call = dialect == "hermes"
                                 ? "<tool_call>\n{\"name\": \"lookup_order\", \"arguments\": "
                                   "{\"order_id\": \"9\"}}\n</tool_call>"
                                 : "<tool_call>\n<function=lookup_order>\n<parameter=order_id>"
                                   "\n9\n</parameter>\n</function>\n</tool_call>";
    const std::string bad_call =
        dialect == "hermes" ? "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"
                            : "<tool_call>\n<function=nope>\n</function>\n</tool_call>";
    for (const std::string& text :
         {std::string(), std::string("Just prose, no call."),
          std::string("a <tool_ b </tool_call> c"), "Checking.\n" + call, call + "\n" + call}) {
      EXPECT_TRUE(admits(*g, text)) << dialect << "\n" << text;
    }
    for (const std::string& text : {"Checking.\n" + bad_call, call + " and more prose"})
      EXPECT_FALSE(admits(*g, text)) << dialect << "\n" << text;
    GrammarMatcher m(std::make_shared<const Grammar>(*g));
    ASSERT_TRUE(m.accept("Some prose"));
    EXPECT_TRUE(m.accepting());
    EXPECT_FALSE(m.complete());
    const chat::ParsedMessage parsed = parse("Checking.\n" + call, dialect);
    ASSERT_EQ(parsed.tool_calls.size(), 1u);
    EXPECT_EQ(parsed.tool_calls[0].arguments, R"({"order_id":"9"})");
  }
  EXPECT_FALSE(tool_call_grammar(kTools, {"llama3_json", true, true}).ok());
}

}  // namespace
}  // namespace t9::grammar
