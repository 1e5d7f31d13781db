// Data-driven engine tests: every case in tests/data/chat/jinja_cases.json carries the output of
// transformers' jinja2 environment (tests/py/chat/test_jinja_cases.py keeps the file honest), and
// the engine must produce exactly those bytes, or fail where jinja2 raises.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/jinja/template.h"

namespace t9::jinja {
namespace {

nlohmann::ordered_json load_cases() {
  std::ifstream f(std::string(TEMPO9_SOURCE_DIR) + "/tests/data/chat/jinja_cases.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::ordered_json::parse(ss.str());
}

TEST(JinjaCases, MatchJinja2) {
  auto cases = load_cases();
  ASSERT_GT(cases.size(), 80u);
  int n_checked = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string src = c["template"].get<std::string>();
    auto tmpl = Template::parse(src);
    Result<std::string> out =
        tmpl.ok() ? tmpl->render(from_json(c["context"])) : Result<std::string>(tmpl.error());
    if (c.value("error", false)) {
      EXPECT_FALSE(out.ok()) << "jinja2 raised " << c["python_error"] << " but we rendered "
                             << (out.ok() ? *out : "");
    } else {
      ASSERT_TRUE(out.ok()) << out.message();
      EXPECT_EQ(*out, c["expected"].get<std::string>());
    }
    ++n_checked;
  }
  EXPECT_EQ(n_checked, int(cases.size()));
}

}  // namespace
}  // namespace t9::jinja
