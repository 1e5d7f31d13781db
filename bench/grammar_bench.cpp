// Structured output's host cost on the real Qwen3 vocabulary (151,669 tokens): the trie build
// (once per server), a schema's compile (once per distinct schema), the allowed-set walk of each
// new grammar state (once per state: cached after), and the per-token cost once the states are
// cached (key, cache hit, the mask written over a 151,936-entry row, the accept). Build against a
// CPU build's libraries:
//   g++ -O2 -std=c++20 -Isrc bench/grammar_bench.cpp -o /tmp/grammar_bench \
//     build/libtempo9_grammar.a build/libtempo9_tokenizer.a build/libtempo9_gguf.a \
//     build/libtempo9_quant.a build/libtempo9_core.a -lfmt -lpcre2-8 && \
//   /tmp/grammar_bench ../shared/fixtures/tokenizers/qwen3/tokenizer.json
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_filter.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: grammar_bench tokenizer.json\n");
    return 2;
  }
  auto tk = t9::tok::Tokenizer::from_tokenizer_json_file(argv[1]);
  if (!tk.ok()) {
    std::fprintf(stderr, "%s\n", tk.message().c_str());
    return 1;
  }
  const auto t0 = Clock::now();
  const int n = static_cast<int>(tk->n_tokens());
  std::vector<std::string> pieces(n);
  std::vector<char> usable(n);
  for (int t = 0; t < n; ++t) {
    pieces[t] = std::string(tk->piece(t));
    usable[t] = !tk->is_special(t);
  }
  auto trie = std::make_shared<const t9::grammar::TokenTrie>(pieces, usable);
  const auto t1 = Clock::now();
  std::printf("vocabulary %d tokens, trie %zu nodes: built in %.1f ms\n", n, trie->n_nodes(),
              ms(t0, t1));

  const auto schema = t9::grammar::Json::parse(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string"},
      "tags":{"type":"array","items":{"type":"string"}},"score":{"type":"number"}},
      "required":["name","age","email","tags","score"]})");
  const auto t2 = Clock::now();
  auto g = t9::grammar::json_schema_grammar(schema);
  const auto t3 = Clock::now();
  if (!g.ok()) return 1;
  auto grammar = std::make_shared<const t9::grammar::Grammar>(std::move(g).value());
  std::printf("schema compiled in %.2f ms (%zu rules, %zu symbols)\n", ms(t2, t3),
              grammar->n_rules(), grammar->code_size());

  const std::string doc =
      "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"tags\": "
      "[\"math\", \"poetry\", \"engines\"], \"score\": 9.75}";
  auto ids = tk->encode(doc, {false, false});
  if (!ids.ok()) return 1;
  auto cache = std::make_shared<t9::grammar::MaskCache>(256);
  std::vector<float> row(151936, 0.0f);
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: every state walked once; pass 1: all cached
    t9::grammar::TokenFilter f(grammar, trie, {151645}, cache);
    double worst = 0, total = 0;
    for (int32_t id : *ids) {
      const auto a = Clock::now();
      f.mask(row);
      f.accept(id);
      const auto b = Clock::now();
      worst = std::max(worst, ms(a, b));
      total += ms(a, b);
    }
    std::printf("%s: %zu tokens, %.3f ms per token on average, worst %.2f ms (%zu states cached)\n",
                pass == 0 ? "cold (each new state walks the trie)" : "warm (states cached)",
                ids->size(), total / static_cast<double>(ids->size()), worst, cache->size());
  }
  return 0;
}
