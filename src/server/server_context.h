// What the HTTP layer serves from: the engine (through its thread-safe submit/stats), the
// tokenizer and chat template (immutable, shared by all HTTP threads), and facts about the model.
// Built by `tempo9 serve` (apps/cmd_serve.cpp), which owns the model and the backend; the server
// layer never sees them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace t9::server {

class Metrics;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 11435;
  std::string api_key;             // empty: no auth; else Bearer or x-api-key must match
  std::string model_alias;         // the id /v1/models and /api/tags report (default: file stem)
  bool strict_model_names = false; // unknown model names -> the protocol's 404
  size_t max_body_bytes = 32u << 20;
  int n_http_threads = 512;        // one per open connection (streams hold theirs)
  int read_timeout_s = 600;
  int write_timeout_s = 600;
  int default_max_tokens = 4096;   // when a request names none (OpenAI chat, Ollama)
  int max_queued = 1024;           // more requests waiting for the engine -> 503 (overload)
  std::string tool_dialect;        // override of the dialect chosen from the template
  // tool_choice auto: a call the model opens must be well formed (grammar/tool_call_grammar.h's
  // lazy grammar); required calls are checked either way.
  bool tool_grammar = false;
};

// Facts about the loaded model for /v1/models, /api/tags, /api/show.
struct ModelInfo {
  std::string id;                // what clients see (alias or file stem)
  std::string file_path;
  std::string architecture;      // general.architecture
  std::string quantization;      // e.g. "Q4_K_M" from general.file_type, or the main type
  std::string parameter_size;    // e.g. "1.5B"
  int64_t n_params = 0;
  uint64_t file_bytes = 0;
  int n_ctx = 0;                 // the served context length (tokens)
  std::string chat_template_source;
};

struct ServerContext {
  ServerConfig config;
  ModelInfo model;
  engine::Engine* engine = nullptr;
  const tok::Tokenizer* tokenizer = nullptr;
  const chat::ChatTemplate* chat_template = nullptr;  // null: the model has none
  std::string tool_dialect = "none";                   // chosen from the template (or config)
  bool template_thinks = false;  // the template opens <think> itself (Qwen3 style)
  std::vector<engine::TokenId> eog_ids;  // end-of-generation tokens: stop ids for every request
  Metrics* metrics = nullptr;
  // The vocabulary trie and compiled grammars of structured output (shared by HTTP threads).
  std::shared_ptr<StructuredOutputs> structured = std::make_shared<StructuredOutputs>();
};

}  // namespace t9::server
