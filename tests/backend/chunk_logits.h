#pragma once
// What the backend tests compare: the logits after feeding one fresh sequence its tokens in
// chunks (a prompt whole, in pieces, one token at a time), how far two logit vectors are, and the
// random prompts and their splits the comparisons feed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
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

// ||got - want|| / ||want|| in double; infinite when `got` holds a NaN or an infinity.
inline double relative_l2(std::span<const float> got, std::span<const float> want) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    ref += double(want[i]) * want[i];
  }
  return std::sqrt(diff / ref);
}

// The largest difference of one logit, over the logits' RMS.
inline double max_difference_over_rms(std::span<const float> got, std::span<const float> want) {
  double worst = 0, sum = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    sum += double(want[i]) * want[i];
  }
  return worst / std::sqrt(sum / double(want.size()));
}

// n tokens drawn uniformly from [0, vocab).
inline std::vector<std::int32_t> random_tokens(std::mt19937& rng, int n, int vocab) {
  std::uniform_int_distribution<int> u(0, vocab - 1);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  for (auto& x : tokens) x = u(rng);
  return tokens;
}

// `p` cut into consecutive chunks of the given sizes (which sum to at most its length).
inline std::vector<std::vector<std::int32_t>> split(const std::vector<std::int32_t>& p,
                                                    const std::vector<int>& sizes) {
  std::vector<std::vector<std::int32_t>> chunks;
  auto it = p.begin();
  for (int n : sizes) {
    chunks.emplace_back(it, it + n);
    it += n;
  }
  return chunks;
}

}  // namespace nibble::testing
