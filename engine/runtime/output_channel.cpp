#include "engine/runtime/output_channel.h"

#include <utility>

namespace nibble::runtime {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return "";
}

void OutputChannel::push(TokenEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

std::vector<TokenEvent> OutputChannel::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [this] { return !events_.empty(); });
  std::vector<TokenEvent> out(std::make_move_iterator(events_.begin()),
                              std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void OutputChannel::stop_choice(int choice) {
  std::lock_guard lock(mutex_);
  stopped_choices_.push_back(choice);
  has_stopped_choices_ = true;
}

std::vector<int> OutputChannel::take_stopped_choices() {
  if (!has_stopped_choices_.load()) return {};  // the engine asks every step: keep it lock-free
  std::lock_guard lock(mutex_);
  has_stopped_choices_ = false;
  return std::exchange(stopped_choices_, {});
}

}  // namespace nibble::runtime
