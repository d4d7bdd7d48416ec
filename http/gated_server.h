#pragma once
// httplib's server with our own connection loop: each accepted connection is read through a
// ConnectionStream (bounded, checked request heads; timeouts for head, body and silence;
// pipelined requests kept) and counted in a ConnectionBudget (a connection waiting on a slow
// client gives its worker up when another connection needs it). httplib still parses each
// checked request and runs the routes: the loop calls its process_request() per request.
#include <httplib.h>

#include <atomic>
#include <functional>
#include <string>

#include "http/api_error.h"
#include "http/connection_budget.h"
#include "http/connection_stream.h"
#include "http/request_head.h"

namespace nibble::http {

struct ConnectionPolicy {
  std::string name = "http";  // in logs
  int workers = 8;
  int max_waiting_per_peer = 2;  // see ConnectionBudget
  std::chrono::milliseconds grace{500};
  int keep_alive_max_requests = 100;
  StreamTimeouts timeouts;
  HeadLimits head_limits;
  // Writes a refusal (a head over a limit, malformed, or too slow) in the server's error shape.
  std::function<void(httplib::Response&, const ApiError&)> write_error;
};

class GatedServer : public httplib::Server {
 public:
  explicit GatedServer(ConnectionPolicy policy);

  // Connections told to give their worker up so far (ConnectionBudget::must_yield).
  std::uint64_t yielded_connections() const { return budget_.yielded(); }
  const ConnectionBudget& budget() const { return budget_; }
  // Stops listening; connections idle between requests close at once, busy ones after their
  // current answer. (httplib's stop() alone lets kept-alive connections take new requests
  // while its workers drain.)
  void stop_serving() {
    budget_.stop();
    stop();
  }

 private:
  bool process_and_close_socket(socket_t sock) override;
  void refuse(ConnectionStream& stream, int status, const std::string& reason);

  ConnectionPolicy policy_;
  ConnectionBudget budget_;
};

}  // namespace nibble::http
