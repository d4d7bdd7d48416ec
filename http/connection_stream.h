#pragma once
// The byte stream of one client connection, handed to httplib in place of its own SocketStream.
//
// Why our own stream: httplib 0.11 reads a request head for as long as header lines come (128 MB
// of them got a 200), and it makes a fresh SocketStream, with a fresh read buffer, for each
// request of a keep-alive connection, so bytes of a pipelined request read along with the
// previous one were lost and the connection hung. This stream lives as long as the connection:
//   - read_head() reads a request head into the buffer, checking it with scan_request_head()
//     as it arrives, so a limit is enforced before more than a line past it is read; httplib
//     then parses the checked head from the buffer;
//   - bytes past one request (a pipelined request) stay buffered for the next;
//   - every wait on the client is bounded: read_timeout of silence, head_timeout for a whole
//     head, body_timeout for a whole body (a trickle of one byte per few seconds cannot hold
//     a worker), the keep-alive timeout between requests, and the ConnectionBudget's call to
//     yield the worker.
#include <httplib.h>

#include <chrono>
#include <string>

#include "http/connection_budget.h"
#include "http/request_head.h"

namespace nibble::http {

struct StreamTimeouts {
  std::chrono::milliseconds read{5000};        // silence while a request is read
  std::chrono::milliseconds write{30000};      // a client accepting nothing while we write
  std::chrono::milliseconds head{10000};       // the whole head, from its first wait
  std::chrono::milliseconds body{60000};       // the whole body, from the end of the head
  std::chrono::milliseconds keep_alive{5000};  // idle between two requests
};

class ConnectionStream : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Ended { kNo, kClosed, kTimedOut, kYielded };

  ConnectionStream(int socket, StreamTimeouts timeouts, ConnectionBudget& budget,
                   ConnectionBudget::Id id);

  // Waits (idle) for the first byte of the next request; false when the connection ended.
  bool wait_for_request();
  // Reads until the buffered head is complete or refused. kIncomplete: the connection ended
  // first (see ended()), with `started` telling whether any byte of this head had come.
  HeadScan read_head(const HeadLimits& limits, bool& started);
  // The head was handed to httplib: the body's deadline starts now.
  void begin_body();
  // The request is answered: nothing is awaited from the client until the next one.
  void end_request();
  Ended ended() const { return ended_; }
  // Writes all of `data` (a refusal written outside httplib); false on failure.
  bool write_all(const std::string& data);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return socket_; }

 private:
  // Waits until the socket has bytes, as `wait`, until `deadline`; then receives what is there
  // into the buffer. False when the connection ended (ended_ says how).
  bool fill(ConnectionBudget::Wait wait, Clock::time_point since, Clock::time_point deadline);
  std::size_t buffered() const { return buffer_.size() - offset_; }

  int socket_;
  StreamTimeouts timeouts_;
  ConnectionBudget& budget_;
  ConnectionBudget::Id id_;
  std::string buffer_;
  std::size_t offset_ = 0;
  Clock::time_point request_started_;
  Clock::time_point body_deadline_ = Clock::time_point::max();
  Ended ended_ = Ended::kNo;
};

}  // namespace nibble::http
