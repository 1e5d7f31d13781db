// Generation: one request's life on its HTTP thread. It submits a GenerateRequest to the engine,
// then turns the engine's TokenEvents into protocol-neutral output: detokenized text (complete
// UTF-8 only), stop strings cut out (partial matches held back), and — for chat — content,
// reasoning and tool-call events from chat::ChatOutputParser. Protocol adapters only format what
// comes out of poll().
//
// Stop strings are found here, on the HTTP thread, not in the engine: when one appears the request
// is cancelled (the engine frees its blocks within a step) and reported as finished by "stop";
// tokens the engine made after the stop string are dropped and not counted.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/tool_calls/chat_output_parser.h"
#include "engine/token_channel.h"
#include "server/server_context.h"
#include "tokenizer/stream_decoder.h"

namespace t9::server {

struct GenerationSpec {
  std::vector<engine::TokenId> prompt;
  engine::SamplingParams sampling;
  int max_tokens = 256;
  bool ignore_eos = false;        // keep generating past end-of-generation tokens (llama-server's)
  std::vector<std::string> stop;  // stop strings
  int n_top_logprobs = -1;        // -1: no logprobs; 0..20: logprob of each token + top-n
  bool parse_chat = false;        // false: all text is content (completions APIs)
  chat::ChatParserConfig parser;  // used when parse_chat
  std::shared_ptr<const chat::ToolSet> tools;
  OutputFormat format;   // structured output (response_format, Ollama's format)
  std::string protocol;  // "openai", "anthropic", "ollama": for the request log line
};

struct TokenLogprob {
  std::string text;  // the token's bytes (may be partial UTF-8)
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;
  engine::TokenId id = -1;               // the token
  std::vector<engine::TokenId> top_ids;  // top's tokens, in order
};

enum class Finish { kNone, kStop, kLength, kStopString, kCancelled, kError };

struct GenOutput {
  std::vector<chat::ChatEvent> events;  // content / reasoning / tool-call events, in order
  std::vector<TokenLogprob> logprobs;   // one per token consumed in this poll
  std::vector<engine::TokenId> tokens;  // the ids of those tokens (stop tokens excluded)
  Finish finish = Finish::kNone;        // set once, on the last poll
  std::string stop_string;              // the stop string that matched (kStopString)
  std::string error;                    // kError
  engine::Usage usage;                  // final counts (valid when finish != kNone)
};

class Generation {
 public:
  // Validates and submits; errors name the field ("max_tokens: ...").
  static Result<std::unique_ptr<Generation>> start(ServerContext& ctx, GenerationSpec spec);
  ~Generation();  // cancels the engine request if it is still running

  // Waits up to `timeout` for progress and appends it to `out` (out is not cleared). Returns true
  // once the generation finished (out.finish set). Calling it again after that is a no-op.
  bool poll(GenOutput& out, std::chrono::milliseconds timeout);
  // Client went away: the engine drops the request within one step.
  void cancel();
  bool finished() const { return finished_; }
  uint64_t id() const { return id_; }
  double ttft_ms() const { return ttft_ms_; }
  int n_prompt_tokens() const { return static_cast<int>(spec_.prompt.size()); }

 private:
  Generation(ServerContext& ctx, GenerationSpec spec);
  void on_token(const engine::TokenEvent& ev, GenOutput& out);
  void emit_text(std::string text, GenOutput& out);
  void finish(Finish f, GenOutput& out, const engine::Usage& usage);
  void log_line() const;

  ServerContext& ctx_;
  GenerationSpec spec_;
  std::shared_ptr<engine::TokenChannel> channel_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::optional<chat::ChatOutputParser> parser_;
  tok::StreamDecoder decoder_;
  uint64_t id_ = 0;
  std::string held_;  // decoded text that may be the start of a stop string
  int n_generated_ = 0;
  bool finished_ = false;
  bool stopped_by_string_ = false;
  std::string matched_stop_;
  Finish finish_ = Finish::kNone;
  engine::Usage usage_;
  std::chrono::steady_clock::time_point t_start_;
  double ttft_ms_ = 0;
  double total_ms_ = 0;
};

const char* finish_name(Finish f);

}  // namespace t9::server
