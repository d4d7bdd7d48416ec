#pragma once
// Mixture-of-experts routing, shared by every backend (model::MoeRouting): softmax over all
// experts, keep the top k per token, renormalise when norm_topk_prob (kSoftmaxTopK); or keep the
// top k logits and softmax over those (kTopKSoftmax, gpt-oss). Ties go to the lower expert id.
// The routed rows are grouped by expert so that each expert runs once over a contiguous slice.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model_description.h"

namespace nibble::backend {

struct MoeRouting {
  std::vector<std::int64_t>
      offsets;  // [experts + 1]: expert e owns routed rows [offsets[e], offsets[e+1])
  std::vector<std::int32_t> token;   // [tokens * k]: the token of each routed row
  std::vector<float> weight;         // [tokens * k]: its mixing weight
  std::vector<std::int32_t> source;  // [tokens, k]: token t's j-th routed row
};

// router_logits: [tokens, experts]; kSoftmaxTopK turns them into probabilities in place.
MoeRouting route_tokens(std::span<float> router_logits, std::int64_t tokens, int experts, int k,
                        bool norm_topk_prob,
                        model::MoeRouting routing = model::MoeRouting::kSoftmaxTopK);

}  // namespace nibble::backend
