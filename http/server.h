#pragma once
// The one HTTP server of Nibble's engine, router and controller API, on cpp-httplib. It owns
// what every API needs the same way:
//   - bind or fail with an error naming the address; an explicit listen backlog (Debian's
//     httplib listens with 5); a fixed pool of worker threads;
//   - request heads checked as they arrive (size, line and header-count caps, malformed or
//     ambiguous headers refused), timeouts for a head, a body and silence, pipelined requests
//     answered in order, and a connection budget in which a connection waiting on a slow client
//     gives its worker up when another needs it (gated_server.h, connection_budget.h);
//   - bearer API keys on every path but the open ones (/health, /metrics by default);
//   - the browser guards of request_guard.h (Host, Origin, write Content-Type) and CORS for the
//     origins explicitly allowed (preflights answered before the key check);
//   - request body limit (413) and errors in one shape (OpenAI's, or the API's own writer).
// Callers add their routes on routes() before bind().
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/api_error.h"
#include "http/api_keys.h"
#include "http/gated_server.h"
#include "http/request_guard.h"
#include "http/request_head.h"

namespace nibble::http {

struct ServerConfig {
  std::string name = "http";  // in logs: "engine", "router", "controller API"
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int threads = 8;
  int listen_backlog = 4096;
  // A client that sends nothing for this long while its request head or body is read, or
  // accepts nothing while the answer is written, is disconnected.
  std::chrono::seconds read_timeout{5};
  std::chrono::seconds write_timeout{30};
  std::chrono::seconds head_timeout{10};       // a whole request head (408 after)
  std::chrono::seconds body_timeout{60};       // a whole request body, from the head's end (408)
  std::chrono::seconds keep_alive_timeout{5};  // idle time between requests on a connection
  int keep_alive_max_requests = 100;
  HeadLimits head_limits;  // head bytes, line bytes, header lines (request_head.h)
  // Connections of one client address that may wait on the bytes of a request for longer than
  // the budget's grace (500 ms) before the longest waiting one is closed; 0 picks a quarter of
  // the workers (at least 1). Nothing is refused: see connection_budget.h.
  int max_pending_connections_per_client = 0;
  std::size_t max_body_bytes = 1u << 20;
  // Origins (scheme://host[:port], or "*") whose pages may call this API cross-origin: CORS
  // headers and preflights for them, and their writes are not refused. Empty: none.
  std::vector<std::string> allowed_origins;
  ApiKeys api_keys;                                               // empty: no authentication
  std::vector<std::string> open_paths = {"/health", "/metrics"};  // no key needed
  std::vector<std::string> write_content_types = {"application/json"};
  // How errors are written; default: OpenAI's body with `code` the status.
  std::function<void(httplib::Response&, const ApiError&)> write_error;
};

// What the default pending-connection cap resolves to for a worker count.
int effective_pending_cap(const ServerConfig& config);

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  httplib::Server& routes() { return *http_; }
  const ServerConfig& config() const { return config_; }

  // Binds; returns the bound port. Throws std::runtime_error naming host:port on failure.
  int bind();
  int port() const { return port_; }
  void listen();  // serves on this thread until stop()
  void start();   // bind() if needed, then serve on a background thread; returns once serving
  void stop();    // idempotent
  bool running() const { return http_->is_running(); }

  // Connections closed so far to give their worker to another (ConnectionBudget).
  std::uint64_t yielded_connections() const { return http_->yielded_connections(); }

 private:
  void install_handlers();
  void write_error(httplib::Response& res, const ApiError& error) const;

  ServerConfig config_;
  std::unique_ptr<GatedServer> http_;
  std::thread thread_;
  int port_ = -1;
};

}  // namespace nibble::http
