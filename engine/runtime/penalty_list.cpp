#include "engine/runtime/penalty_list.h"

namespace nibble::runtime {

PenaltyList::PenaltyList(const SamplingParams& params)
    : repetition_(params.repetition_penalty != 1.0f),
      any_(repetition_ || params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {}

void PenaltyList::update(std::span<const int> tokens, int num_prompt) {
  if (!any_) return;
  for (; folded_ < tokens.size(); ++folded_) {
    const bool output = folded_ >= std::size_t(num_prompt);
    if (output || repetition_) add(tokens[folded_], output);
  }
}

void PenaltyList::add(int token, bool output) {
  auto [it, inserted] = index_.try_emplace(token, entries_.size());
  if (inserted) entries_.push_back({token, 0});
  if (output) ++entries_[it->second].output_count;
}

}  // namespace nibble::runtime
