// Engine behaviour that the data-driven cases cannot express: error positions, unsupported
// constructs, reuse of a parsed template. Expected strings follow jinja2 semantics (checked with
// python jinja2 under transformers' environment when written).
#include <gtest/gtest.h>

#include <thread>

#include "chat/jinja/template.h"

namespace t9::jinja {
namespace {

Value ctx(const char* json) {
  return from_json(nlohmann::ordered_json::parse(json));
}

std::string render_ok(const std::string& src, const char* json = "{}") {
  auto t = Template::parse(src);
  EXPECT_TRUE(t.ok()) << t.message();
  if (!t.ok()) return "";
  auto r = t->render(ctx(json));
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : "";
}

std::string parse_error(const std::string& src) {
  auto t = Template::parse(src);
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.message();
}

std::string render_error(const std::string& src, const char* json = "{}") {
  auto t = Template::parse(src);
  EXPECT_TRUE(t.ok()) << t.message();
  if (!t.ok()) return "";
  auto r = t->render(ctx(json));
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.message();
}

TEST(JinjaEngine, UnsupportedTagNamesLineAndColumn) {
  EXPECT_EQ(parse_error("line one\n  {% include 'x' %}"),
            "line 2, column 6: unsupported or unknown tag 'include'");
  EXPECT_EQ(parse_error("{% for x in xs recursive %}{% endfor %}"),
            "line 1, column 16: recursive for loops are not supported");
  EXPECT_EQ(parse_error("a\nb {{ x|nosuch }}"), "line 2, column 8: no filter named 'nosuch'");
  EXPECT_EQ(parse_error("{{ x is nosuch }}"), "line 1, column 9: no test named 'nosuch'");
}

TEST(JinjaEngine, SyntaxErrorsNamePosition) {
  EXPECT_EQ(parse_error("{% if x %}a"),
            "line 1, column 12: unexpected end of template, expected 'elif'");
  EXPECT_EQ(parse_error("{{ 1 + }}"), "line 1, column 8: unexpected '}}'");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "line 1, column 4: unterminated string literal");
  EXPECT_EQ(parse_error("{# never closed"), "line 1, column 1: Missing end of comment tag");
}

TEST(JinjaEngine, RenderErrorsNamePosition) {
  EXPECT_EQ(render_error("ok\n{{ raise_exception('Roles must alternate') }}"),
            "line 2, column 4: template raised an exception: Roles must alternate");
  EXPECT_EQ(render_error("{{ nope.attr }}"), "line 1, column 8: 'nope' is undefined");
  EXPECT_EQ(render_error("{{ m.missing + 1 }}", R"({"m": {}})"),
            "line 1, column 14: 'dict object' has no attribute 'missing'");
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(1) }}"),
            "line 1, column 21: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(render_error("{{ 'a' + 1 }}"),
            "line 1, column 8: can only concatenate str (not \"int\") to str");
}

TEST(JinjaEngine, UnsupportedPythonFeaturesFailLoudly) {
  // Real Python str methods we do not implement must not render as undefined.
  EXPECT_EQ(render_error("{{ 'a'.zfill(3) }}"),
            "line 1, column 7: str method 'zfill' is not supported");
  EXPECT_EQ(render_error("{{ '%s' % 1 }}"),
            "line 1, column 9: printf-style '%' string formatting is not supported");
}

TEST(JinjaEngine, TemplateIsReusableAndThreadSafe) {
  auto t = Template::parse("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  ASSERT_TRUE(t.ok());
  Value c = ctx(
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})");
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      Value own = ctx(R"({"messages": [{"role": "user", "content": "x"}]})");
      for (int k = 0; k < 200; ++k) outs[size_t(i)] = *t->render(i % 2 ? c : own);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(outs[0], "user:x;");
  EXPECT_EQ(outs[1], "user:a;assistant:b;");
}

TEST(JinjaEngine, JsonInputKeepsKeyOrderAndNumberKinds) {
  EXPECT_EQ(render_ok("{{ d|tojson }} {{ d }}", R"({"d": {"z": 1, "a": 1.0, "m": [true, null]}})"),
            R"({"z": 1, "a": 1.0, "m": [true, null]} {'z': 1, 'a': 1.0, 'm': [True, None]})");
}

TEST(JinjaEngine, FloatReprMatchesPython) {
  EXPECT_EQ(render_ok("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ 123.456 }} "
                      "{{ -0.0 }} {{ 2.0 ** 70 }}"),
            "1e+16 1000000000000000.0 0.0001 1e-05 1.5e-07 123.456 -0.0 1.1805916207174113e+21");
}

TEST(JinjaEngine, MacroRecursionIsBounded) {
  std::string msg = render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_NE(msg.find("macro calls nested too deeply"), std::string::npos) << msg;
}

}  // namespace
}  // namespace t9::jinja
