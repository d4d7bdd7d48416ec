#pragma once
// A drafter proposes the tokens a sequence is likely to continue with; the target model then
// checks them all in one forward pass (engine/spec/verify.h). A drafter only guesses: a wrong
// guess costs time, never correctness. propose() is const and keeps no per-sequence state, so
// one drafter serves every sequence of the batch.
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
};

}  // namespace nibble::spec
