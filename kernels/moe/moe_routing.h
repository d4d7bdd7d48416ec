#pragma once
// Mixture-of-experts routing on the device, with no host synchronisation (a decode step that
// routes this way can be captured in a CUDA graph): router logits -> softmax -> top k -> weights,
// then the deterministic grouping of the routed rows by expert and the row-block table of the
// grouped GEMM (moe_layout.h). CPU reference: moe_routing_ref.h (the device results equal it: the
// same experts and row order; weights within float rounding).
//
// Tie rule: probabilities are compared as the CPU computes them (expf of logit - max, a double
// sum, the quotient rounded to float); equal probabilities go to the lower expert id.
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
                      bool norm_topk_prob, int block_rows, const MoeRouting& out,
                      cudaStream_t stream, std::int32_t* clear = nullptr,
                      std::int64_t clear_count = 0);

// How moe_router_route runs the router linear (MoeGroupedPlan::router_form, an A/B switch):
// Default "split": the fastest on an H200 (kernels/moe/PERF_NOTES.md, "Switches as options"):
// nibble-kernel-bench --moe at T = 1 whole MoE block 23.0 us split, 25.4 spread, 30.6 blocks;
// Qwen3-30B-A3B generate 414.6 tok/s split vs 385.1 spread (both without the L2 prefetch).
//   kSpread ("spread"): kMoeRouterExpertsPerBlock experts per block of
//     kMoeRouterThreads threads (64 blocks at E = 128), FP32 sums in moe_layout.h's order (bitwise
//     moe_router_logits_ref); the last block to finish routes. One launch.
//   kSpreadThenRoute ("split", default): the same linear, then moe_route's one-block kernel as a
//   dependent
//     launch. Two launches, no block waits on an atomic counter.
//   kBlocks ("blocks", the first form): 8 experts per block of 8 warps (16 blocks at E = 128),
//     a warp per expert; the last block routes.
// Every form gives the routing of moe_route from the logits it wrote.
enum class MoeRouterForm { kSpread = 0, kSpreadThenRoute = 1, kBlocks = 2 };
// The form named spread | split | blocks (null or unknown: split), as moe_router_form_name writes
// them; for the callers' option parsers.
MoeRouterForm moe_router_form_from_name(const char* name);
const char* moe_router_form_name(MoeRouterForm form);

// The router linear and moe_route in one launch (kSpreadThenRoute: two), for small steps
// (decode): logits[t, e] = x[t, :] . router[e, :] (BF16 inputs, FP32 sums in a fixed order,
// written to `logits` [T, E]), then the routing of moe_route from those logits (the same outputs
// as moe_route given them). tokens <= kMoeRouterMaxTokens, hidden % 8 == 0, x and router 16-byte
// aligned. counter: one word, zero before the first launch; every launch leaves it zero (the last
// block re-arms it; kSpreadThenRoute does not touch it).
inline constexpr int kMoeRouterMaxTokens = 8;
// prefetch (kSpread only; ignored by the other forms): for each given table (device array [E] of
// kernels/nvfp4/w4a16_gemm.h weights: the gate_up's, the down's), the routing block asks the L2
// for the first tile_bytes of tiles and scale_bytes of scales of every picked expert's weight as
// soon as the picks are counted, so the grouped GEMMs launched next find them there. A hint: the
// results do not change.
struct W4A16DeviceWeight;
struct MoeWeightPrefetch {
  static constexpr int kWeights = 2;
  const W4A16DeviceWeight* table[kWeights] = {};
  std::int64_t tile_bytes[kWeights] = {}, scale_bytes[kWeights] = {};
};
cudaError_t moe_router_route(const std::uint16_t* x, const std::uint16_t* router,
                             std::int64_t tokens, int hidden, int experts, int k,
                             bool norm_topk_prob, int block_rows, float* logits,
                             const MoeRouting& out, std::int32_t* counter, cudaStream_t stream,
                             std::int32_t* clear = nullptr, std::int64_t clear_count = 0,
                             MoeRouterForm form = MoeRouterForm::kSpread,
                             const MoeWeightPrefetch& prefetch = {}, bool overlap = true);

// The spread router's linear alone (its logits, the same bits as moe_router_route's), a dependent
// launch where `overlap` (as moe_router_route's; MoeGroupedPlan::overlap): for the grouped launches
// that route a single token themselves (kernels/nvfp4/w4a16_grouped.h W4A16GroupedRoute). Same
// argument rules as moe_router_route.
cudaError_t moe_router_logits(const std::uint16_t* x, const std::uint16_t* router,
                              std::int64_t tokens, int hidden, int experts, float* logits,
                              cudaStream_t stream, bool overlap = true);

}  // namespace nibble::kernels
