#pragma once
// Mixture-of-experts routing, shared by every backend: softmax over all experts, keep the top k
// per token (ties to the lower expert id), renormalise when norm_topk_prob. The routed rows are
// grouped by expert so that each expert runs once over a contiguous slice of them.
#include <cstdint>
#include <span>
#include <vector>

namespace nibble::backend {

struct MoeRouting {
  std::vector<std::int64_t>
      offsets;  // [experts + 1]: expert e owns routed rows [offsets[e], offsets[e+1])
  std::vector<std::int32_t> token;   // [tokens * k]: the token of each routed row
  std::vector<float> weight;         // [tokens * k]: its mixing weight
  std::vector<std::int32_t> source;  // [tokens, k]: token t's j-th routed row
};

// router_logits: [tokens, experts], turned into probabilities in place.
MoeRouting route_tokens(std::span<float> router_logits, std::int64_t tokens, int experts, int k,
                        bool norm_topk_prob);

}  // namespace nibble::backend
