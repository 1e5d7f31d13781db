#include "server/http_util.h"

#include <chrono>
#include <ctime>
#include <random>

namespace t9::server {

Protocol protocol_for_path(const std::string& path) {
  if (path.starts_with("/api/")) return Protocol::kOllama;
  if (path.starts_with("/v1/messages")) return Protocol::kAnthropic;
  return Protocol::kOpenAI;
}

namespace {

const char* openai_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 500: case 503: return "server_error";
    default: return "invalid_request_error";
  }
}

const char* anthropic_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    case 500: return "api_error";
    default: return "invalid_request_error";
  }
}

}  // namespace

void send_error(httplib::Response& res, Protocol p, int status, const std::string& message,
                const std::string& param) {
  Json body;
  switch (p) {
    case Protocol::kOpenAI:
      body["error"] = {{"message", message},
                       {"type", openai_type(status)},
                       {"param", param.empty() ? Json() : Json(param)},
                       {"code", status == 401 ? Json("invalid_api_key") : Json()}};
      break;
    case Protocol::kAnthropic:
      body = {{"type", "error"}, {"error", {{"type", anthropic_type(status)}, {"message", message}}}};
      break;
    case Protocol::kOllama:
      body = {{"error", message}};
      break;
  }
  if (status == 429 || status == 503) res.set_header("Retry-After", "1");
  send_json(res, body, status);
}

void send_json(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void stream_generation(httplib::Response& res, const char* content_type,
                       std::shared_ptr<Generation> gen, std::shared_ptr<StreamFormatter> fmt) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      content_type,
      [gen, fmt](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
        if (!write(fmt->begin())) {
          gen->cancel();
          return false;
        }
        auto last_write = std::chrono::steady_clock::now();
        for (;;) {
          GenOutput out;
          const bool done = gen->poll(out, std::chrono::milliseconds(100));
          std::string bytes = fmt->on_output(out);
          const auto now = std::chrono::steady_clock::now();
          if (bytes.empty() && now - last_write > std::chrono::seconds(1)) bytes = fmt->keepalive();
          if (!bytes.empty()) {
            if (!sink.is_writable() || !write(bytes)) {
              gen->cancel();  // client gone: the engine frees the request within one step
              return false;
            }
            last_write = now;
          }
          if (done) {
            sink.done();
            return true;
          }
        }
      },
      [gen](bool) {
        if (!gen->finished()) gen->cancel();
      });
}

GenOutput collect_generation(Generation& gen, const std::function<bool()>& alive) {
  GenOutput all;
  for (;;) {
    const bool done = gen.poll(all, std::chrono::milliseconds(200));
    if (done) return all;
    if (alive && !alive()) {
      gen.cancel();
    }
  }
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rfc3339_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms % 1000));
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

}  // namespace t9::server
