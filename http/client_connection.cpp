#include "http/client_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace nibble::http {
namespace {

thread_local ServedConnection* current_connection = nullptr;

}  // namespace

bool PendingConnections::admit(const std::string& address) {
  std::lock_guard lock(mutex_);
  int& n = pending_[address];
  if (max_per_client_ > 0 && n >= max_per_client_) return false;
  ++n;
  return true;
}

void PendingConnections::release(const std::string& address) {
  std::lock_guard lock(mutex_);
  auto it = pending_.find(address);
  if (it == pending_.end()) return;
  if (--it->second <= 0) pending_.erase(it);
}

int PendingConnections::pending(const std::string& address) const {
  std::lock_guard lock(mutex_);
  auto it = pending_.find(address);
  return it == pending_.end() ? 0 : it->second;
}

ServedConnection::ServedConnection(int socket, std::string address, PendingConnections& pending)
    : socket_(socket), address_(std::move(address)), pending_(pending) {
  current_connection = this;
}

ServedConnection::~ServedConnection() {
  head_received();  // releases the pending count
  current_connection = nullptr;
}

void ServedConnection::head_received() {
  head_of_current_request_ = true;
  if (!is_pending_) return;
  is_pending_ = false;
  pending_.release(address_);
}

void mark_request_head_received() {
  if (current_connection != nullptr) current_connection->head_received();
}

void mark_response_written() {
  if (current_connection != nullptr) current_connection->response_written();
}

bool request_head_received() {
  return current_connection != nullptr && current_connection->head_of_current_request();
}

void end_connection_now() {
  if (current_connection != nullptr) ::shutdown(current_connection->socket(), SHUT_RD);
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
