#include "tests/support/slow_clients.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <stdexcept>

namespace nibble::testing {

SlowClients::SlowClients(int port, int count, const std::string& source) {
  static const char kPartialHead[] = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket() failed");
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
      continue;
    }
    [[maybe_unused]] const ssize_t sent =
        ::send(fd, kPartialHead, sizeof kPartialHead - 1, MSG_NOSIGNAL);
    sockets_.push_back(fd);
  }
}

SlowClients::~SlowClients() {
  for (int fd : sockets_) ::close(fd);
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
