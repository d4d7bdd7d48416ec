#pragma once
// What the backend tests compare: the logits after feeding one fresh sequence its tokens in
// chunks (a prompt whole, in pieces, one token at a time), and how far two logit vectors are.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::testing {

// The logits of the last token after `chunks` in order, on a new sequence of max_len positions.
inline std::vector<float> logits_after_chunks(backend::Backend& b,
                                              const std::vector<std::vector<std::int32_t>>& chunks,
                                              int max_len) {
  auto seq = b.new_sequence(max_len);
  std::vector<float> logits(std::size_t(b.config().vocab_size));
  for (const auto& chunk : chunks) b.forward(*seq, chunk, logits);
  return logits;
}

// max |a - b| / max |b|.
inline double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    ref = std::max(ref, double(std::abs(b[i])));
  }
  return diff / ref;
}

}  // namespace nibble::testing
