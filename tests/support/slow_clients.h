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

// One raw TCP connection to 127.0.0.1:port, for requests no HTTP client would send (malformed
// or huge heads, pipelining, trickled bodies).
class RawConnection {
 public:
  explicit RawConnection(int port, const std::string& source = "127.0.0.1");
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all of `data` within `limit`; false when the server closed or reset the connection,
  // or stopped reading, first.
  bool send(const std::string& data, std::chrono::milliseconds limit = std::chrono::seconds(5));
  // Reads until the server closes the connection, `count` copies of `marker` have arrived, or
  // `limit` passes; returns everything received so far on this connection.
  std::string read(std::chrono::milliseconds limit, const std::string& marker = {}, int count = 1);
  bool closed_by_server() const { return closed_; }

 private:
  int fd_ = -1;
  std::string received_;
  bool closed_ = false;
};

int count_of(const std::string& text, const std::string& marker);

// GET path on 127.0.0.1:port with a time limit; returns the status (0: no answer in time) and
// the time it took.
struct TimedAnswer {
  int status = 0;
  std::chrono::milliseconds took{0};
};
TimedAnswer timed_get(int port, const std::string& path, std::chrono::milliseconds limit);

}  // namespace nibble::testing
