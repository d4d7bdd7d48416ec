#include "engine/spec/ngram_drafter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nibble::spec {

NgramDrafter::NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n)
    throw std::invalid_argument("ngram drafter needs 1 <= min_n <= max_n, got " +
                                std::to_string(min_n) + ", " + std::to_string(max_n));
}

void NgramDrafter::propose(std::span<const int> tokens, int max_tokens,
                           std::vector<int>& draft) const {
  const std::ptrdiff_t len = std::ptrdiff_t(tokens.size());
  if (max_tokens <= 0) return;
  for (int n = std::min<std::ptrdiff_t>(max_n_, len - 1); n >= min_n_; --n) {
    const auto suffix = tokens.last(std::size_t(n));
    // Matches [i, i + n) with i + n < len, so that at least one token follows; they may overlap
    // the suffix itself (a run of one repeated token proposes more of it).
    const auto haystack = tokens.first(std::size_t(len - 1));
    const auto it = std::search(haystack.begin(), haystack.end(), suffix.begin(), suffix.end());
    if (it == haystack.end()) continue;
    const std::ptrdiff_t follow = (it - haystack.begin()) + n;
    const std::ptrdiff_t count = std::min<std::ptrdiff_t>(max_tokens, len - follow);
    draft.insert(draft.end(), tokens.begin() + follow, tokens.begin() + follow + count);
    return;
  }
}

}  // namespace nibble::spec
