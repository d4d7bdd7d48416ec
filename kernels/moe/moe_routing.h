#pragma once
// Mixture-of-experts routing on the device, with no host synchronisation (a decode step that
// routes this way can be captured in a CUDA graph): router logits -> softmax -> top k -> weights
// (or top k -> softmax over the k: MoeScoring, moe_layout.h), then the deterministic grouping of
// the routed rows by expert and the row-block table of the grouped GEMM (moe_layout.h). CPU
// reference: moe_routing_ref.h (the device results equal it: the same experts and row order;
// weights within float rounding).
//
// Tie rule: probabilities are compared as the CPU computes them (expf of logit - max, a double
// sum, the quotient rounded to float), or the logits as they are with top_k_first; equal scores
// go to the lower expert id.
// Determinism: every output is a function of the logits alone (no floating-point atomics): one
// warp per token picks, then one block per expert (small steps: one warp per expert) counts and
// places its rows in token order.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe/moe_layout.h"

namespace nibble::kernels {

// 4-byte words the arrays of MoeRouting take for (tokens, experts, k, block_rows), and the views
// of them in one buffer of that many words (16-byte aligned arrays).
std::int64_t moe_routing_words(std::int64_t tokens, int experts, int k, int block_rows);
MoeRouting moe_routing_views(void* words, std::int64_t tokens, int experts, int k, int block_rows);

// logits: [tokens, experts] FP32. experts <= kMoeMaxExperts, 1 <= k <= min(experts, kMoeMaxTopK),
// block_rows >= 1; cudaErrorInvalidValue otherwise. tokens == 0 does nothing. One launch up to
// 1024 routed rows (decode: one block does it all), three above (top k, counts, placement).
// clear: clear_count words the launch also sets to zero (the fused combine's arrival counts,
// w4a16_grouped.h), so that no extra launch is needed for them.
cudaError_t moe_route(const float* logits, std::int64_t tokens, int experts, int k,
                      MoeScoring scoring, int block_rows, const MoeRouting& out,
                      cudaStream_t stream, std::int32_t* clear = nullptr,
                      std::int64_t clear_count = 0);
// Softmax then top k (MoeScoring{norm_topk_prob}).
inline cudaError_t moe_route(const float* logits, std::int64_t tokens, int experts, int k,
                             bool norm_topk_prob, int block_rows, const MoeRouting& out,
                             cudaStream_t stream, std::int32_t* clear = nullptr,
                             std::int64_t clear_count = 0) {
  return moe_route(logits, tokens, experts, k, MoeScoring{norm_topk_prob, false}, block_rows, out,
                   stream, clear, clear_count);
}

// The router linear then moe_route's routing, for small steps (decode): logits[t, e] =
// x[t, :] . router[e, :] (moe_router_logits: BF16 inputs, FP32 sums in moe_layout.h's order,
// written to `logits` [T, E]), then the routing of moe_route from those logits as a dependent
// launch (the same outputs as moe_route given them). Two launches, no block waits on another.
// tokens <= kMoeRouterMaxTokens, hidden % 8 == 0, x and router 16-byte aligned; clear as
// moe_route's. router_bias (non-null, gpt-oss): [E] BF16 added to each logit after its sum.
// Measured and removed (kernels/moe/PERF_NOTES.md, "Router forms removed"): the last block of the
// linear routing itself ("spread", 25.4 us for the T = 1 MoE block against 23.0), a warp per expert
// ("blocks", 30.6 us), and the spread form's L2 prefetch of the picked experts.
inline constexpr int kMoeRouterMaxTokens = 8;
cudaError_t moe_router_route(const std::uint16_t* x, const std::uint16_t* router,
                             std::int64_t tokens, int hidden, int experts, int k,
                             MoeScoring scoring, int block_rows, float* logits,
                             const MoeRouting& out, cudaStream_t stream,
                             std::int32_t* clear = nullptr, std::int64_t clear_count = 0,
                             bool overlap = true, const std::uint16_t* router_bias = nullptr);
inline cudaError_t moe_router_route(const std::uint16_t* x, const std::uint16_t* router,
                                    std::int64_t tokens, int hidden, int experts, int k,
                                    bool norm_topk_prob, int block_rows, float* logits,
                                    const MoeRouting& out, cudaStream_t stream,
                                    std::int32_t* clear = nullptr, std::int64_t clear_count = 0,
                                    bool overlap = true) {
  return moe_router_route(x, router, tokens, hidden, experts, k, MoeScoring{norm_topk_prob, false},
                          block_rows, logits, out, stream, clear, clear_count, overlap);
}

// The router linear alone (its logits, the same bits as moe_router_route's), a dependent
// launch where `overlap` (as moe_router_route's; MoeGroupedPlan::overlap): for the grouped launches
// that route a single token themselves (kernels/nvfp4/w4a16_grouped.h W4A16GroupedRoute). Same
// argument rules as moe_router_route.
cudaError_t moe_router_logits(const std::uint16_t* x, const std::uint16_t* router,
                              std::int64_t tokens, int hidden, int experts, float* logits,
                              cudaStream_t stream, bool overlap = true,
                              const std::uint16_t* router_bias = nullptr);

}  // namespace nibble::kernels
