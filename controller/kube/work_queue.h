#pragma once
// The controller's work queue of object keys ("namespace/name"), as controller-runtime's:
//   - de-duplicated: a key queued twice is processed once;
//   - a key is never processed by two workers at once: added while in process, it is queued
//     again when done() is called;
//   - add_rate_limited() re-queues a key after an exponential back-off of its own (base doubling
//     to max per consecutive failure); forget() resets it after a success;
//   - add_after() for requeues at a time (a crash-loop back-off ending, a periodic resync).
// Thread-safe; get() blocks until a key is due or shut_down() is called.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace nibble::kube {

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{std::chrono::seconds(300)};
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WorkQueue(WorkQueueOptions options = {});

  void add(const std::string& key);
  void add_after(const std::string& key, std::chrono::milliseconds delay);
  // Re-queues after the key's back-off and counts one more failure.
  void add_rate_limited(const std::string& key);
  void forget(const std::string& key);
  int failures(const std::string& key) const;
  // The back-off the next add_rate_limited(key) would use.
  std::chrono::milliseconds next_delay(const std::string& key) const;

  // The next due key, or nullopt once shut down. The caller calls done(key) after.
  std::optional<std::string> get();
  void done(const std::string& key);
  void shut_down();
  size_t length() const;  // keys ready now

 private:
  void add_locked(const std::string& key);

  WorkQueueOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;       // queued, or to re-queue when done
  std::set<std::string> processing_;  // handed out by get(), not done yet
  std::multimap<Clock::time_point, std::string> delayed_;
  std::map<std::string, int> failures_;
  bool shutting_down_ = false;
};

}  // namespace nibble::kube
