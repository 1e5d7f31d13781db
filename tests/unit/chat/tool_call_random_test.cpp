// Property test over random outputs built from markup fragments (well formed, truncated,
// interleaved with text and multi-byte characters): for every dialect, any chunking of a text
// must give exactly the events-folded result of the whole text, no event may be taken back, and
// every call's arguments must be a JSON object. Catches what hand-written cases miss (state-machine
// loops, aborts, chunk-dependent decisions).
#include <gtest/gtest.h>

#include <random>

#include "chat/tool_calls/chat_output_parser.h"
#include "chat/tool_calls/utf8_text.h"

namespace t9::chat {
namespace {

constexpr std::string_view kFragments[] = {
    "<tool_call>",
    "</tool_call>",
    "<function=get_weather>",
    "<function=nope>",
    "<function=",
    "</function>",
    "<parameter=city>",
    "<parameter=days>",
    "<parameter=",
    "</parameter>",
    "</para",
    "\n",
    "\n\n",
    " ",
    "Paris",
    "12",
    "<",
    ">",
    "é",
    "🚀",
    "\xE2\x82",  // a truncated UTF-8 sequence
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 3}}",
    "{\"name\": \"get_weather\", \"arguments\": {",
    "{\"name\": \"nope\", \"arguments\": {}}",
    "\"",
    "}",
    "<think>",
    "</think>",
    "text",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    ";",
    "[ARGS]",
    "get_weather",
    "[TOOL_CALLS]get_weather[ARGS]{\"days\": 5}",
    // Whole calls, so that a good share of texts contain real calls to cut through.
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
    "<parameter=days>\n4\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\n",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
};

std::string random_text(std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, std::size(kFragments) - 1);
  std::uniform_int_distribution<int> len(1, 24);
  std::string s;
  for (int i = 0, n = len(rng); i < n; ++i) s += kFragments[pick(rng)];
  return s;
}

ToolSet tools() {
  auto t = ToolSet::from_json(nlohmann::json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}}}}}])"));
  EXPECT_TRUE(t.ok());
  return *t;
}

ParsedMessage run(const std::string& dialect, bool in_reasoning, const std::string& text,
                  const std::vector<std::size_t>& cuts, const ParsedMessage* expected) {
  ReasoningConfig r;
  r.starts_in_reasoning = in_reasoning;
  auto parser = ChatOutputParser::create(
      ChatParserConfig{dialect, r, [](std::size_t i) { return std::to_string(i); }}, tools());
  EXPECT_TRUE(parser.ok());
  MessageAccumulator acc;
  std::size_t start = 0;
  auto check = [&](const std::vector<ChatEvent>& events) {
    for (const auto& e : events) EXPECT_EQ(sanitize_utf8(e.text), e.text);
    acc.apply(events);
    if (expected == nullptr) return;
    EXPECT_TRUE(expected->content.starts_with(acc.message().content)) << text;
    EXPECT_TRUE(expected->reasoning_content.starts_with(acc.message().reasoning_content)) << text;
    ASSERT_LE(acc.message().tool_calls.size(), expected->tool_calls.size()) << text;
    for (std::size_t i = 0; i < acc.message().tool_calls.size(); ++i) {
      EXPECT_TRUE(
          expected->tool_calls[i].arguments.starts_with(acc.message().tool_calls[i].arguments))
          << text;
    }
  };
  for (std::size_t cut : cuts) {
    std::vector<ChatEvent> events;
    parser->feed(std::string_view(text).substr(start, cut - start), events);
    check(events);
    start = cut;
  }
  std::vector<ChatEvent> events;
  parser->feed(std::string_view(text).substr(start), events);
  parser->finish(events);
  check(events);
  return acc.take();
}

TEST(ToolCallRandom, ChunkingNeverChangesTheResult) {
  std::mt19937 rng(20261129);  // fixed: failures must reproduce
  for (const char* dialect : {"qwen_xml", "hermes", "mistral", "llama3_json", "none"}) {
    int n_with_calls = 0;
    for (int n = 0; n < 300; ++n) {
      const std::string text = random_text(rng);
      const bool in_reasoning = n % 5 == 0;
      const ParsedMessage whole = run(dialect, in_reasoning, text, {}, nullptr);
      n_with_calls += !whole.tool_calls.empty();
      for (const auto& call : whole.tool_calls) {
        auto args = nlohmann::json::parse(call.arguments, nullptr, false);
        ASSERT_TRUE(args.is_object()) << dialect << " " << text << " -> " << call.arguments;
      }
      for (int round = 0; round < 6; ++round) {
        std::uniform_int_distribution<std::size_t> step(1, round < 3 ? 3 : 17);
        std::vector<std::size_t> cuts;
        for (std::size_t c = step(rng); c < text.size(); c += step(rng)) cuts.push_back(c);
        const ParsedMessage got = run(dialect, in_reasoning, text, cuts, &whole);
        ASSERT_EQ(got, whole) << dialect << " text: " << text;
      }
    }
    // Not vacuous: about a quarter of the texts hold calls; Llama-3 calls only count at the start.
    const std::string_view d = dialect;
    if (d != "none") {
      EXPECT_GT(n_with_calls, d == "llama3_json" ? 5 : 50) << dialect;
    }
  }
}

}  // namespace
}  // namespace t9::chat
