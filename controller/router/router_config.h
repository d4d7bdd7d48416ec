#pragma once
// The router's settings: where it listens and how long it waits for replicas.
#include <chrono>
#include <cstddef>
#include <string>

namespace nibble::router {

struct RouterConfig {
  std::string host = "0.0.0.0";
  int port = 8000;                         // 0: pick a free port (tests)
  std::chrono::seconds hold_timeout{120};  // scale-from-zero hold, then 503 + Retry-After
  std::chrono::seconds read_timeout{600};  // upstream read timeout
  int max_attempts = 3;                    // replicas tried before the first byte
  std::size_t max_body_bytes = 32u << 20;  // 413 above
  int threads = 64;                        // httplib worker threads (streams hold one each)
};

}  // namespace nibble::router
