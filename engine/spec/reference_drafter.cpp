#include "engine/spec/reference_drafter.h"

#include <algorithm>

namespace nibble::spec {

ReferenceDrafter::ReferenceDrafter(Mode mode, std::vector<std::vector<int>> references,
                                   int vocab_size)
    : mode_(mode), references_(std::move(references)), vocab_size_(vocab_size) {}

void ReferenceDrafter::propose(std::span<const int> tokens, int max_tokens,
                               std::vector<int>& draft) const {
  for (const std::vector<int>& ref : references_) {
    if (ref.size() <= tokens.size() || !std::equal(tokens.begin(), tokens.end(), ref.begin()))
      continue;
    const std::size_t count =
        std::min(std::size_t(std::max(max_tokens, 0)), ref.size() - tokens.size());
    for (std::size_t i = 0; i < count; ++i) {
      const int t = ref[tokens.size() + i];
      draft.push_back(mode_ == Mode::kOracle ? t : (t + 1) % vocab_size_);
    }
    return;
  }
}

}  // namespace nibble::spec
