#pragma once
// Which connections may keep a worker thread while they wait for their client.
//
// httplib serves each connection on one worker from accept to close, so a connection that
// sends its request slowly (a slowloris head, a trickled body) or sits idle between keep-alive
// requests holds a worker the whole time. Refusing a client address once it holds N such
// connections (the first hardening round) locked out every local client, since on one machine
// every client is 127.0.0.1. The budget instead asks a waiting connection to give its worker
// up, and only when it has waited longer than `grace` (a real client's head arrives in
// milliseconds, so it is never the one chosen):
//   - when a connection is queued for a worker and every worker is taken: the connection that
//     has waited longest (for its current request's bytes, or idle between requests) yields;
//   - when one client address has more than `max_waiting_per_peer` connections waiting for
//     the bytes of a request in progress: that address's longest waiting one yields.
// A connection whose handler runs (a long completion) never waits on its client and is never
// chosen. Connections ask must_yield() between slices of their wait (ConnectionStream), so
// the one chosen ends itself on its own thread; nothing closes another thread's socket.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace nibble::http {

class ConnectionBudget {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = std::uint64_t;
  enum class Wait { kNone, kRequest, kIdle };

  ConnectionBudget(int workers, int max_waiting_per_peer, Clock::duration grace)
      : workers_(workers), max_waiting_per_peer_(max_waiting_per_peer), grace_(grace) {}

  // The listener queued an accepted connection for a worker; a worker took one.
  void queued();
  void dequeued();

  // A worker serves a connection from `peer` (its address); it starts waiting for a request.
  Id enter(std::string peer);
  void leave(Id id);
  // The connection waits for the bytes of a request (head or body) that began at `since`, or
  // idles between requests since `since`; kNone: it does not wait on its client.
  void set_wait(Id id, Wait wait, Clock::time_point since);
  // True when this connection must close now to free its worker (see above); counted once.
  bool must_yield(Id id);

  // The server stops: idle connections yield at once, and no connection takes another request.
  void stop() { stopping_ = true; }
  bool stopping() const { return stopping_; }

  std::uint64_t yielded() const;
  int waiting(const std::string& peer) const;  // connections of `peer` waiting on a request

 private:
  struct Entry {
    std::string peer;
    Wait wait = Wait::kRequest;
    Clock::time_point since;
    bool yielding = false;
  };
  bool evictable(const Entry& e, Clock::time_point now) const;

  const int workers_;
  const int max_waiting_per_peer_;
  const Clock::duration grace_;
  mutable std::mutex mutex_;
  std::map<Id, Entry> entries_;
  Id next_id_ = 1;
  int queued_ = 0;
  std::uint64_t yielded_ = 0;
  std::atomic<bool> stopping_{false};
};

}  // namespace nibble::http
