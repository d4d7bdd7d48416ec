#include "kernels/moe/moe_experts.h"

#include "kernels/layer/layer_ops.h"

namespace nibble::kernels {

MoeGroupedPlan plan_moe_experts(std::int64_t tokens, int experts, int k) {
  const bool fuse = true, fuse_router = true;
  const std::int64_t routed = tokens * k;
  // Rows per expert if the load were even (no host look at the routing: T, E, k only).
  const std::int64_t per_expert = (routed + experts - 1) / (experts > 0 ? experts : 1);
  if (per_expert <= 8) {
    MoeGroupedPlan plan{W4A16Tile::kSlice16, 8, fuse, fuse_router};
    plan.route_in_gemm = tokens == 1;
    plan.one_launch = tokens == 1;
    return plan;
  }
  if (per_expert <= 32) return {W4A16Tile::kSlice16, 16, fuse, fuse_router};
  return {W4A16Tile::kM64, 64, false, false};
}

bool moe_experts_fused(const MoeExpertWeights& w, const MoeGroupedPlan& plan) {
  return plan.fuse && plan.tile == W4A16Tile::kSlice16 && plan.block_rows <= 16 && w.fused &&
         w.gate_up.shape.n % 32 == 0;
}

bool moe_router_fused(const MoeExpertWeights& w, const MoeGroupedPlan& plan, std::int64_t tokens,
                      int hidden, bool router_weight_given) {
  return moe_experts_fused(w, plan) && plan.fuse_router && router_weight_given &&
         tokens <= kMoeRouterMaxTokens && hidden % 8 == 0;
}

std::int64_t moe_arrival_words(std::int64_t tokens, std::int64_t hidden) {
  return tokens * w4a16_grouped_combine_slices(hidden) + 2 * kMoeMaxTopK;
}

namespace {
bool shape_is(const W4A16GroupedWeights& w, std::int64_t n, std::int64_t k) {
  return w.table != nullptr && w.shape.n == n && w.shape.k == k;
}
}  // namespace

cudaError_t moe_experts(const MoeExpertWeights& w, const MoeExpertsArgs& a,
                        const MoeGroupedPlan& plan, cudaStream_t stream) {
  if (w.shared_expert != nullptr) return cudaErrorInvalidValue;
  const std::int64_t T = a.tokens, H = a.hidden_size, I = w.intermediate();
  const bool shapes =
      w.fused ? shape_is(w.gate_up, 2 * I, H) : shape_is(w.gate, I, H) && shape_is(w.up, I, H);
  if (!shapes || !shape_is(w.down, H, I) || T < 0) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  // gpt-oss's experts have no unfused form (its SiLU * up and grouped GEMMs have no biases):
  // where the plan does not fuse (prefill), the decode fusions run with 16-row blocks, correct
  // but reading each expert's weights once per 16 of its rows (kernels/nvfp4/PERF_NOTES.md v33).
  if (a.clamped_swiglu != nullptr && !moe_experts_fused(w, plan)) {
    MoeGroupedPlan slices = plan;
    slices.tile = W4A16Tile::kSlice16;
    slices.block_rows = 16;
    slices.fuse = true;
    slices.fuse_router = slices.route_in_gemm = slices.one_launch = false;
    if (!moe_experts_fused(w, slices)) return cudaErrorNotSupported;
    return moe_experts(w, a, slices, stream);
  }
  const std::int64_t routed = T * a.k;
  const MoeRouting r = moe_routing_views(a.routing_words, T, a.experts, a.k, plan.block_rows);
  const std::int64_t blocks = moe_max_row_blocks(routed, a.experts, plan.block_rows);
  if (moe_experts_fused(w, plan)) {
    // route (+ zero the arrival counts) -> gate_up . gathered x, SiLU * up -> down + combine.
    if (a.arrivals == nullptr) return cudaErrorInvalidValue;
    std::int32_t* const counts = a.arrivals;
    const std::int64_t count_words = T * w4a16_grouped_combine_slices(H);  // the combine's
    if (T == 1 && plan.route_in_gemm) {
      // [router ->] gate_up and down, each block routing the token itself.
      if (moe_router_fused(w, plan, T, int(H), a.router_weight != nullptr)) {
        const cudaError_t err =
            moe_router_logits(a.hidden, a.router_weight, T, int(H), a.experts, a.router_logits,
                              stream, plan.overlap, a.router_bias);
        if (err != cudaSuccess) return err;
      }
      const W4A16GroupedRoute route{.logits = a.router_logits,
                                    .experts = a.experts,
                                    .k = a.k,
                                    .scoring = a.scoring(),
                                    .out = r,
                                    .clear = counts,
                                    .clear_count = int(count_words)};
      W4A16GroupedCombine combine{
          .residual = a.residual, .out = a.out, .arrivals = counts, .k = a.k, .route = route};
      if (a.clamped_swiglu != nullptr) {
        combine.clamped_swiglu = true;
        combine.swiglu = *a.clamped_swiglu;
      }
      if (plan.one_launch) {
        const cudaError_t err =
            w4a16_grouped_experts_routed(a.hidden, w.gate_up, w.down, combine, a.middle,
                                         a.expert_out, counts + count_words, stream, plan.overlap);
        if (err != cudaErrorNotSupported) return err;  // else nothing ran: the two launches
      }
      cudaError_t err = w4a16_grouped_gate_up_silu_routed(a.hidden, w.gate_up, route, a.middle,
                                                          stream, plan.overlap, a.clamped_swiglu);
      if (err != cudaSuccess) return err;
      return w4a16_grouped_down_combine_routed(a.middle, w.down, combine, a.expert_out, stream,
                                               plan.overlap);
    }
    cudaError_t err =
        moe_router_fused(w, plan, T, int(H), a.router_weight != nullptr)
            ? moe_router_route(a.hidden, a.router_weight, T, int(H), a.experts, a.k, a.scoring(),
                               plan.block_rows, a.router_logits, r, stream, counts, count_words,
                               plan.overlap, a.router_bias)
            : moe_route(a.router_logits, T, a.experts, a.k, a.scoring(), plan.block_rows, r, stream,
                        counts, count_words);
    if (err != cudaSuccess) return err;
    err =
        w4a16_grouped_gate_up_silu(a.hidden, r.token, w.gate_up, r.blocks, blocks, plan.block_rows,
                                   a.middle, stream, plan.overlap, a.clamped_swiglu);
    if (err != cudaSuccess) return err;
    W4A16GroupedCombine combine{.token = r.token,
                                .source = r.source,
                                .weight = r.weight,
                                .residual = a.residual,
                                .out = a.out,
                                .arrivals = counts,
                                .k = a.k};
    if (a.clamped_swiglu != nullptr) {
      combine.clamped_swiglu = true;
      combine.swiglu = *a.clamped_swiglu;
    }
    return w4a16_grouped_down_combine(a.middle, w.down, r.blocks, blocks, plan.block_rows, combine,
                                      a.expert_out, stream, plan.overlap);
  }
  cudaError_t err =
      moe_route(a.router_logits, T, a.experts, a.k, a.scoring(), plan.block_rows, r, stream);
  if (err != cudaSuccess) return err;
  err = gather_rows(a.hidden, r.token, int(routed), int(H), a.routed, stream);
  if (err != cudaSuccess) return err;
  auto grouped = [&](const W4A16GroupedWeights& g, const std::uint16_t* x, std::uint16_t* out) {
    return w4a16_grouped_linear(x, routed, g, r.blocks, blocks, plan.block_rows, plan.tile, out,
                                stream);
  };
  if (w.fused) {
    if ((err = grouped(w.gate_up, a.routed, a.projected)) != cudaSuccess) return err;
    err = silu_mul_halves(a.projected, routed, I, a.middle, stream);
  } else {
    std::uint16_t* up = a.projected + routed * I;
    if ((err = grouped(w.gate, a.routed, a.projected)) != cudaSuccess) return err;
    if ((err = grouped(w.up, a.routed, up)) != cudaSuccess) return err;
    err = silu_mul(a.projected, up, routed * I, a.middle, stream);
  }
  if (err != cudaSuccess) return err;
  if ((err = grouped(w.down, a.middle, a.expert_out)) != cudaSuccess) return err;
  return combine_experts(a.residual, a.expert_out, r.source, r.weight, int(T), a.k, int(H), a.out,
                         stream);
}

}  // namespace nibble::kernels
