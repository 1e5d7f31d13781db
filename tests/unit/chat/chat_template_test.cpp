// ChatTemplate applies transformers' apply_chat_template input handling. Expected strings were
// produced by transformers 5.24 apply_chat_template(tokenize=False) on the same inputs.
#include <gtest/gtest.h>

#include "chat/chat_template.h"

namespace t9::chat {
namespace {

TEST(ChatTemplate, NormalizesMessagesLikeTransformers) {
  auto t = ChatTemplate::create(
      "{{ bos_token }}{% for m in messages %}{{ m }}\n{% endfor %}{{ tools }}|{{ documents }}|"
      "{{ add_generation_prompt }}|{{ enable_thinking }}|{{ eos_token }}",
      SpecialTokens{"<s>", "</s>", "", ""});
  ASSERT_TRUE(t.ok()) << t.message();
  ChatRequest req;
  req.messages = Json::parse(R"([
    {"role": "user", "content": "hi", "name": null},
    {"role": "assistant", "content": null, "reasoning": "r",
     "tool_calls": [{"function": {"name": "f", "arguments": {"a": null}}}]}])");
  req.add_generation_prompt = false;
  req.kwargs = Json::parse(R"({"enable_thinking": false, "eos_token": "<E>"})");
  auto out = t->apply(req);
  ASSERT_TRUE(out.ok()) << out.message();
  // null keys dropped (top level only), reasoning aliased to thinking (first) and
  // reasoning_content (last), kwargs override special tokens.
  EXPECT_EQ(*out,
            "<s>{'role': 'user', 'content': 'hi'}\n"
            "{'thinking': 'r', 'role': 'assistant', 'reasoning': 'r', 'tool_calls': [{'function': "
            "{'name': 'f', 'arguments': {'a': None}}}], 'reasoning_content': 'r'}\n"
            "None|None|False|False|<E>");
}

TEST(ChatTemplate, ReasoningAliasPrefersReasoningContent) {
  auto t = ChatTemplate::create(
      "{% for m in messages %}{{ m.reasoning_content }}|{{ m.thinking }}|{{ m.reasoning }};{% "
      "endfor %}");
  ASSERT_TRUE(t.ok());
  ChatRequest req;
  req.messages = Json::parse(R"([{"role": "assistant", "content": "x", "thinking": "t1"},
    {"role": "assistant", "reasoning_content": "rc", "reasoning": "rr"}])");
  auto out = t->apply(req);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(*out, "t1|t1|;rc|rc|rr;");
}

TEST(ChatTemplate, BadInputIsAnErrorNamingTheField) {
  auto t = ChatTemplate::create("{{ messages }}");
  ASSERT_TRUE(t.ok());
  ChatRequest req;
  req.messages = Json::parse(R"([{"role": "user", "content": "a"}, "oops"])");
  EXPECT_EQ(t->apply(req).message(), "messages[1]: expected an object");
  req.messages = Json::array();
  EXPECT_EQ(t->apply(req).message(), "messages: the conversation is empty");
  req.messages = Json::parse(R"([{"role": "user", "content": "a"}])");
  req.tools = Json::parse(R"({"not": "an array"})");
  EXPECT_EQ(t->apply(req).message(), "tools: expected an array");
}

TEST(ChatTemplate, TemplateErrorsArePrefixed) {
  EXPECT_EQ(ChatTemplate::create("{% if %}").message(),
            "chat template: line 1, column 7: unexpected '%}'");
  auto t = ChatTemplate::create("{{ raise_exception('no system role') }}");
  ASSERT_TRUE(t.ok());
  ChatRequest req;
  req.messages = Json::parse(R"([{"role": "system", "content": "a"}])");
  EXPECT_EQ(t->apply(req).message(),
            "chat template: line 1, column 4: template raised an exception: no system role");
}

}  // namespace
}  // namespace t9::chat
