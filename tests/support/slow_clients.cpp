#include "tests/support/slow_clients.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

namespace nibble::testing {
namespace {

// A TCP connection to 127.0.0.1:port from the loopback address `source`; -1 when it fails.
int connect_from(int port, const std::string& source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

SlowClients::SlowClients(int port, int count, const std::string& source) {
  static const char kPartialHead[] = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < count; ++i) {
    const int fd = connect_from(port, source);
    if (fd < 0) continue;
    [[maybe_unused]] const ssize_t sent =
        ::send(fd, kPartialHead, sizeof kPartialHead - 1, MSG_NOSIGNAL);
    sockets_.push_back(fd);
  }
}

SlowClients::~SlowClients() {
  for (int fd : sockets_) ::close(fd);
}

RawConnection::RawConnection(int port, const std::string& source)
    : fd_(connect_from(port, source)) {}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::send(const std::string& data, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::size_t sent = 0;
  while (fd_ >= 0 && sent < data.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP)) return false;
    const ssize_t n =
        ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return false;
    sent += std::size_t(n);
  }
  return fd_ >= 0;
}

std::string RawConnection::read(std::chrono::milliseconds limit, const std::string& marker,
                                int count) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (fd_ >= 0 && !closed_ && (marker.empty() || count_of(received_, marker) < count)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) break;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      break;
    }
    received_.append(buf, std::size_t(n));
  }
  return received_;
}

int count_of(const std::string& text, const std::string& marker) {
  int n = 0;
  for (std::size_t pos = text.find(marker); pos != std::string::npos;
       pos = text.find(marker, pos + marker.size()))
    ++n;
  return n;
}

TimedAnswer timed_get(int port, const std::string& path, std::chrono::milliseconds limit) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(limit);
  c.set_read_timeout(limit);
  c.set_write_timeout(limit);
  const auto start = std::chrono::steady_clock::now();
  auto res = c.Get(path);
  TimedAnswer answer;
  answer.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (res) answer.status = res->status;
  return answer;
}

}  // namespace nibble::testing
