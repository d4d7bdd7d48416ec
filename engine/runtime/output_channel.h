#pragma once
// The hand-off between the engine thread (producer) and one request's HTTP thread (consumer).
// The engine pushes one event per generated token; the consumer pops them with a timeout and
// may cancel, which the engine notices at its next step and frees the request's blocks.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/sampler.h"

namespace nibble::runtime {

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort", "error"

struct TokenEvent {
  int choice = 0;       // which of the request's n sequences
  int token = -1;       // -1 for an event that only finishes
  SampledToken sample;  // logprobs when asked for
  FinishReason finish = FinishReason::kNone;
  bool stop_token = false;  // token is EOS or a stop_token_id: not part of the text
  std::string error;        // for kError
  int num_prompt_tokens = 0;
  int num_cached_prompt_tokens = 0;
};

class OutputChannel {
 public:
  void push(TokenEvent event);
  // Waits up to timeout for events; returns all queued ones (empty on timeout).
  std::vector<TokenEvent> pop(std::chrono::milliseconds timeout);

  // The client went away: abort every choice at the next step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  // The consumer matched a stop string in this choice's text: finish it as "stop".
  void stop_choice(int choice);
  std::vector<int> take_stopped_choices();

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<TokenEvent> events_;
  std::vector<int> stopped_choices_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> has_stopped_choices_{false};
};

}  // namespace nibble::runtime
