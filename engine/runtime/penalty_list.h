#pragma once
// A sequence's penalty list for sampling (kernels/sampling/sampling_types.h): each distinct token
// of the prompt (when the repetition penalty looks at it) and of the output, with its count in
// the output. Kept incrementally: each step folds in only the tokens added since the last, so the
// list costs O(new tokens) a step however long the sequence. Empty when no penalty is asked for.
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/runtime/sampling_params.h"
#include "kernels/sampling/sampling_types.h"

namespace nibble::runtime {

class PenaltyList {
 public:
  explicit PenaltyList(const SamplingParams& params);

  // Folds in the sequence's tokens not seen yet; tokens[0, num_prompt) is its prompt.
  void update(std::span<const int> tokens, int num_prompt);
  std::span<const kernels::SamplingPenalty> entries() const { return entries_; }
  bool any() const { return any_; }  // a penalty is asked for
  // entries() with `output` (tokens after those folded in: a verify row's drafts before it)
  // counted as output tokens too, into `out`; empty when no penalty is asked for.
  void entries_with_output(std::span<const int> output,
                           std::vector<kernels::SamplingPenalty>& out) const;

 private:
  void add(int token, bool output);

  bool repetition_ = false;  // prompt tokens listed too
  bool any_ = false;
  std::size_t folded_ = 0;
  std::vector<kernels::SamplingPenalty> entries_;
  std::unordered_map<int, std::size_t> index_;
};

}  // namespace nibble::runtime
