#pragma once
// Slowloris clients for the HTTP servers' tests: connections that send the start of a request
// head and then nothing, from a source address of their own (another loopback address, so
// that a probe from 127.0.0.1 counts as a different client).
#include <chrono>
#include <string>
#include <vector>

namespace nibble::testing {

class SlowClients {
 public:
  // Opens `count` connections to 127.0.0.1:port from `source`, each sending a partial head.
  SlowClients(int port, int count, const std::string& source = "127.0.0.2");
  ~SlowClients();  // closes them
  SlowClients(const SlowClients&) = delete;
  SlowClients& operator=(const SlowClients&) = delete;

  int connected() const { return int(sockets_.size()); }

 private:
  std::vector<int> sockets_;
};

// GET path on 127.0.0.1:port with a time limit; returns the status (0: no answer in time) and
// the time it took.
struct TimedAnswer {
  int status = 0;
  std::chrono::milliseconds took{0};
};
TimedAnswer timed_get(int port, const std::string& path, std::chrono::milliseconds limit);

}  // namespace nibble::testing
