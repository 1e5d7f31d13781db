// What the request body's nesting check costs (server/json_fields.cpp's parse_json_object: a
// parser callback on every value) against a plain parse, on an agent turn's body: a ~10k-token
// system prompt and a 40-message history with tool calls (~70 KB), and the same 16 times (~1 MB).
//   g++ -O2 -std=c++20 -Isrc bench/json_parse_bench.cpp -o /tmp/json_parse_bench \
//     build/libtempo9_server.a build/libtempo9_core.a -lfmt && /tmp/json_parse_bench
#include <chrono>
#include <cstdio>
#include <string>

#include "server/json_fields.h"

namespace {

std::string agent_body(int copies) {
  t9::server::Json msgs = t9::server::Json::array();
  const std::string system(40000, 'x');
  for (int c = 0; c < copies; ++c) {
    msgs.push_back({{"role", "system"}, {"content", system}});
    for (int i = 0; i < 40; ++i) {
      msgs.push_back(
          {{"role", "assistant"},
           {"content", "Let me check."},
           {"tool_calls",
            {{{"id", "call_1"},
              {"type", "function"},
              {"function", {{"name", "read_file"}, {"arguments", R"({"path":"src/a.cpp"})"}}}}}}});
      msgs.push_back(
          {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", std::string(600, 'y')}});
    }
  }
  return t9::server::Json{{"model", "m"}, {"messages", msgs}, {"max_tokens", 100}}.dump();
}

double us_per_parse(const std::string& body, bool checked, int reps) {
  const auto t0 = std::chrono::steady_clock::now();
  size_t n = 0;
  for (int r = 0; r < reps; ++r) {
    if (checked) {
      std::string err;
      n += t9::server::parse_json_object(body, err)->size();
    } else {
      n += t9::server::Json::parse(body, nullptr, false).size();
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (n == 0) std::printf("impossible\n");
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
}

}  // namespace

int main() {
  for (int copies : {1, 16}) {
    const std::string body = agent_body(copies);
    for (int round = 0; round < 2; ++round) {  // the first round warms up
      const double plain = us_per_parse(body, false, 200 / copies);
      const double checked = us_per_parse(body, true, 200 / copies);
      if (round == 1)
        std::printf("%zu-byte body: plain parse %.1f us, with the nesting check %.1f us (%.2fx)\n",
                    body.size(), plain, checked, checked / plain);
    }
  }
  return 0;
}
