#pragma once
// CPU reference of the device MoE routing (moe_routing.h): the same outputs, computed the way
// engine/backend/moe_routing.cpp routes (softmax over all experts with a double sum, top k by a
// stable sort so that ties go to the lower expert id, weights renormalised over the k picks when
// norm_topk_prob; or, MoeScoring::top_k_first, the top k logits by the same sort and a softmax over
// them; rows grouped by expert with tokens in increasing order), plus the row-block table of the
// grouped GEMM (moe_layout.h).
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/moe/moe_layout.h"

namespace nibble::kernels {

struct MoeRoutingRef {
  std::vector<std::int32_t> expert;   // [T, k]: token t's j-th pick (highest probability first)
  std::vector<float> weight;          // [T, k]: its mixing weight
  std::vector<std::int32_t> offsets;  // [E + 1]: expert e owns routed rows [offsets[e], [e + 1])
  std::vector<std::int32_t> token;    // [T k]: the token of each routed row
  std::vector<std::int32_t> source;   // [T, k]: the routed row of token t's j-th pick
  std::vector<MoeRowBlock> blocks;    // [moe_max_row_blocks(T k, E, block_rows)]
};

// logits: [tokens, experts] router scores (FP32). block_rows >= 1.
MoeRoutingRef moe_route_ref(std::span<const float> logits, std::int64_t tokens, int experts, int k,
                            MoeScoring scoring, int block_rows);
inline MoeRoutingRef moe_route_ref(std::span<const float> logits, std::int64_t tokens, int experts,
                                   int k, bool norm_topk_prob, int block_rows) {
  return moe_route_ref(logits, tokens, experts, k, MoeScoring{norm_topk_prob, false}, block_rows);
}

// The router linear as the device computes it (moe_router_logits, moe_router_route), bitwise:
// logits [tokens, experts] FP32 with logits[t, e] = x[t, :] . router[e, :] summed in moe_layout.h's
// order (kMoeRouterThreads). x: [tokens, hidden] BF16 bits, router: [experts, hidden]; hidden % 8
// == 0; bias: empty, or the router's [experts] BF16 bias, added last.
std::vector<float> moe_router_logits_ref(std::span<const std::uint16_t> x,
                                         std::span<const std::uint16_t> router, std::int64_t tokens,
                                         int hidden, int experts,
                                         std::span<const std::uint16_t> bias = {});

}  // namespace nibble::kernels
