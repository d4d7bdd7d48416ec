#pragma once
// The router's settings: where it listens and how long it waits for replicas.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "http/api_keys.h"

namespace nibble::router {

struct RouterConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                         // 0: pick a free port (tests)
  std::chrono::seconds hold_timeout{120};  // scale-from-zero hold, then 503 + Retry-After
  std::chrono::seconds read_timeout{600};  // upstream read timeout
  int max_attempts = 3;                    // replicas tried before the first byte, per round
  // How long a request whose replicas all fail to connect keeps retrying (in rounds) for one
  // that answers, before a 502.
  std::chrono::seconds failover_timeout{30};
  std::size_t max_body_bytes = 32u << 20;  // 413 above
  int threads = 64;                        // httplib worker threads (streams hold one each)
  http::ApiKeys api_keys;                  // clients' keys; empty: no authentication
  bool metrics_require_key = false;
  std::chrono::seconds client_read_timeout{5};  // a client silent this long mid-request is dropped
  int max_pending_connections_per_client = 0;   // 0: a quarter of threads
  // Browser origins allowed to call the router cross-origin (http/cors.h); empty: none.
  std::vector<std::string> allowed_origins;
};

}  // namespace nibble::router
