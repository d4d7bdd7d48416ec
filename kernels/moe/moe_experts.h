#pragma once
// A mixture-of-experts layer's routed experts on the device, from the router's logits to the
// residual-added output, with no host synchronisation (graph-capturable):
//   route (moe_routing.h) -> gather the routed rows -> one grouped W4A16 launch for every active
//   expert's gate_up (or gate, then up) -> SiLU * up -> one grouped launch for the downs ->
//   out = residual + sum_j weight[t, j] * expert_out[source[t, j]].
// The plan (tile and rows per row block) depends on T, E and k only, chosen on the host.
// CPU reference: the CPU backend's MoE layer (engine/backend/cpu) with
// engine/backend/moe_routing.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe/moe_routing.h"
#include "kernels/nvfp4/w4a16_grouped.h"

namespace nibble::kernels {

// One layer's experts, every one of the same shapes, in the W4A16 layout: NVFP4 or MXFP4 (gpt-oss,
// as shipped), the format each W4A16GroupedWeights' shape carries (nvfp4::W4A16Format). fused:
// gate_up [2 I, H] (gate rows first; interleaved with MoeExpertsArgs::clamped_swiglu); otherwise
// gate [I, H] and up [I, H]. down: [H, I].
struct MoeExpertWeights {
  bool fused = true;
  W4A16GroupedWeights gate_up;   // fused
  W4A16GroupedWeights gate, up;  // otherwise
  W4A16GroupedWeights down;
  // A shared expert (Qwen2-MoE, Qwen3-Next: one dense MLP every token runs, its output gated and
  // added) would be carried here; not implemented: non-null is refused.
  const void* shared_expert = nullptr;
  std::int64_t intermediate() const { return fused ? gate_up.shape.n / 2 : gate.shape.n; }
};

struct MoeGroupedPlan {
  W4A16Tile tile = W4A16Tile::kSlice16;
  int block_rows = 8;  // routed rows per row block
  // The decode fusions (slice plans with a fused gate_up whose I % 16 == 0, else ignored): three
  // launches, route -> gate_up with the gather and SiLU * up -> down with the combine
  // (w4a16_grouped.h), instead of six; the same output bits.
  bool fuse = false;
  // With fuse, T <= kMoeRouterMaxTokens and MoeExpertsArgs::router_weight given: the router linear
  // joins the route (moe_router_route), one launch fewer (and the cuBLAS router call gone).
  bool fuse_router = false;
  // With fuse at T = 1: no route launch; the gate_up's and the down's blocks each route the token
  // from the logits themselves (w4a16_grouped.h W4A16GroupedRoute), and the fused router is its
  // linear alone (moe_router_logits): router -> gate_up -> down. The same output bits. On by
  // default (plan_moe_experts at T = 1); the CUDA backend clears it under
  // NIBBLE_MOE_ROUTE_IN_GEMM=0.
  bool route_in_gemm = false;
  // The fused launches (router, gate_up + SiLU, down + combine, the one launch) go out with
  // programmatic dependent launch (kernels/dependent_launch.cuh); false: plain launches (A/B).
  bool overlap = true;
  // With route_in_gemm: the gate_up and the down as one launch whose down slices wait for their
  // pick's gate_up slices, not for the whole gate_up grid (w4a16_grouped_experts_routed). The
  // same output bits. Where the device cannot hold all its blocks at once, the two launches
  // run instead. On by default; the CUDA backend clears it under NIBBLE_MOE_ONE_LAUNCH=0.
  bool one_launch = false;
};
// Few rows per expert (decode): 16-row weight slices over blocks of 8 (or 16) rows, every weight
// byte read once per row block; many (prefill): 64-row tiles, a row block per 64 rows. fuse and
// fuse_router are on for the slice plans (the CUDA backend clears them under NIBBLE_MOE_FUSED=0 /
// NIBBLE_MOE_FUSED_ROUTER=0, its A/B switches).
MoeGroupedPlan plan_moe_experts(std::int64_t tokens, int experts, int k);

// Whether moe_experts takes the fused path for these weights and plan, and whether it also runs
// the router (the args' router_weight is given and the step small enough).
bool moe_experts_fused(const MoeExpertWeights& w, const MoeGroupedPlan& plan);
bool moe_router_fused(const MoeExpertWeights& w, const MoeGroupedPlan& plan, std::int64_t tokens,
                      int hidden, bool router_weight_given);

// 4-byte words of MoeExpertsArgs::arrivals for T tokens of hidden size H: the combine's arrival
// counts, then the one launch's 2 x kMoeMaxTopK counters (MoeGroupedPlan::one_launch).
std::int64_t moe_arrival_words(std::int64_t tokens, std::int64_t hidden);

struct MoeExpertsArgs {
  // [T, E] FP32: the router's scores; written here instead when the router is fused.
  float* router_logits = nullptr;
  const std::uint16_t* router_weight = nullptr;  // [E, H] BF16 or null (the fused router's)
  const std::uint16_t* router_bias = nullptr;    // [E] BF16 or null (the fused router's: gpt-oss)
  const std::uint16_t* hidden = nullptr;         // [T, H]: the normed input of the layer
  const std::uint16_t* residual = nullptr;       // [T, H]
  std::uint16_t* out = nullptr;                  // [T, H]; may not alias hidden or residual
  std::int64_t tokens = 0;
  int experts = 0, k = 0, hidden_size = 0;
  bool norm_topk_prob = true;
  bool top_k_first = false;  // MoeScoring::top_k_first (gpt-oss: router logits with its bias)
  MoeScoring scoring() const { return {norm_topk_prob, top_k_first}; }
  // Scratch, sized for T (the caller's buffers; fixed addresses keep a captured graph valid):
  void* routing_words = nullptr;    // moe_routing_words(T, E, k, 1) 4-byte words
  std::uint16_t* routed = nullptr;  // [T k, H] (unused when fused)
  // moe_arrival_words(T, H) (fused only): zeros before the first use; every layer leaves them
  // zero (the route also zeroes the combine's counts before using them).
  std::int32_t* arrivals = nullptr;
  std::uint16_t* projected = nullptr;   // [T k, 2 I] (unused when fused)
  std::uint16_t* middle = nullptr;      // [T k, I]
  std::uint16_t* expert_out = nullptr;  // [T k, H]
  // gpt-oss's experts (non-null): gate_up's rows interleave gate and up, each expert adds its
  // biases, and the activation is the clamped SwiGLU (w4a16_grouped.h W4A16ClampedSwiglu). Only
  // the decode fusions have it: where the plan does not fuse (prefill), they run with 16-row
  // blocks anyway (correct, slow: each expert's weights read once per 16 of its rows), so
  // `arrivals` is needed at every size; unfused gate and up (w.fused false) or I % 16 != 0:
  // cudaErrorNotSupported.
  const W4A16ClampedSwiglu* clamped_swiglu = nullptr;
};

// cudaErrorInvalidValue on shapes that disagree with the weights or a format/shared expert not
// implemented; else the first launch error.
cudaError_t moe_experts(const MoeExpertWeights& w, const MoeExpertsArgs& a,
                        const MoeGroupedPlan& plan, cudaStream_t stream);

}  // namespace nibble::kernels
