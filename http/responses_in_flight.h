#pragma once
// Counts responses still being written, so that a draining server lets them end before it stops:
// httplib's stop() ends a chunked response between two chunks, so a stream whose generation
// finished during the drain could lose its last chunks (finish reason, usage, [DONE]).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace nibble::http {

class ResponsesInFlight {
 public:
  // Held while one response is written; the last copy's destruction counts it done. Tokens may
  // outlive the tracker.
  using Token = std::shared_ptr<void>;

  Token enter() {
    {
      std::lock_guard lock(state_->mutex);
      ++state_->count;
    }
    return Token(nullptr, [state = state_](void*) {
      std::lock_guard lock(state->mutex);
      --state->count;
      state->idle.notify_all();
    });
  }

  // Waits until no response is in flight or the deadline passes; true when none is left.
  bool wait_idle(std::chrono::steady_clock::time_point deadline) const {
    std::unique_lock lock(state_->mutex);
    return state_->idle.wait_until(lock, deadline, [&] { return state_->count == 0; });
  }

  int count() const {
    std::lock_guard lock(state_->mutex);
    return state_->count;
  }

 private:
  struct State {
    mutable std::mutex mutex;
    std::condition_variable idle;
    int count = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace nibble::http
