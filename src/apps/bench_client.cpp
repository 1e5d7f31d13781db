#include "apps/bench_client.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>

namespace t9::apps::bench {
namespace {

using Json = nlohmann::json;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool is_loopback_host(const std::string& h) {
  if (h == "localhost" || h == "::1") return true;
  // 127.0.0.0/8 written as a dotted quad.
  int parts = 0;
  size_t i = 0;
  while (i <= h.size()) {
    const size_t dot = std::min(h.find('.', i), h.size());
    int v = -1;
    auto [p, ec] = std::from_chars(h.data() + i, h.data() + dot, v);
    if (ec != std::errc() || p != h.data() + dot || v < 0 || v > 255) return false;
    if (parts == 0 && v != 127) return false;
    ++parts;
    i = dot + 1;
  }
  return parts == 4;
}

// Usage may come as {"prompt_tokens":..,"completion_tokens":..,"prompt_tokens_details":{...}}.
void read_usage(const Json& u, RequestRecord& r) {
  if (!u.is_object()) return;
  if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
    r.prompt_tokens = u["prompt_tokens"].get<int64_t>();
  if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
    r.completion_tokens = u["completion_tokens"].get<int64_t>();
  r.cached_tokens = 0;  // a server that reports no details cached nothing we can see
  auto d = u.find("prompt_tokens_details");
  if (d != u.end() && d->is_object() && d->contains("cached_tokens") &&
      (*d)["cached_tokens"].is_number_integer())
    r.cached_tokens = (*d)["cached_tokens"].get<int64_t>();
}

// Applies one `data:` payload of a chat.completion.chunk stream. Returns false at [DONE].
bool apply_payload(const std::string& payload, Clock::time_point t_req, RequestRecord& r) {
  if (payload == "[DONE]") return false;
  Json j = Json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (r.error.empty())
      r.error = "stream: a data event is not a JSON object: " + payload.substr(0, 120);
    return true;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (r.error.empty()) r.error = "stream error event: " + e->dump().substr(0, 300);
    return true;
  }
  if (auto u = j.find("usage"); u != j.end()) read_usage(*u, r);
  auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array() || ch->empty()) return true;
  const Json& c = (*ch)[0];
  if (c.contains("finish_reason") && c["finish_reason"].is_string())
    r.finish_reason = c["finish_reason"].get<std::string>();
  auto d = c.find("delta");
  if (d == c.end() || !d->is_object()) return true;
  std::string text;
  for (const char* key : {"content", "reasoning_content"})
    if (d->contains(key) && (*d)[key].is_string()) text += (*d)[key].get<std::string>();
  const bool tool = d->contains("tool_calls") && (*d)["tool_calls"].is_array();
  if (text.empty() && !tool) return true;
  const double t = ms_between(t_req, Clock::now());
  if (r.ttft_ms < 0) r.ttft_ms = t;
  r.chunk_ms.push_back(t);
  r.reply += text;
  return true;
}

}  // namespace

Result<Target> parse_loopback_url(const std::string& url) {
  const std::string scheme = "http://";
  if (!url.starts_with(scheme))
    return error("--url '{}': only http:// loopback URLs are supported", url);
  std::string rest = url.substr(scheme.size());
  if (rest.ends_with("/")) rest.pop_back();
  if (rest.find('/') != std::string::npos)
    return error("--url '{}': give the server root (http://HOST:PORT), not a path", url);
  Target t;
  t.url = url;
  std::string port_text;
  if (rest.starts_with("[")) {  // [::1]:8080
    const size_t close = rest.find(']');
    if (close == std::string::npos) return error("--url '{}': unterminated [ipv6] host", url);
    t.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return error("--url '{}': expected ':' after ']'", url);
      port_text = rest.substr(close + 2);
    }
  } else {
    const size_t colon = rest.find(':');
    t.host = rest.substr(0, colon);
    if (colon != std::string::npos) port_text = rest.substr(colon + 1);
  }
  t.port = 80;
  if (!port_text.empty()) {
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), t.port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || t.port < 1 ||
        t.port > 65535)
      return error("--url '{}': port '{}' is not a number in 1..65535", url, port_text);
  }
  if (!is_loopback_host(t.host))
    return error(
        "--url '{}': host '{}' is not loopback (localhost, 127.x.x.x, [::1]); the bench only "
        "loads servers on this machine",
        url, t.host);
  return t;
}

std::vector<double> RequestRecord::itl_ms() const {
  std::vector<double> out;
  for (size_t i = 1; i < chunk_ms.size(); ++i) out.push_back(chunk_ms[i] - chunk_ms[i - 1]);
  return out;
}

Json to_json(const RequestRecord& r) {
  return {{"target", r.target},
          {"round", r.round},
          {"agent", r.agent},
          {"turn", r.turn},
          {"approx_tokens_sent", r.approx_tokens_sent},
          {"start_ms", r.start_ms},
          {"ttft_ms", r.ttft_ms},
          {"e2e_ms", r.e2e_ms},
          {"chunk_ms", r.chunk_ms},
          {"itl_ms", r.itl_ms()},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_tokens", r.cached_tokens},
          {"completion_tokens", r.completion_tokens},
          {"finish_reason", r.finish_reason},
          {"http_status", r.http_status},
          {"error", r.error.empty() ? Json() : Json(r.error)}};
}

std::vector<std::string> SseSplitter::feed(const char* data, size_t n) {
  buf_.append(data, n);
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t nl = buf_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(buf_.data() + start, nl - start);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.starts_with("data:")) {
      line.remove_prefix(5);
      if (line.starts_with(' ')) line.remove_prefix(1);
      out.emplace_back(line);
    }
    start = nl + 1;
  }
  buf_.erase(0, start);
  return out;
}

struct StreamClient::Impl {
  explicit Impl(const Target& t) : cli(t.host, t.port) {
    // A fresh connection per request: llama-server may close a kept-alive socket between an
    // agent's turns, which would surface as a spurious read error on the next request.
    cli.set_keep_alive(false);
    cli.set_connection_timeout(5, 0);
  }
  httplib::Client cli;
};

StreamClient::StreamClient(const Target& target) : impl_(new Impl(target)) {}
StreamClient::~StreamClient() {
  delete impl_;
}

void StreamClient::chat(const Json& body, Clock::time_point t0, Clock::time_point deadline,
                        RequestRecord& r) {
  const auto t_req = Clock::now();
  r.start_ms = ms_between(t0, t_req);
  const double left_s = std::max(1.0, ms_between(t_req, deadline) / 1000.0);
  impl_->cli.set_read_timeout(static_cast<time_t>(left_s) + 1, 0);
  SseSplitter sse;
  std::string raw;  // kept only for error messages of non-200 answers
  bool done = false, past_deadline = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Accept", "text/event-stream"}};
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    r.http_status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (r.http_status != 200) {
      raw.append(data, std::min<size_t>(n, 2000));
      return true;
    }
    for (const std::string& p : sse.feed(data, n))
      if (!apply_payload(p, t_req, r)) done = true;
    if (Clock::now() > deadline) past_deadline = true;
    return !past_deadline;
  };
  auto res = impl_->cli.send(req);
  r.e2e_ms = ms_between(t_req, Clock::now());
  if (!r.error.empty()) return;
  if (past_deadline)
    r.error = "stopped at the --max-seconds deadline";
  else if (!res)
    r.error = "HTTP: " + httplib::to_string(res.error());
  else if (r.http_status != 200)
    r.error = fmt::format("HTTP {}: {}", r.http_status, raw.substr(0, 300));
  else if (!done)
    r.error = "stream ended without [DONE]";
  else if (r.prompt_tokens < 0 || r.completion_tokens < 0)
    r.error = "no usage in the stream";
}

}  // namespace t9::apps::bench
