#pragma once
// Test-only drafters that know the target's answer, for measuring the verify path: not a user
// method (parse_speculative_config refuses them); tests and benchmarks construct them in code.
// Each is given reference sequences (a prompt followed by the target's greedy continuation).
// When a sequence's tokens are a prefix of a reference, the tokens that follow it there are
// the target's own greedy choices:
//   kOracle proposes them (every draft accepted: the ceiling of the verify path);
//   kWrong proposes each one plus 1 modulo the vocabulary (every draft rejected: its cost).
// A sequence that left every reference (sampled, or an unknown prompt) gets no draft.
#include <vector>

#include "engine/spec/drafter.h"

namespace nibble::spec {

class ReferenceDrafter : public Drafter {
 public:
  enum class Mode { kOracle, kWrong };
  ReferenceDrafter(Mode mode, std::vector<std::vector<int>> references, int vocab_size);
  std::string_view name() const override { return mode_ == Mode::kOracle ? "oracle" : "wrong"; }
  void propose(std::span<const int> tokens, int max_tokens, std::vector<int>& draft) const override;

 private:
  Mode mode_;
  std::vector<std::vector<int>> references_;
  int vocab_size_;
};

}  // namespace nibble::spec
