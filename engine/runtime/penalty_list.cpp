#include "engine/runtime/penalty_list.h"

#include <algorithm>

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

void PenaltyList::entries_with_output(std::span<const int> output,
                                      std::vector<kernels::SamplingPenalty>& out) const {
  out.assign(entries_.begin(), entries_.end());
  if (!any_) return;
  for (int token : output) {
    const auto it = index_.find(token);
    if (it != index_.end()) {
      ++out[it->second].output_count;
      continue;
    }
    // Not listed yet: among the few this call appended, or new.
    const auto added = std::find_if(out.begin() + std::ptrdiff_t(entries_.size()), out.end(),
                                    [token](const auto& e) { return e.token == token; });
    if (added != out.end())
      ++added->output_count;
    else
      out.push_back({token, 1});
  }
}

void PenaltyList::add(int token, bool output) {
  auto [it, inserted] = index_.try_emplace(token, entries_.size());
  if (inserted) entries_.push_back({token, 0});
  if (output) ++entries_[it->second].output_count;
}

}  // namespace nibble::runtime
