#include "http/client_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "http/connection_stream.h"

namespace nibble::http {
namespace {

thread_local ServedConnection* current_connection = nullptr;

}  // namespace

ServedConnection::ServedConnection(int socket, const ConnectionStream& stream)
    : socket_(socket), stream_(stream) {
  current_connection = this;
}

ServedConnection::~ServedConnection() {
  current_connection = nullptr;
}

void mark_request_head_received() {
  if (current_connection != nullptr) current_connection->head_received();
}

void mark_response_written(bool closes) {
  if (current_connection == nullptr) return;
  current_connection->response_written();
  if (closes) current_connection->close_after_response();
}

bool request_head_received() {
  return current_connection != nullptr && current_connection->head_of_current_request();
}

bool request_read_timed_out() {
  return current_connection != nullptr &&
         current_connection->stream().ended() == ConnectionStream::Ended::kTimedOut;
}

void end_connection_now() {
  if (current_connection == nullptr) return;
  current_connection->close_after_response();
}

bool client_disconnected() {
  if (current_connection == nullptr) return false;
  pollfd p{current_connection->socket(), POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  // Readable: either the next pipelined request (data) or an orderly close (0 bytes).
  char byte;
  return ::recv(p.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

std::string peer_address(int socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(socket, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

}  // namespace nibble::http
