#pragma once
// What the HTTP layer knows about the connection a handler is serving.
//
// Each connection is served by one worker thread from start to end (GatedServer's loop), so the
// connection being served is a thread-local set by the server around it; handlers reach it
// through the free functions below without any plumbing.
#include <string>

namespace nibble::http {

class ConnectionStream;

// One connection while a worker thread serves it; sets and clears the thread's current
// connection.
class ServedConnection {
 public:
  ServedConnection(int socket, const ConnectionStream& stream);
  ~ServedConnection();
  ServedConnection(const ServedConnection&) = delete;
  ServedConnection& operator=(const ServedConnection&) = delete;

  void begin_request() { head_of_current_request_ = false; }
  void head_received() { head_of_current_request_ = true; }
  void response_written() { head_of_current_request_ = false; }
  bool head_of_current_request() const { return head_of_current_request_; }
  // The answer being written ends the connection (it says "Connection: close").
  void close_after_response() { close_requested_ = true; }
  bool close_requested() const { return close_requested_; }
  int socket() const { return socket_; }
  const ConnectionStream& stream() const { return stream_; }

 private:
  int socket_;
  const ConnectionStream& stream_;
  bool head_of_current_request_ = false;
  bool close_requested_ = false;
};

// Called by the server when httplib has parsed a request head on this thread's connection, and
// when its response is about to be written (`closes`: it carries "Connection: close").
void mark_request_head_received();
void mark_response_written(bool closes);
// False while httplib answers a request whose head it could not parse.
bool request_head_received();
// True when reading the current request's body ran past a deadline (the body timeout, or the
// read timeout of silence) rather than failing otherwise.
bool request_read_timed_out();

// Ends the connection this thread serves once the answer being prepared is written.
void end_connection_now();

// True when the client of the connection this thread serves has closed it or reset it (a
// non-streamed request's client that gave up). Cheap: one poll() without waiting. False when
// called outside a served connection.
bool client_disconnected();

// The peer's address of a connected socket ("" when unknown).
std::string peer_address(int socket);

}  // namespace nibble::http
