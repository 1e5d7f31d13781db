// Schema-typed conversion of tool-call argument values, the tools array, and the JSON helpers.
#include <gtest/gtest.h>

#include "chat/tool_calls/json_call.h"
#include "chat/tool_calls/tool_schema.h"

namespace t9::chat {
namespace {

using nlohmann::json;

std::string convert(std::string_view text, const char* schema_json) {
  const json schema = json::parse(schema_json);
  return convert_text_value(text, &schema).dump();
}

TEST(ToolCallSchema, DeclaredStringStaysString) {
  EXPECT_EQ(convert("03106", R"({"type": "string"})"), R"("03106")");
  EXPECT_EQ(convert("5", R"({"type": "string"})"), R"("5")");
  EXPECT_EQ(convert("true", R"({"type": "string"})"), R"("true")");
  EXPECT_EQ(convert("null", R"({"type": "string"})"), R"("null")");
  EXPECT_EQ(convert(" padded ", R"({"type": "string"})"), R"(" padded ")");
}

TEST(ToolCallSchema, Integers) {
  EXPECT_EQ(convert("42", R"({"type": "integer"})"), "42");
  EXPECT_EQ(convert(" -7 ", R"({"type": "integer"})"), "-7");
  EXPECT_EQ(convert("+3", R"({"type": "integer"})"), "3");
  EXPECT_EQ(convert("03106", R"({"type": "integer"})"), "3106");
  EXPECT_EQ(convert("18446744073709551615", R"({"type": "integer"})"), "18446744073709551615");
  EXPECT_EQ(convert("-9223372036854775808", R"({"type": "integer"})"), "-9223372036854775808");
  // Not integers: kept as the text.
  EXPECT_EQ(convert("abc", R"({"type": "integer"})"), R"("abc")");
  EXPECT_EQ(convert("1.5", R"({"type": "integer"})"), R"("1.5")");
  EXPECT_EQ(convert("0x10", R"({"type": "integer"})"), R"("0x10")");
  EXPECT_EQ(convert("18446744073709551616", R"({"type": "integer"})"), R"("18446744073709551616")");
  EXPECT_EQ(convert("", R"({"type": "integer"})"), R"("")");
}

TEST(ToolCallSchema, Numbers) {
  EXPECT_EQ(convert("0.75", R"({"type": "number"})"), "0.75");
  EXPECT_EQ(convert("5", R"({"type": "number"})"), "5");
  EXPECT_EQ(convert("-1.5e3", R"({"type": "number"})"), "-1500.0");
  EXPECT_EQ(convert(".5", R"({"type": "number"})"), "0.5");
  EXPECT_EQ(convert("1e999", R"({"type": "number"})"), R"("1e999")");  // not finite
  EXPECT_EQ(convert("nan", R"({"type": "number"})"), R"("nan")");
  EXPECT_EQ(convert("1,5", R"({"type": "number"})"), R"("1,5")");
}

TEST(ToolCallSchema, BooleansAndNull) {
  EXPECT_EQ(convert("true", R"({"type": "boolean"})"), "true");
  EXPECT_EQ(convert("False", R"({"type": "boolean"})"), "false");
  EXPECT_EQ(convert("yes", R"({"type": "boolean"})"), R"("yes")");
  EXPECT_EQ(convert("null", R"({"type": "null"})"), "null");
}

TEST(ToolCallSchema, ObjectsAndArrays) {
  EXPECT_EQ(convert(R"({"a": [1, {"b": null}]})", R"({"type": "object"})"),
            R"({"a":[1,{"b":null}]})");
  EXPECT_EQ(convert("[1, 2]", R"({"type": "object"})"), R"("[1, 2]")");  // wrong kind
  EXPECT_EQ(convert("[1, 2]", R"({"type": "array"})"), "[1,2]");
  EXPECT_EQ(convert("[1, 2", R"({"type": "array"})"), R"("[1, 2")");
  // A schema that only has "properties" / "items" still says object / array.
  EXPECT_EQ(convert(R"({"x": 1})", R"({"properties": {"x": {}}})"), R"({"x":1})");
  EXPECT_EQ(convert("[true]", R"({"items": {"type": "boolean"}})"), "[true]");
}

TEST(ToolCallSchema, Enums) {
  EXPECT_EQ(convert("2", R"({"enum": [1, 2, 3]})"), "2");
  EXPECT_EQ(convert("fast", R"({"type": "string", "enum": ["fast", "safe"]})"), R"("fast")");
  EXPECT_EQ(convert("slow", R"({"type": "string", "enum": ["fast", "safe"]})"), R"("slow")");
  EXPECT_EQ(convert("9", R"({"enum": [1, 2, 3]})"), R"("9")");
  EXPECT_EQ(convert("1", R"({"enum": ["1", 1]})"), R"("1")");  // first member that matches
}

TEST(ToolCallSchema, UnionsPreferNonStringAlternatives) {
  EXPECT_EQ(convert("null", R"({"type": ["string", "null"]})"), "null");
  EXPECT_EQ(convert("hello", R"({"type": ["string", "null"]})"), R"("hello")");
  EXPECT_EQ(convert("7", R"({"type": ["string", "integer"]})"), "7");
  EXPECT_EQ(convert("10", R"({"anyOf": [{"type": "integer"}, {"type": "null"}]})"), "10");
  EXPECT_EQ(convert("null", R"({"anyOf": [{"type": "integer"}, {"type": "null"}]})"), "null");
  EXPECT_EQ(convert("x", R"({"anyOf": [{"type": "integer"}, {"type": "null"}]})"), R"("x")");
  EXPECT_EQ(convert(R"(["a"])", R"({"oneOf": [{"type": "string"}, {"type": "array"}]})"),
            R"(["a"])");
  EXPECT_EQ(convert("2.5", R"({"anyOf": [{"anyOf": [{"type": "boolean"}, {"type": "number"}]}]})"),
            "2.5");
}

TEST(ToolCallSchema, NoSchemaMeansJsonElseText) {
  EXPECT_EQ(convert_text_value("42", nullptr).dump(), "42");
  EXPECT_EQ(convert_text_value("03106", nullptr).dump(), R"("03106")");
  EXPECT_EQ(convert_text_value("{\"a\":1}", nullptr).dump(), R"({"a":1})");
  EXPECT_EQ(convert_text_value("two words", nullptr).dump(), R"("two words")");
  EXPECT_EQ(convert_text_value("", nullptr).dump(), R"("")");
  EXPECT_EQ(convert("5", R"({"description": "anything"})"), "5");
}

TEST(ToolCallSchema, PlainStringSchemas) {
  const auto plain = [](const char* s) {
    const json schema = json::parse(s);
    return is_plain_string_schema(&schema);
  };
  EXPECT_TRUE(plain(R"({"type": "string"})"));
  EXPECT_TRUE(plain(R"({"type": ["string"]})"));
  EXPECT_TRUE(plain(R"({"enum": ["a", "b"]})"));
  EXPECT_TRUE(plain(R"({"anyOf": [{"type": "string"}, {"type": "string", "enum": ["x"]}]})"));
  EXPECT_FALSE(plain(R"({"type": ["string", "null"]})"));
  EXPECT_FALSE(plain(R"({"enum": ["a", 1]})"));
  EXPECT_FALSE(plain(R"({})"));
  EXPECT_FALSE(is_plain_string_schema(nullptr));
}

TEST(ToolCallSchema, HermesCoercionKeepsOriginalDigits) {
  const json str = json::parse(R"({"type": "string"})");
  const json integer = json::parse(R"({"type": "integer"})");
  EXPECT_EQ(coerce_json_value(ordered_json::parse("1.50"), "1.50", &str).dump(), R"("1.50")");
  EXPECT_EQ(coerce_json_value(ordered_json::parse("1e3"), " 1e3 ", &str).dump(), R"("1e3")");
  EXPECT_EQ(coerce_json_value(ordered_json::parse("false"), "false", &str).dump(), R"("false")");
  EXPECT_EQ(coerce_json_value(ordered_json::parse("[1]"), "[1]", &str).dump(), "[1]");
  EXPECT_EQ(coerce_json_value(ordered_json::parse("\"5\""), "\"5\"", &integer).dump(), R"("5")");
  EXPECT_EQ(coerce_json_value(ordered_json::parse("5"), "5", nullptr).dump(), "5");
}

TEST(ToolSetTest, ParsesWrappedAndFlatEntries) {
  auto tools = ToolSet::from_json(json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object",
      "properties": {"x": {"type": "integer"}}}}},
    {"name": "b"}])"));
  ASSERT_TRUE(tools.ok()) << tools.message();
  ASSERT_NE(tools->find("a"), nullptr);
  ASSERT_NE(tools->find("b"), nullptr);
  EXPECT_EQ(tools->find("c"), nullptr);
  ASSERT_NE(tools->find("a")->property_schema("x"), nullptr);
  EXPECT_EQ(tools->find("a")->property_schema("x")->at("type"), "integer");
  EXPECT_EQ(tools->find("a")->property_schema("y"), nullptr);
  EXPECT_EQ(tools->find("b")->property_schema("x"), nullptr);
}

TEST(ToolSetTest, ErrorsNameTheEntry) {
  auto r = ToolSet::from_json(
      json::parse(R"([{"function": {"name": "ok"}}, {"function": {"name": 3}}])"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "tools[1].function.name: missing or not a non-empty string");
  r = ToolSet::from_json(json::parse(R"([{"function": {"name": "f", "parameters": []}}])"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "tools[0].function.parameters: expected an object schema");
  r = ToolSet::from_json(json::parse(R"({"name": "f"})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "tools: expected an array, got object");
}

TEST(JsonCallTest, SplitKeepsRawValueText) {
  auto m = split_json_object(R"( {"a": 1.50, "b" : "x\"}", "c": [1, {"d": "]"}], "e": null} )");
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[0].key, "a");
  EXPECT_EQ((*m)[0].raw_value, "1.50");
  EXPECT_EQ((*m)[1].raw_value, R"("x\"}")");
  EXPECT_EQ((*m)[2].raw_value, R"([1, {"d": "]"}])");
  EXPECT_EQ((*m)[3].raw_value, "null");
}

TEST(JsonCallTest, SplitErrorsNameTheOffset) {
  auto m = split_json_object(R"({"a": tru})");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), "offset 6: invalid value");
  m = split_json_object(R"({"a": 1} x)");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), "offset 8: text after the object");
  m = split_json_object(R"({"a" 1})");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), "offset 5: expected ':'");
}

TEST(JsonCallTest, CallErrors) {
  ToolSet tools;
  tools.add(ToolSpec{"f", json::object()});
  EXPECT_EQ(parse_json_call(R"({"name": "g", "arguments": {}})", tools).message(),
            "tool call name 'g': not one of the request's tools");
  EXPECT_EQ(parse_json_call(R"({"arguments": {}})", tools).message(),
            "tool call: missing \"name\"");
  EXPECT_EQ(parse_json_call(R"({"name": "f", "arguments": 3})", tools).message(),
            "tool call arguments: not an object");
  auto ok = parse_json_call(R"({"name": "f"})", tools);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->arguments, "{}");
}

}  // namespace
}  // namespace t9::chat
