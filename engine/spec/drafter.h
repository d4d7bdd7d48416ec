#pragma once
// A drafter proposes the tokens a sequence is likely to continue with; the target model then
// checks them all in one forward pass (engine/spec/verify.h). A drafter only guesses: a wrong
// guess costs time, never correctness. propose() is const and keeps no per-sequence state, so
// one drafter serves every sequence of the batch.
//
// Drafters that continue the target model's hidden states (mtp: reads_hidden_states) keep state
// per sequence instead (thread-safe inside), and the engine loop, on its one thread:
//   observe()s every step that computed a sequence's positions [start, start + rows): the
//     target's hidden states of the rows whose tokens the sequence kept (a verify step's
//     accepted prefix; hidden_size floats a row, before the final norm), with the sequence's
//     tokens after the step; a preempted sequence is observed again from start 0;
//   asks propose_for() (with the sequence's id) instead of propose();
//   forget()s a sequence that finished.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace nibble::spec {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string_view name() const = 0;
  // Appends at most max_tokens proposed next tokens of `tokens` (the sequence so far: prompt,
  // then output) to `draft`, possibly none.
  virtual void propose(std::span<const int> tokens, int max_tokens,
                       std::vector<int>& draft) const = 0;

  virtual bool reads_hidden_states() const { return false; }
  virtual void observe(std::int64_t sequence, std::span<const int> tokens, int start,
                       std::span<const float> hidden_states) const {
    (void)sequence, (void)tokens, (void)start, (void)hidden_states;
  }
  virtual void forget(std::int64_t sequence) const { (void)sequence; }
  virtual void propose_for(std::int64_t sequence, std::span<const int> tokens, int max_tokens,
                           std::vector<int>& draft) const {
    (void)sequence;
    propose(tokens, max_tokens, draft);
  }
};

}  // namespace nibble::spec
