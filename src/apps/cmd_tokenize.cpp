// `tempo9 tokenize` and `tempo9 detokenize`: the tokenizer from the command line, for debugging
// prompts and for the Python parity tests (--jsonl: one JSON string or id array per line).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/command.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace t9::apps {
namespace {

using json = nlohmann::json;

struct Source {
  std::string model;           // --model FILE.gguf
  std::string tokenizer_json;  // --tokenizer-json FILE
};

void add_source(CLI::App& sub, Source& src) {
  auto* m = sub.add_option("--model", src.model, "GGUF model file (its vocabulary is used)");
  auto* j = sub.add_option("--tokenizer-json", src.tokenizer_json, "Hugging Face tokenizer.json");
  m->excludes(j);
  j->excludes(m);
}

std::optional<tok::Tokenizer> load(const Source& src) {
  if (src.model.empty() == src.tokenizer_json.empty()) {
    std::fprintf(stderr, "error: give exactly one of --model or --tokenizer-json\n");
    return std::nullopt;
  }
  auto r = src.model.empty() ? tok::Tokenizer::from_tokenizer_json_file(src.tokenizer_json)
                             : tok::Tokenizer::from_gguf_file(src.model);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.message().c_str());
    return std::nullopt;
  }
  return std::move(r).value();
}

std::string read_stdin() {
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

// Prints bytes for a human: valid UTF-8 as is, other bytes as \xNN.
std::string printable(std::string_view s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

struct TokenizeArgs {
  Source src;
  std::optional<std::string> text;
  bool ids_only = false, as_json = false, jsonl = false, no_special = false, no_bos = false;
  int time_runs = 0;  // --time N: benchmark encode() N times instead of printing ids
};

// Times encode() of `text` `runs` times on this thread; the first run has a cold word cache.
// best_ms: the tokenizer itself (fragment cache off); cached_ms: the same text re-sent with the
// fragment cache on (an agent's system prompt from its second turn).
int run_timing(tok::Tokenizer& tk, const std::string& text, tok::EncodeOptions opt, int runs) {
  double best_ms[2] = {1e300, 1e300}, first_ms = 0;
  size_t n_tokens = 0;
  for (int cached = 0; cached < 2; ++cached) {
    tk.set_fragment_cache_bytes(cached ? tok::FragmentCacheConfig{}.max_bytes : 0);
    for (int i = 0; i < runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = tk.encode(text, opt);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) {
        std::fprintf(stderr, "error: %s\n", r.message().c_str());
        return 1;
      }
      n_tokens = r.value().size();
      if (i == 0 && !cached) first_ms = ms;
      best_ms[cached] = std::min(best_ms[cached], ms);
    }
  }
  std::printf("%s\n", json{{"bytes", text.size()},
                           {"tokens", n_tokens},
                           {"first_ms", first_ms},
                           {"best_ms", best_ms[0]},
                           {"cached_ms", best_ms[1]},
                           {"runs", runs}}
                          .dump()
                          .c_str());
  return 0;
}

int run_jsonl(const tok::Tokenizer& tk, tok::EncodeOptions opt) {
  std::string line;
  while (std::getline(std::cin, line)) {
    json in = json::parse(line, nullptr, false);
    if (in.is_discarded() || !in.is_string()) {
      std::fprintf(stderr, "error: --jsonl input line is not a JSON string\n");
      return 1;
    }
    auto r = tk.encode(in.get<std::string>(), opt);
    json out = r.ok() ? json(r.value()) : json{{"error", r.message()}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}

int run_tokenize(const TokenizeArgs& a) {
  auto tk = load(a.src);
  if (!tk) return 1;
  const tok::EncodeOptions opt{.add_special = !a.no_bos, .parse_special = !a.no_special};
  if (a.jsonl) return run_jsonl(*tk, opt);
  const std::string text = a.text ? *a.text : read_stdin();
  if (a.time_runs > 0) return run_timing(*tk, text, opt, a.time_runs);
  auto r = tk->encode(text, opt);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.message().c_str());
    return 1;
  }
  const auto& ids = r.value();
  if (a.as_json) {
    json pieces = json::array();
    for (auto id : ids) pieces.push_back(std::string(tk->piece(id)));
    // Pieces can be part of a UTF-8 sequence: those bytes print as U+FFFD.
    const json out{{"ids", ids}, {"pieces", pieces}};
    std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  } else if (a.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  } else {
    for (auto id : ids) std::printf("%8d  %s\n", id, printable(tk->piece(id)).c_str());
    std::printf("%zu tokens\n", ids.size());
  }
  return 0;
}

struct DetokenizeArgs {
  Source src;
  std::vector<std::string> ids;
  bool skip_special = false, stream = false, jsonl = false;
};

// Decodes `ids` whole (decode) or token by token (StreamDecoder) into `text`.
Status decode_ids(const tok::Tokenizer& tk, const std::vector<tok::TokenId>& ids,
                  tok::DecodeOptions opt, bool stream, std::string& text) {
  if (!stream) {
    T9_ASSIGN_OR_RETURN(text, tk.decode(ids, opt));
    return {};
  }
  tok::StreamDecoder dec(tk, opt);
  for (auto id : ids) T9_TRY(dec.push(id, text));
  dec.finish(text);
  return {};
}

std::string hex(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

// Batch: each stdin line a JSON id array; each output {"hex": decode, "stream_hex": streamed}
// (hex, because decoded bytes need not be valid UTF-8).
int run_detokenize_jsonl(const tok::Tokenizer& tk, tok::DecodeOptions opt) {
  std::string line;
  while (std::getline(std::cin, line)) {
    json in = json::parse(line, nullptr, false);
    if (in.is_discarded() || !in.is_array()) {
      std::fprintf(stderr, "error: --jsonl input line is not a JSON array of ids\n");
      return 1;
    }
    std::vector<tok::TokenId> ids;
    for (const auto& v : in) ids.push_back(v.get<tok::TokenId>());
    std::string whole, streamed;
    const Status a = decode_ids(tk, ids, opt, false, whole);
    const Status b = decode_ids(tk, ids, opt, true, streamed);
    json out = a.ok() && b.ok() ? json{{"hex", hex(whole)}, {"stream_hex", hex(streamed)}}
                                : json{{"error", a.ok() ? b.message() : a.message()}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}

int run_detokenize(const DetokenizeArgs& a) {
  auto tk = load(a.src);
  if (!tk) return 1;
  if (a.jsonl) return run_detokenize_jsonl(*tk, {.skip_special = a.skip_special});
  std::vector<std::string> words = a.ids;
  if (words.empty()) {
    std::istringstream in(read_stdin());
    words.assign(std::istream_iterator<std::string>(in), {});
  }
  std::vector<tok::TokenId> ids;
  for (const auto& w : words) {
    try {
      size_t used = 0;
      const long v = std::stol(w, &used);
      if (used != w.size()) throw std::invalid_argument(w);
      ids.push_back(static_cast<tok::TokenId>(v));
    } catch (const std::exception&) {
      std::fprintf(stderr, "error: '%s' is not a token id\n", w.c_str());
      return 1;
    }
  }
  const tok::DecodeOptions opt{.skip_special = a.skip_special};
  std::string text;
  if (auto st = decode_ids(*tk, ids, opt, a.stream, text); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const bool registered_tokenize = register_command(Command{
    "tokenize", "Print the token ids of a text (from --text or stdin)",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<TokenizeArgs>();
      add_source(sub, a->src);
      sub.add_option("--text", a->text, "Text to tokenize (default: all of stdin)");
      sub.add_flag("--ids", a->ids_only, "Print only the ids, space-separated");
      sub.add_flag("--json", a->as_json, "Print {\"ids\": [...], \"pieces\": [...]}");
      sub.add_flag("--jsonl", a->jsonl,
                   "Batch: each stdin line a JSON string, each output an id array");
      sub.add_flag("--no-special", a->no_special, "Treat special-token strings as plain text");
      sub.add_option("--time", a->time_runs, "Benchmark: encode N times, print timings as JSON");
      sub.add_flag("--no-bos", a->no_bos, "Do not add BOS/EOS even where the vocab asks for them");
      return [a] { return run_tokenize(*a); };
    }});

const bool registered_detokenize = register_command(Command{
    "detokenize", "Print the text of token ids (arguments or stdin)",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<DetokenizeArgs>();
      add_source(sub, a->src);
      sub.add_option("ids", a->ids, "Token ids (default: whitespace-separated on stdin)");
      sub.add_flag("--skip-special", a->skip_special, "Drop control tokens");
      sub.add_flag("--stream", a->stream, "Decode token by token with the streaming decoder");
      sub.add_flag("--jsonl", a->jsonl,
                   "Batch: each stdin line an id array, each output {hex, stream_hex}");
      return [a] { return run_detokenize(*a); };
    }});

}  // namespace
}  // namespace t9::apps
