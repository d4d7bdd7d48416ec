#pragma once
// httplib's server with a gate in front of every accepted connection: a client address that
// already holds its maximum of connections without a complete request head gets a short 429
// and the connection closed at once, instead of a worker thread for the read timeout.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>

#include "http/client_connection.h"

namespace nibble::http {

class GatedServer : public httplib::Server {
 public:
  GatedServer(std::string name, int max_pending_per_client)
      : name_(std::move(name)), pending_(max_pending_per_client) {}

  std::uint64_t refused_connections() const { return refused_; }

 private:
  bool process_and_close_socket(socket_t sock) override;

  std::string name_;
  PendingConnections pending_;
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::int64_t> last_warning_ms_{0};
};

}  // namespace nibble::http
