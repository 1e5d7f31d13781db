// Pieces every protocol adapter uses: errors in each protocol's own shape, JSON responses, and
// streaming a Generation to the client on the HTTP thread (SSE or NDJSON) with cancellation when
// the client goes away.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "server/generation.h"
#include "server/json_fields.h"

namespace t9::server {

enum class Protocol { kOpenAI, kAnthropic, kOllama };

// The protocol a path belongs to (for errors raised before routing: auth, 404, 413).
Protocol protocol_for_path(const std::string& path);

// Sets status and the protocol's error body: OpenAI {"error":{message,type,param,code}},
// Anthropic {"type":"error","error":{type,message}}, Ollama {"error": message}. 429/503 also get
// Retry-After.
void send_error(httplib::Response& res, Protocol p, int status, const std::string& message,
                const std::string& param = "");
void send_json(httplib::Response& res, const Json& body, int status = 200);

// Formats one stream: called with each batch of generation output (the last one has finish set)
// and returns the bytes to send (possibly empty).
class StreamFormatter {
 public:
  virtual ~StreamFormatter() = default;
  virtual std::string begin() { return {}; }
  virtual std::string on_output(const GenOutput& out) = 0;
  // A keep-alive while nothing else is sent (SSE comment or ping event); empty: none (NDJSON).
  virtual std::string keepalive() { return {}; }
};

// Streams `gen` through `fmt` as the chunked response body. The request is cancelled as soon as a
// write fails (client gone); keepalives every second let that be noticed during a long prefill.
void stream_generation(httplib::Response& res, const char* content_type,
                       std::shared_ptr<Generation> gen, std::shared_ptr<StreamFormatter> fmt);

// Runs `gen` to completion, folding every poll into one GenOutput; cancels if the connection is
// closed meanwhile (checked through `alive`).
GenOutput collect_generation(Generation& gen, const std::function<bool()>& alive);

// Milliseconds since the epoch and RFC 3339 UTC ("2026-11-29T12:00:00.123Z") for responses.
int64_t unix_seconds();
std::string rfc3339_now();
std::string random_id(const char* prefix);

}  // namespace t9::server
