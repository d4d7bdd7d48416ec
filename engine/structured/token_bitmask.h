#pragma once
// Token bitmasks: which tokens of the vocabulary may come next, one bit per token id in
// uint32_t words, the layout a device kernel reads (stable: device sampling depends on it):
//  - bit i (value 1u << i) of word w is token 32*w + i; 1 = allowed, 0 = disallowed;
//  - a row has bitmask_words(vocab_size) words, where vocab_size is the model's logits width;
//    the bits past vocab_size in the last word are padding, never tokens (0 in a constrained
//    row);
//  - a batch (TokenBitmaskBatch) is rows x words, row-major and contiguous, row r for the r-th
//    logits row of the step; unconstrained rows are all ones, padding included.
// apply_token_bitmask is the CPU reference the CUDA backend mirrors: it sets the logit of
// every disallowed token to -inf (ids past the mask's end are disallowed).
#include <cstdint>
#include <span>
#include <vector>

namespace nibble::structured {

inline std::size_t bitmask_words(std::size_t vocab_size) {
  return (vocab_size + 31) / 32;
}

inline bool bitmask_allows(std::span<const std::uint32_t> mask, std::size_t token) {
  return token / 32 < mask.size() && ((mask[token / 32] >> (token % 32)) & 1u);
}

inline void bitmask_allow(std::span<std::uint32_t> mask, std::size_t token) {
  mask[token / 32] |= std::uint32_t(1) << (token % 32);
}

std::size_t bitmask_count(std::span<const std::uint32_t> mask);

void apply_token_bitmask(std::span<float> logits, std::span<const std::uint32_t> mask);

// [rows x words] masks for one engine step: row r belongs to the r-th sequence that samples
// in the step (the order of the logits rows); rows of unconstrained sequences are all ones.
struct TokenBitmaskBatch {
  std::size_t words = 0;
  std::vector<std::uint32_t> bits;
  std::vector<bool> constrained;  // per row
  bool empty() const { return bits.empty(); }
  std::span<const std::uint32_t> row(std::size_t r) const {
    return {bits.data() + r * words, words};
  }
};

}  // namespace nibble::structured
