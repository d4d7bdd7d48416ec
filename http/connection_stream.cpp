#include "http/connection_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nibble::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A waiting connection asks the budget whether to yield this often.
constexpr auto kWaitSlice = 200ms;
constexpr std::size_t kReceiveBytes = 16 * 1024;

int poll_ms(Clock::duration d) {
  return int(std::clamp<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count() + 1, 0, 1 << 30));
}

bool poll_for(int socket, short events, std::chrono::milliseconds timeout) {
  pollfd p{socket, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, int(timeout.count()));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

}  // namespace

ConnectionStream::ConnectionStream(int socket, StreamTimeouts timeouts, ConnectionBudget& budget,
                                   ConnectionBudget::Id id)
    : socket_(socket),
      timeouts_(timeouts),
      budget_(budget),
      id_(id),
      request_started_(Clock::now()) {}

bool ConnectionStream::fill(ConnectionBudget::Wait wait, Clock::time_point since,
                            Clock::time_point deadline) {
  const auto silence_end = Clock::now() + timeouts_.read;
  const bool idle = wait == ConnectionBudget::Wait::kIdle;
  budget_.set_wait(id_, wait, since);
  bool got = false;
  while (ended_ == Ended::kNo) {
    const auto now = Clock::now();
    const auto end = idle ? deadline : std::min(deadline, silence_end);
    if (now >= end) {
      ended_ = Ended::kTimedOut;
      break;
    }
    if (budget_.must_yield(id_)) {
      ended_ = Ended::kYielded;
      break;
    }
    pollfd p{socket_, POLLIN, 0};
    const int n = ::poll(&p, 1, poll_ms(std::min<Clock::duration>(kWaitSlice, end - now)));
    if (n < 0 && errno != EINTR) {
      ended_ = Ended::kClosed;
      break;
    }
    if (n <= 0) continue;
    if (offset_ == buffer_.size()) {
      buffer_.clear();
      offset_ = 0;
    }
    const std::size_t old = buffer_.size();
    buffer_.resize(old + kReceiveBytes);
    const ssize_t r = ::recv(socket_, buffer_.data() + old, kReceiveBytes, MSG_DONTWAIT);
    buffer_.resize(old + std::size_t(std::max<ssize_t>(r, 0)));
    if (r > 0) {
      got = true;
      break;
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      ended_ = Ended::kClosed;
    }
  }
  budget_.set_wait(id_, ConnectionBudget::Wait::kNone, since);
  return got;
}

bool ConnectionStream::wait_for_request() {
  if (buffered() > 0) return true;
  const auto now = Clock::now();
  return fill(ConnectionBudget::Wait::kIdle, now, now + timeouts_.keep_alive);
}

HeadScan ConnectionStream::read_head(const HeadLimits& limits, bool& started) {
  // A new connection's head is timed from its accept; a kept-alive one's from its first byte.
  if (buffered() > 0 || offset_ > 0) request_started_ = Clock::now();
  const auto deadline = request_started_ + timeouts_.head;
  for (;;) {
    started = buffered() > 0;
    HeadScan scan = scan_request_head(std::string_view(buffer_).substr(offset_), limits);
    if (scan.state != HeadScan::State::kIncomplete) return scan;
    if (!fill(ConnectionBudget::Wait::kRequest, request_started_, deadline)) return scan;
  }
}

void ConnectionStream::begin_body() {
  body_deadline_ = Clock::now() + timeouts_.body;
}

void ConnectionStream::end_request() {
  body_deadline_ = Clock::time_point::max();
}

bool ConnectionStream::is_readable() const {
  return buffered() > 0 || poll_for(socket_, POLLIN, timeouts_.read);
}

bool ConnectionStream::is_writable() const {
  return poll_for(socket_, POLLOUT, timeouts_.write);
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (buffered() == 0 &&
      !fill(ConnectionBudget::Wait::kRequest, request_started_, body_deadline_)) {
    return -1;
  }
  const std::size_t n = std::min(size, buffered());
  std::memcpy(ptr, buffer_.data() + offset_, n);
  offset_ += n;
  return ssize_t(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  for (;;) {
    const ssize_t n = ::send(socket_, ptr, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

bool ConnectionStream::write_all(const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = write(data.data() + sent, data.size() - sent);
    if (n <= 0) return false;
    sent += std::size_t(n);
  }
  return true;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(socket_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    address_of(addr, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(socket_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    address_of(addr, ip, port);
}

}  // namespace nibble::http
