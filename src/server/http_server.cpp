#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "server/api/common.h"
#include "server/http_util.h"
#include "server/metrics.h"

namespace t9::server {

HttpServer::HttpServer(ServerContext& ctx) : ctx_(ctx), http_(std::make_unique<httplib::Server>()) {
  const int n = std::max(8, ctx.config.n_http_threads);
  http_->new_task_queue = [n] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  http_->set_payload_max_length(ctx.config.max_body_bytes);
  http_->set_read_timeout(ctx.config.read_timeout_s, 0);
  http_->set_write_timeout(ctx.config.write_timeout_s, 0);
  http_->set_keep_alive_max_count(1000);
  http_->set_socket_options([this](int sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  install_routes();
}

HttpServer::~HttpServer() {
  stop();
}

namespace {

bool authorized(const ServerContext& ctx, const httplib::Request& req) {
  if (ctx.config.api_key.empty()) return true;
  const std::string bearer = "Bearer " + ctx.config.api_key;
  return req.get_header_value("Authorization") == bearer ||
         req.get_header_value("x-api-key") == ctx.config.api_key;
}

}  // namespace

void HttpServer::install_routes() {
  httplib::Server& h = *http_;
  // CORS for browser clients; preflight answered before auth (browsers send no credentials).
  h.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Access-Control-Allow-Origin",
                   req.has_header("Origin") ? req.get_header_value("Origin") : "*");
    res.set_header("Access-Control-Allow-Credentials", "true");
  });
  h.Options(".*", [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers",
                   req.has_header("Access-Control-Request-Headers")
                       ? req.get_header_value("Access-Control-Request-Headers")
                       : "*");
    res.set_header("Access-Control-Max-Age", "86400");
    res.status = 204;
  });
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "OPTIONS" || req.path == "/health" || req.path == "/")
      return httplib::Server::HandlerResponse::Unhandled;
    if (!authorized(ctx_, req)) {
      send_error(res, protocol_for_path(req.path), 401, "invalid or missing API key");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  h.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (ctx_.metrics) ctx_.metrics->count_http_error(res.status);
    if (!res.body.empty()) return;  // an adapter already wrote the protocol's error
    const Protocol p = protocol_for_path(req.path);
    if (res.status == 404)
      send_error(res, p, 404, "no route for " + req.method + " " + req.path);
    else if (res.status == 413)
      send_error(res, p, 413,
                 fmt::format("request body exceeds {} bytes", ctx_.config.max_body_bytes));
    else if (res.status == 405)
      send_error(res, p, 405, "method not allowed");
    else
      send_error(res, p, res.status, "request failed");
  });
  h.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        T9_LOG_ERROR("{} {}: {}", req.method, req.path, what);
        send_error(res, protocol_for_path(req.path), 500, what);
      });
  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_.load())
      send_json(res, {{"status", "ok"}});
    else
      send_json(res, {{"status", "loading"}}, 503);
  });
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Tempo9 is running", "text/plain");
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx_.metrics->render(ctx_.engine->stats()), "text/plain; version=0.0.4");
  });
  api::register_openai(h, ctx_);
  api::register_responses(h, ctx_);
  api::register_anthropic(h, ctx_);
  api::register_ollama(h, ctx_);
  api::register_llama_native(h, ctx_);
}

Status HttpServer::bind() {
  const auto& c = ctx_.config;
  if (c.port == 0) {
    port_ = http_->bind_to_any_port(c.host);
    if (port_ <= 0) return error("cannot bind {}:<any port>", c.host);
  } else {
    if (!http_->bind_to_port(c.host, c.port))
      return error("cannot bind {}:{} (in use?)", c.host, c.port);
    port_ = c.port;
  }
  // Debian's compiled cpp-httplib listens with a backlog of 5: a burst of agents connecting at
  // once (tests/e2e/test_concurrency.py opens 256) overflowed the accept queue and clients got
  // resets. listen() again on the bound socket raises it (Linux caps it at somaxconn).
  constexpr int kListenBacklog = 1024;
  if (listen_fd_ >= 0 && ::listen(listen_fd_, kListenBacklog) != 0)
    T9_LOG_WARN("listen backlog {}: {}", kListenBacklog, std::strerror(errno));
  return {};
}

void HttpServer::serve() {
  http_->listen_after_bind();
}

void HttpServer::stop() {
  if (http_ && http_->is_running()) http_->stop();
}

}  // namespace t9::server
