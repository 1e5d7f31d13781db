// ReasoningSplitter on its own: what it emits when, and that the text after </think> is passed on
// byte for byte (the tool-call parser needs it raw). The whole-message cases are in the corpus
// (tests/data/tool_calls/reasoning.json).
#include <gtest/gtest.h>

#include "chat/reasoning.h"

namespace t9::chat {
namespace {

struct Split {
  std::string reasoning;
  std::string rest;
};

Split feed(ReasoningSplitter& s, std::string_view delta) {
  Split out;
  s.feed(delta, out.reasoning, out.rest);
  return out;
}

Split finish(ReasoningSplitter& s) {
  Split out;
  s.finish(out.reasoning, out.rest);
  return out;
}

TEST(ReasoningSplit, OpenTagSplitAcrossDeltasIsNotPassedOn) {
  ReasoningSplitter s({});
  Split a = feed(s, "\n<thi");
  EXPECT_EQ(a.reasoning, "");
  EXPECT_EQ(a.rest, "");
  Split b = feed(s, "nk>\nstep one");
  EXPECT_TRUE(s.in_reasoning());
  EXPECT_EQ(b.reasoning, "step one");
  EXPECT_EQ(b.rest, "");
}

TEST(ReasoningSplit, TextAfterCloseTagIsPassedOnRaw) {
  ReasoningSplitter s({});
  feed(s, "<think>x</think>");
  Split a = feed(s, "\n\n<tool_call>\n{");
  EXPECT_EQ(a.rest, "\n\n<tool_call>\n{");  // whitespace policy is the content sink's business
  EXPECT_FALSE(s.in_reasoning());
}

TEST(ReasoningSplit, NoThinkPassesEverythingThrough) {
  ReasoningSplitter s({});
  Split a = feed(s, "Hello");
  EXPECT_EQ(a.rest, "Hello");
  Split b = feed(s, " <think>not reasoning</think>");
  EXPECT_EQ(b.rest, " <think>not reasoning</think>");
  EXPECT_EQ(finish(s).rest, "");
}

TEST(ReasoningSplit, TrailingNewlinesOfReasoningAreHeldThenDropped) {
  ReasoningSplitter s({});
  Split a = feed(s, "<think>\nline1\n\n");
  EXPECT_EQ(a.reasoning, "line1");
  Split b = feed(s, "line2\n");
  EXPECT_EQ(b.reasoning, "\n\nline2");
  Split c = feed(s, "</think>answer");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.rest, "answer");
}

TEST(ReasoningSplit, StartsInReasoningWithCloseTagOnly) {
  ReasoningConfig config;
  config.starts_in_reasoning = true;
  ReasoningSplitter s(config);
  Split a = feed(s, "Okay, the user");
  EXPECT_EQ(a.reasoning, "Okay, the user");
  Split b = feed(s, " asks.</think>\n\nHi");
  EXPECT_EQ(b.reasoning, " asks.");
  EXPECT_EQ(b.rest, "\n\nHi");
}

TEST(ReasoningSplit, WhitespaceOnlyOutputIsRest) {
  ReasoningSplitter s({});
  Split a = feed(s, "\n\n");
  EXPECT_EQ(a.rest, "");  // could still be followed by <think>
  Split b = finish(s);
  EXPECT_EQ(b.rest, "\n\n");
  EXPECT_EQ(b.reasoning, "");
}

TEST(ReasoningSplit, CustomTags) {
  ReasoningConfig config;
  config.open_tag = "[THINK]";
  config.close_tag = "[/THINK]";
  ReasoningSplitter s(config);
  Split a = feed(s, "[THINK]plan[/THINK]do");
  EXPECT_EQ(a.reasoning, "plan");
  EXPECT_EQ(a.rest, "do");
}

TEST(ReasoningSplit, DisabledPassesTagsThrough) {
  ReasoningConfig config;
  config.enabled = false;
  ReasoningSplitter s(config);
  EXPECT_EQ(feed(s, "<think>a</think>").rest, "<think>a</think>");
}

}  // namespace
}  // namespace t9::chat
