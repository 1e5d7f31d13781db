// Runs the hand-written corpus in tests/data/tool_calls/*.json through the chat output parser:
// whole, split at every byte boundary, byte by byte, and in random chunkings. Streaming must
// reassemble to the expected message, and no event may ever have to be taken back: after every
// feed the content, reasoning and each call's arguments so far are prefixes of the final ones
// (so no prefix of a tag that later became a tool call can have leaked into content).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "chat/tool_calls/chat_output_parser.h"
#include "chat/tool_calls/utf8_text.h"

namespace t9::chat {
namespace {

namespace fs = std::filesystem;

struct CorpusCase {
  std::string id;  // file_case
  std::string dialect;
  nlohmann::json tools;
  ReasoningConfig reasoning;
  std::string text;
  ParsedMessage expected;
};

// gtest prints parameters on failure; the id is what identifies a case.
void PrintTo(const CorpusCase& c, std::ostream* os) {
  *os << c.id;
}

std::string call_id(std::size_t index) {
  return "call_" + std::to_string(index);
}

std::string text_of(const ordered_json& t) {
  if (t.is_string()) return t.get<std::string>();
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i > 0) out += '\n';
    out += t[i].get_ref<const std::string&>();
  }
  return out;
}

ParsedMessage expected_of(const ordered_json& e) {
  ParsedMessage m;
  m.content = e.value("content", "");
  m.reasoning_content = e.value("reasoning_content", "");
  if (auto calls = e.find("tool_calls"); calls != e.end()) {
    for (const auto& c : *calls) {
      m.tool_calls.push_back(ToolCall{call_id(m.tool_calls.size()), c.at("name").get<std::string>(),
                                      c.at("arguments").dump()});
    }
  }
  return m;
}

std::vector<CorpusCase> load_corpus() {
  std::vector<CorpusCase> cases;
  const fs::path dir = fs::path(TEMPO9_SOURCE_DIR) / "tests/data/tool_calls";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file);
    const ordered_json doc = ordered_json::parse(in);
    for (const auto& c : doc.at("cases")) {
      CorpusCase cc;
      cc.id = file.stem().string() + "_" + c.at("name").get<std::string>();
      cc.dialect = doc.at("dialect").get<std::string>();
      cc.tools = nlohmann::json::parse(doc.at("tools").dump());
      if (auto r = c.find("reasoning"); r != c.end()) {
        cc.reasoning.enabled = r->value("enabled", true);
        cc.reasoning.starts_in_reasoning = r->value("starts_in_reasoning", false);
      }
      cc.text = text_of(c.at("text"));
      cc.expected = expected_of(c.at("expected"));
      cases.push_back(std::move(cc));
    }
  }
  return cases;
}

const std::vector<CorpusCase>& corpus() {
  static const std::vector<CorpusCase> cases = load_corpus();
  return cases;
}

ChatOutputParser make_parser(const CorpusCase& c) {
  auto tools = ToolSet::from_json(c.tools);
  EXPECT_TRUE(tools.ok()) << tools.message();
  ChatParserConfig config{c.dialect, c.reasoning, call_id};
  auto parser = ChatOutputParser::create(config, *tools);
  EXPECT_TRUE(parser.ok()) << parser.message();
  return std::move(parser).value();
}

std::string describe(const ParsedMessage& m) {
  ordered_json j;
  j["content"] = m.content;
  j["reasoning_content"] = m.reasoning_content;
  j["tool_calls"] = ordered_json::array();
  for (const auto& c : m.tool_calls) {
    j["tool_calls"].push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  }
  return j.dump(2);
}

// The streamed message so far must be a prefix of the final one: nothing is ever taken back.
::testing::AssertionResult is_prefix_state(const ParsedMessage& so_far,
                                           const ParsedMessage& final) {
  if (!final.content.starts_with(so_far.content)) {
    return ::testing::AssertionFailure() << "content so far is not a prefix: " << so_far.content;
  }
  if (!final.reasoning_content.starts_with(so_far.reasoning_content)) {
    return ::testing::AssertionFailure() << "reasoning so far is not a prefix";
  }
  if (so_far.tool_calls.size() > final.tool_calls.size()) {
    return ::testing::AssertionFailure() << "more tool calls than expected";
  }
  for (std::size_t i = 0; i < so_far.tool_calls.size(); ++i) {
    const auto& a = so_far.tool_calls[i];
    const auto& b = final.tool_calls[i];
    if (a.id != b.id || a.name != b.name || !b.arguments.starts_with(a.arguments)) {
      return ::testing::AssertionFailure()
             << "tool call " << i << " so far: " << a.name << " " << a.arguments;
    }
  }
  return ::testing::AssertionSuccess();
}

// Feeds `text` cut at `cuts` (sorted offsets), checking after every feed; returns the result.
ParsedMessage run_stream(const CorpusCase& c, const std::vector<std::size_t>& cuts) {
  ChatOutputParser parser = make_parser(c);
  MessageAccumulator acc;
  std::vector<bool> ended;
  std::size_t start = 0;
  auto check_events = [&](const std::vector<ChatEvent>& events) {
    for (const auto& e : events) {
      EXPECT_EQ(sanitize_utf8(e.text), e.text) << "event text is not valid UTF-8";
      if (e.kind == ChatEvent::Kind::kToolCallStart) ended.push_back(false);
      if (e.kind == ChatEvent::Kind::kToolCallArgs || e.kind == ChatEvent::Kind::kToolCallEnd) {
        EXPECT_TRUE(e.index < ended.size() && !ended[e.index]) << "event after end of call";
        if (e.kind == ChatEvent::Kind::kToolCallEnd && e.index < ended.size())
          ended[e.index] = true;
      }
    }
    acc.apply(events);
    EXPECT_TRUE(is_prefix_state(acc.message(), c.expected));
  };
  for (std::size_t cut : cuts) {
    std::vector<ChatEvent> events;
    parser.feed(std::string_view(c.text).substr(start, cut - start), events);
    check_events(events);
    start = cut;
  }
  std::vector<ChatEvent> events;
  parser.feed(std::string_view(c.text).substr(start), events);
  parser.finish(events);
  check_events(events);
  for (std::size_t i = 0; i < ended.size(); ++i)
    EXPECT_TRUE(ended[i]) << "call " << i << " not ended";
  return acc.take();
}

class ToolCallCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(ToolCallCorpus, WholeText) {
  const CorpusCase& c = GetParam();
  auto tools = ToolSet::from_json(c.tools);
  ASSERT_TRUE(tools.ok()) << tools.message();
  auto parsed =
      parse_chat_output(c.text, ChatParserConfig{c.dialect, c.reasoning, call_id}, *tools);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(*parsed, c.expected) << "got " << describe(*parsed) << "\nexpected "
                                 << describe(c.expected);
}

TEST_P(ToolCallCorpus, EveryByteBoundary) {
  const CorpusCase& c = GetParam();
  for (std::size_t cut = 1; cut < c.text.size(); ++cut) {
    const ParsedMessage got = run_stream(c, {cut});
    ASSERT_EQ(got, c.expected) << "split at byte " << cut << ": got " << describe(got);
  }
}

TEST_P(ToolCallCorpus, ByteByByte) {
  const CorpusCase& c = GetParam();
  std::vector<std::size_t> cuts;
  for (std::size_t cut = 1; cut < c.text.size(); ++cut) cuts.push_back(cut);
  const ParsedMessage got = run_stream(c, cuts);
  EXPECT_EQ(got, c.expected) << "got " << describe(got);
}

TEST_P(ToolCallCorpus, RandomChunkings) {
  const CorpusCase& c = GetParam();
  std::mt19937 rng(1234);  // fixed: failures must reproduce
  for (int round = 0; round < 40; ++round) {
    std::uniform_int_distribution<std::size_t> step(1, round < 20 ? 4 : 24);
    std::vector<std::size_t> cuts;
    for (std::size_t cut = step(rng); cut < c.text.size(); cut += step(rng)) cuts.push_back(cut);
    const ParsedMessage got = run_stream(c, cuts);
    ASSERT_EQ(got, c.expected) << "round " << round << ": got " << describe(got);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, ToolCallCorpus, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<CorpusCase>& info) {
                           return info.param.id;
                         });

// Guards against the corpus silently not loading (the parameterized suite would then be empty).
TEST(ToolCallCorpusFiles, AllFilesLoad) {
  std::size_t n_hermes = 0, n_xml = 0, n_reasoning = 0, n_mistral = 0, n_llama = 0;
  for (const auto& c : corpus()) {
    n_hermes += c.dialect == "hermes";
    n_xml += c.dialect == "qwen_xml";
    n_reasoning += c.dialect == "none";
    n_mistral += c.dialect == "mistral";
    n_llama += c.dialect == "llama3_json";
  }
  EXPECT_GE(n_hermes, 15u);
  EXPECT_GE(n_xml, 30u);
  EXPECT_GE(n_reasoning, 12u);
  EXPECT_GE(n_mistral, 9u);
  EXPECT_GE(n_llama, 9u);
}

}  // namespace
}  // namespace t9::chat
