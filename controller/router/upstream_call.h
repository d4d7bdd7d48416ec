#pragma once
// One request forwarded to one replica, on a thread of its own so that the HTTP thread serving
// the client can first learn the upstream's status (or its failure before the first byte, which
// the router retries elsewhere) and then stream the body through as it arrives.
//
// Headers of the client's that the replica does not get: hop-by-hop ones, the client's key (the
// replica gets its own), and Origin, which the router has checked itself; forwarded, it made the
// engine refuse a same-origin client of the router, naming the replica's address.
//
// Threading: the upstream thread pushes chunks into a bounded queue (a slow client slows the
// upstream read instead of growing router memory); the client's HTTP thread pops them in its
// content provider. cancel() (the client went away, or the router stops) makes the upstream
// thread stop reading and closes the upstream connection, so the engine sees the disconnect and
// frees the request's blocks; every wait below returns promptly once cancelled. The thread is
// detached and touches only this shared object.
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "controller/router/route_table.h"

namespace nibble::router {

class UpstreamCall {
 public:
  enum class Head {
    kReceived,   // status and headers are here; the body follows through next_chunk
    kRetryable,  // the replica never served the request: connection refused or reset with
                 // the request unread, or a 503
    kDied,       // the replica read the whole request, then closed the connection without a
                 // status: it died serving it (maybe of it), so it is not retried
    kTimedOut,   // no status within the read timeout: the replica may still be working
    kCancelled,  // cancel() was called
    kWaiting,    // wait_head(timeout) only: nothing yet
  };
  enum class Next { kChunk, kWaiting, kEnd, kFailed };

  // Queued body bytes above which the upstream thread waits for the client to catch up.
  static constexpr std::size_t kMaxQueuedBytes = 1u << 20;

  // Starts forwarding `request` (method, target, headers, body) to the replica.
  static std::shared_ptr<UpstreamCall> start(const ReplicaEndpoint& replica,
                                             const httplib::Request& request,
                                             std::chrono::seconds read_timeout);

  // Blocks until the upstream's status line and headers arrived, or the call failed or was
  // cancelled before them; with a timeout, returns kWaiting when none of that happened in time.
  Head wait_head();
  Head wait_head(std::chrono::milliseconds timeout);
  // Valid after wait_head() returned kReceived.
  int status() const { return status_; }
  const httplib::Headers& headers() const { return headers_; }
  // Why the call failed (empty while it has not).
  std::string error() const;
  // The replica answered 503 (draining, or its queue is full) rather than failing to answer.
  bool refused() const;

  // Waits up to `wait` for the next body chunk (kChunk, into out), the end of the body (kEnd),
  // a failure mid-body or a cancel (kFailed), or nothing yet (kWaiting).
  Next next_chunk(std::string& out, std::chrono::milliseconds wait);

  void cancel();
  bool cancelled() const;
  bool finished() const;

 private:
  UpstreamCall() = default;
  void run(const ReplicaEndpoint& replica, httplib::Request request,
           std::chrono::seconds read_timeout);
  void finish(bool ok, std::string error, bool timed_out, bool refused, bool died);
  Head head_state() const;  // with mutex_ held

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool head_ready_ = false;
  bool finished_ = false;
  bool succeeded_ = false;
  bool timed_out_ = false;
  bool refused_ = false;
  bool died_ = false;
  bool cancelled_ = false;
  int status_ = 0;
  httplib::Headers headers_;
  std::string error_;
  std::deque<std::string> chunks_;
  std::size_t queued_bytes_ = 0;
  httplib::Client* client_ = nullptr;  // set while the upstream thread is in send()
};

}  // namespace nibble::router
