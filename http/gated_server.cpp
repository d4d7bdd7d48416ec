// Built with -fno-access-control (see http/CMakeLists.txt): httplib 0.11 declares
// Server::process_and_close_socket private virtual, the one place that sees each accepted socket
// before a request is read; overriding it is allowed, calling the base version needs this flag.
// Keep this file to that one call.
#include "http/gated_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nibble::http {

bool GatedServer::process_and_close_socket(socket_t sock) {
  std::string address = peer_address(sock);
  if (!pending_.admit(address)) {
    ++refused_;
    static const char kBusy[] =
        "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    [[maybe_unused]] const ssize_t sent =
        ::send(sock, kBusy, sizeof kBusy - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    std::int64_t last = last_warning_ms_.load();
    if (now - last > 10'000 && last_warning_ms_.compare_exchange_strong(last, now)) {
      spdlog::warn("{}: refusing connections from {}: too many that have not sent a request", name_,
                   address);
    }
    return false;
  }
  ServedConnection connection(sock, std::move(address), pending_);
  return httplib::Server::process_and_close_socket(sock);
}

}  // namespace nibble::http
