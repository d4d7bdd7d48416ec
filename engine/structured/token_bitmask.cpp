#include "engine/structured/token_bitmask.h"

#include <bit>
#include <limits>

namespace nibble::structured {

std::size_t bitmask_count(std::span<const std::uint32_t> mask) {
  std::size_t n = 0;
  for (std::uint32_t w : mask) n += std::size_t(std::popcount(w));
  return n;
}

void apply_token_bitmask(std::span<float> logits, std::span<const std::uint32_t> mask) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const std::size_t covered = std::min(logits.size(), mask.size() * 32);
  for (std::size_t w = 0; w * 32 < covered; ++w) {
    const std::uint32_t bits = mask[w];
    if (bits == 0xffffffffu) continue;
    const std::size_t end = std::min(covered, w * 32 + 32);
    for (std::size_t t = w * 32; t < end; ++t) {
      if (!((bits >> (t - w * 32)) & 1u)) logits[t] = kMasked;
    }
  }
  for (std::size_t t = covered; t < logits.size(); ++t) logits[t] = kMasked;
}

}  // namespace nibble::structured
