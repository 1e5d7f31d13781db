#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace t9::tok {

namespace {

// GPT-2's pattern (also Hugging Face ByteLevel(use_regex=true)).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 / Qwen2 with the case-insensitive contractions spelled out, as llama.cpp does, so that
// case folding (e.g. U+017F LONG S folding to 's') cannot make them match more than ASCII.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Regex {
  pcre2_code* code = nullptr;
};

// Per-thread match data and JIT stack: matching is then allocation-free and thread-safe.
struct ThreadScratch {
  pcre2_match_data* md = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* mctx = nullptr;
  ThreadScratch() {
    md = pcre2_match_data_create(1, nullptr);
    // Long whitespace runs make `\s+(?!\S)` backtrack once per character: give the JIT room.
    stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(mctx, nullptr, stack);
  }
  ~ThreadScratch() {
    pcre2_match_context_free(mctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};

ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace

std::vector<std::string> pre_patterns(PreKind kind) {
  switch (kind) {
    case PreKind::kGpt2:
      return {kGpt2};
    case PreKind::kLlama3:
      return {kLlama3};
    case PreKind::kQwen2:
      return {kQwen2};
    case PreKind::kSmollm:
      return {R"(\p{N})", kGpt2};
    case PreKind::kDefault:
      return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
    case PreKind::kCustom:
      return {};
  }
  return {};
}

struct PreTokenizer::Impl {
  std::vector<Regex> regexes;
  ~Impl() {
    for (auto& r : regexes) pcre2_code_free(r.code);
  }
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::create(const std::vector<std::string>& patterns) {
  PreTokenizer p;
  p.impl_ = std::make_unique<Impl>();
  for (const auto& pat : patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return error("pre-tokenizer regex '{}': {} at offset {}", pat, reinterpret_cast<char*>(msg),
                   err_off);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT fails
    p.impl_->regexes.push_back(Regex{code});
  }
  return p;
}

namespace {

// Splits one piece by one regex into matches and the gaps between them.
Status split_one(const Regex& re, std::string_view piece, std::vector<std::string_view>& out) {
  auto& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t pos = 0, gap_start = 0;
  while (pos < piece.size()) {
    const int rc =
        pcre2_match(re.code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, s.md, s.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      return error("pre-tokenizer: regex match failed at byte {}: {}", pos,
                   reinterpret_cast<char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    const size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: none of our patterns produce one, but never loop forever
      if (b >= piece.size()) break;
      pos = b + utf8_len(static_cast<uint8_t>(piece[b]));
      continue;
    }
    if (b > gap_start) out.push_back(piece.substr(gap_start, b - gap_start));
    out.push_back(piece.substr(b, e - b));
    pos = gap_start = e;
  }
  if (gap_start < piece.size()) out.push_back(piece.substr(gap_start));
  return {};
}

}  // namespace

Status PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return {};
  const size_t first = out.size();
  out.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& re : impl_->regexes) {
    next.clear();
    for (size_t i = first; i < out.size(); ++i) T9_TRY(split_one(re, out[i], next));
    out.resize(first);
    out.insert(out.end(), next.begin(), next.end());
  }
  return {};
}

}  // namespace t9::tok
