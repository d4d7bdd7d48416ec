#pragma once
// What the HTTP layer knows about the connection a handler is serving, and the per-client cap
// on connections that have not yet sent a complete request head (the slowloris guard).
//
// httplib serves one connection per worker thread from start to end, so the connection being
// served is a thread-local set by the server around it; handlers reach it through the free
// functions below without any plumbing.
#include <map>
#include <mutex>
#include <string>

namespace nibble::http {

// Counts, per client address, connections waiting for their first request head.
class PendingConnections {
 public:
  explicit PendingConnections(int max_per_client) : max_per_client_(max_per_client) {}
  // Counts one more for `address`; false (nothing counted) when it already has the maximum.
  bool admit(const std::string& address);
  void release(const std::string& address);
  int pending(const std::string& address) const;

 private:
  const int max_per_client_;
  mutable std::mutex mutex_;
  std::map<std::string, int> pending_;
};

// One connection while a worker thread serves it; sets and clears the thread's current
// connection, and releases its pending count if no request head ever arrived.
class ServedConnection {
 public:
  ServedConnection(int socket, std::string address, PendingConnections& pending);
  ~ServedConnection();
  ServedConnection(const ServedConnection&) = delete;
  ServedConnection& operator=(const ServedConnection&) = delete;

  void head_received();  // a request head is in (the first one: no longer pending)
  void response_written() { head_of_current_request_ = false; }
  bool head_of_current_request() const { return head_of_current_request_; }
  int socket() const { return socket_; }

 private:
  int socket_;
  std::string address_;
  PendingConnections& pending_;
  bool is_pending_ = true;
  bool head_of_current_request_ = false;
};

// Called by the server when a request head has been read on this thread's connection, and
// when its response is about to be written.
void mark_request_head_received();
void mark_response_written();
// False while httplib answers a request whose head never arrived whole (timed out, malformed).
bool request_head_received();

// Ends the connection this thread serves without an answer: its read side is shut, so httplib
// neither writes the response being prepared nor waits keep-alive time for a next request
// (httplib 0.11 ignores a response's "Connection: close" for that).
void end_connection_now();

// True when the client of the connection this thread serves has closed it or reset it (a
// non-streamed request's client that gave up). Cheap: one poll() without waiting. False when
// called outside a served connection.
bool client_disconnected();

// The peer's address of a connected socket ("" when unknown).
std::string peer_address(int socket);

}  // namespace nibble::http
