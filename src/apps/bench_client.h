// `tempo9 bench` HTTP side: loopback targets, and one streaming OpenAI chat request timed chunk by
// chunk. Times are wall-clock (steady_clock) as the client sees them, so they include HTTP and
// JSON costs of both ends, the way an agent experiences the server.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace t9::apps::bench {

using Clock = std::chrono::steady_clock;

struct Target {
  std::string label;  // "A" / "B" in reports
  std::string url;    // as given
  std::string host;   // loopback host as given (127.0.0.1, localhost, ::1)
  int port = 0;
  std::string model;  // "model" field of the requests
};

// Accepts http://HOST[:PORT][/] where HOST is loopback (localhost, 127.0.0.0/8, [::1]); anything
// else (another host, https, a path) is an error saying why: the bench must not load remote
// servers.
Result<Target> parse_loopback_url(const std::string& url);

// One request as measured. Token counts are the server's usage numbers (-1: not reported).
struct RequestRecord {
  std::string target;                  // Target::label
  int round = 0, agent = 0, turn = 0;  // turn is 1-based
  int approx_tokens_sent = 0;          // approx_tokens() of the messages sent
  double start_ms = 0;                 // since the run started
  double ttft_ms = -1;           // to the first chunk carrying generated text (-1: none arrived)
  double e2e_ms = -1;            // to the end of the stream
  std::vector<double> chunk_ms;  // arrival of each text chunk, since the request started
  int64_t prompt_tokens = -1, cached_tokens = -1, completion_tokens = -1;
  std::string finish_reason;
  std::string reply;  // the generated text, re-sent in the next turn
  int http_status = 0;
  std::string error;  // empty: success

  bool ok() const { return error.empty(); }
  // Gaps between consecutive text chunks (inter-token latencies when one token per chunk).
  std::vector<double> itl_ms() const;
};

nlohmann::json to_json(const RequestRecord& r);

// Sends POST /v1/chat/completions with `body` (which must ask for streaming with usage) and
// records the stream. Never throws; failures (connect, HTTP status, an error event, no usage, the
// deadline) land in RequestRecord::error. One connection per request; one client per thread.
class StreamClient {
 public:
  explicit StreamClient(const Target& target);
  ~StreamClient();
  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  // `record` arrives with its identity fields set; `t0` is the run's start for start_ms.
  void chat(const nlohmann::json& body, Clock::time_point t0, Clock::time_point deadline,
            RequestRecord& record);

 private:
  struct Impl;
  Impl* impl_;
};

// Feeds SSE bytes and reports each complete `data:` payload; exposed for the stream parser's
// reuse by both servers' dialects (LF or CRLF line ends, comments, multi-line events).
class SseSplitter {
 public:
  // Appends bytes; returns the data payloads of the events completed by them.
  std::vector<std::string> feed(const char* data, size_t n);

 private:
  std::string buf_;
};

}  // namespace t9::apps::bench
