// libFuzzer target for structured output's untrusted input: a client's JSON schema or GBNF
// grammar. The input's first line is a schema (any bytes; most are not JSON) or "gbnf:" and a
// grammar (line breaks as \x01), the rest bytes fed to the compiled grammar's matcher. Invariants:
// parsing or compiling never crashes (errors are messages); a compiled grammar's matcher takes a
// byte exactly when next_bytes() said it could; a refused byte leaves the state unchanged; the
// allowed tokens of a small vocabulary equal trying each token. Run (scripts/fuzz.sh builds only
// the GGUF targets):
//   cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++
//   ninja -C build-fuzz grammar_fuzz && build-fuzz/grammar_fuzz -max_len=512 CORPUS_DIR
// A seed is a schema on its first line and bytes after it, e.g.
//   {"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}\n{"a": 12}
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_filter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  const std::string_view schema_text = in.substr(0, nl);
  const std::string_view bytes =
      nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  t9::Result<t9::grammar::Grammar> g = t9::error("no grammar");
  if (schema_text.starts_with("gbnf:")) {  // a GBNF grammar, its line breaks written as \x01
    std::string text(schema_text.substr(5));
    for (char& c : text) c = c == '\x01' ? '\n' : c;
    g = t9::grammar::gbnf_grammar(text);
  } else {
    const t9::grammar::Json schema =
        t9::grammar::Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return 0;
    g = t9::grammar::json_schema_grammar(schema);
  }
  if (!g.ok()) {
    T9_CHECK(!g.message().empty(), "a grammar error without a message");
    return 0;
  }
  auto grammar = std::make_shared<const t9::grammar::Grammar>(std::move(g).value());
  t9::grammar::GrammarMatcher m(grammar);
  static const auto trie = [] {
    std::vector<std::string> pieces{
        "{",     "}",   "[",   "]",  "\"", ":",        ",",    " ",     "\n",
        "0",     "1",   "-",   ".",  "e",  "a",        "true", "false", "null",
        "\"a\"", "{\"", "\":", "\\", "u",  "\xc3\xa9", "12",   "\": \""};
    return std::make_shared<const t9::grammar::TokenTrie>(pieces,
                                                          std::vector<char>(pieces.size(), 1));
  }();
  for (size_t i = 0; i < bytes.size() && i < 256; ++i) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    const bool expected = m.next_bytes().has(b);
    const std::string before = m.key();
    const bool took = m.accept(std::string_view(&bytes[i], 1));
    T9_CHECK(took == expected, "byte {}: next_bytes() says {}, accept() {}", b, expected, took);
    if (!took) T9_CHECK(m.key() == before, "a refused byte {} changed the state", b);
    if (i % 16 == 0) {
      const t9::grammar::TokenBits got = t9::grammar::allowed_tokens(m, *trie);
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        t9::grammar::GrammarMatcher copy = m;
        T9_CHECK(((got[0] >> t) & 1) == static_cast<uint64_t>(copy.accept(trie->piece(t))),
                 "token {} ('{}'): the trie walk and trying the token disagree", t, trie->piece(t));
      }
    }
  }
  return 0;
}
