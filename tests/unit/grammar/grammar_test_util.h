// Grammar test helpers: a grammar that must compile, shared for matchers, and whether a grammar
// admits a whole text.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace t9::grammar::testing {

// Null (and a test failure) when g is an error.
inline std::shared_ptr<const Grammar> compiled(Result<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.message();
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

// The grammar takes every byte of `text` and the text is a whole sentence.
inline bool admits(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.accepting();
}

}  // namespace t9::grammar::testing
