// The HTTP front: one cpp-httplib server on one port for all three protocols, plus /health and
// /metrics. Each connection gets a thread from a large pool (config.n_http_threads), so a
// long-lived stream never blocks another client; the engine thread does the compute.
#pragma once

#include <atomic>
#include <memory>

#include "core/result.h"
#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace t9::server {

class HttpServer {
 public:
  explicit HttpServer(ServerContext& ctx);
  ~HttpServer();

  // Binds host:port; errors name the address.
  Status bind();
  // Serves until stop(); call after bind().
  void serve();
  void stop();
  // /health answers 503 until the model is loaded and the engine runs.
  void set_ready(bool ready) { ready_.store(ready); }
  int port() const { return port_; }

 private:
  void install_routes();
  ServerContext& ctx_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> ready_{false};
  int port_ = 0;
  int listen_fd_ = -1;  // the listening socket, seen through httplib's socket-options hook
};

}  // namespace t9::server
