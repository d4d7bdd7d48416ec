#pragma once
// Debian 12's cpp-httplib (0.11, a compiled library) listens with a backlog of 5, so a burst of
// connections (a benchmark at concurrency 200, a UI reconnecting) overflows the accept queue
// and clients see connections reset. Linux lets listen() be called again on a listening socket
// to change its backlog; this finds the socket bound to `port` and does that.
namespace nibble::http {

// Returns false if no listening socket on that port was found in this process.
bool raise_listen_backlog(int port, int backlog);

}  // namespace nibble::http
