#include "engine/backend/cuda/moe_block.h"

#include <algorithm>
#include <span>
#include <vector>

#include "engine/backend/cuda/swiglu_block.h"
#include "engine/backend/moe_routing.h"
#include "kernels/layer/layer_ops.h"
#include "kernels/moe/moe_experts.h"

namespace nibble::backend::cuda {

MoeBlock::MoeBlock(const CudaMoeOptions& options, const kernels::LayerOptions& layer,
                   LinearRunner& linears, cudaStream_t stream)
    : options_(options), layer_(layer), linears_(linears), stream_(stream) {
  // The fusions layer on each other: the fused router only runs inside a fused route.
  options_.fused_router &= options_.fused;
}

bool MoeBlock::routes_on_device(const DeviceLayer& w, const model::MoeSpec& spec) const {
  // MXFP4 experts run only in the grouped kernels: the host-routing A/B switch passes them by.
  const bool mxfp4 = w.expert_tables.grouped &&
                     w.expert_tables.weights.down.shape.format == nvfp4::W4A16Format::kMxfp4;
  return (!options_.host_routing || mxfp4) && w.expert_tables.grouped &&
         spec.experts <= kernels::kMoeMaxExperts && spec.top_k <= kernels::kMoeMaxTopK &&
         spec.top_k <= spec.experts;
}

void MoeBlock::prepare_device_routing() {
  check(kernels::w4a16_grouped_prepare(), "preparing the MoE kernels");
}

void MoeBlock::run(const DeviceLayer& w, const model::MoeSpec& spec, std::int64_t T,
                   Activations& act, int hidden_size) {
  kernels::MoeGroupedPlan plan = kernels::plan_moe_experts(T, spec.experts, spec.top_k);
  plan.fuse &= options_.fused;
  plan.fuse_router &= options_.fused_router;
  plan.route_in_gemm &= options_.route_in_gemm;
  plan.one_launch &= options_.one_launch;
  plan.overlap &= options_.overlap;
  const bool on_device = routes_on_device(w, spec);
  // A BF16 router (with its bias in BF16, gpt-oss) runs inside the route at decode
  // (moe_router_route) unless switched off.
  const bool router_fused =
      on_device && !w.router.nvfp4 && w.router.n == spec.experts && w.router.k == hidden_size &&
      kernels::moe_router_fused(w.expert_tables.weights, plan, T, hidden_size, true);
  if (!router_fused) linears_.run_float(w.router, act.h.get(), T, act.router.get(), act.scratch);
  if (!on_device) {
    run_on_host(w, spec, T, act, hidden_size);
    return;
  }
  kernels::MoeExpertsArgs a;
  a.router_logits = act.router.get();
  a.router_weight = router_fused ? w.router.dense.get() : nullptr;
  a.router_bias = router_fused ? w.router_bias.get() : nullptr;
  a.hidden = act.h.get();
  a.residual = act.x2.get();
  a.out = act.x.get();
  a.tokens = T;
  a.experts = spec.experts;
  a.k = spec.top_k;
  a.hidden_size = hidden_size;
  a.norm_topk_prob = spec.norm_topk_prob;
  a.top_k_first = spec.routing == model::MoeRouting::kTopKSoftmax;
  a.routing_words = act.moe_routing.get();
  a.arrivals = act.moe_arrivals.get();
  a.routed = act.routed.get();
  a.projected = act.gate.get();
  a.middle = act.up.get();
  a.expert_out = act.expert_out.get();
  // gpt-oss's experts: only the decode fusions have them; a prefill-sized plan runs those in
  // 16-row blocks (moe_experts.h), each expert's weights read once per 16 of its rows.
  const kernels::W4A16ClampedSwiglu swiglu{w.expert_tables.gate_up_bias.get(),
                                           w.expert_tables.down_bias.get(), spec.swiglu_alpha,
                                           spec.swiglu_limit};
  if (spec.activation == model::ExpertActivation::kClampedSwiGlu) a.clamped_swiglu = &swiglu;
  check(kernels::moe_experts(w.expert_tables.weights, a, plan, stream_), "moe_experts");
}

// The fallback (and A/B) path: the router's scores go to the host (moe_routing.h), one
// synchronisation per MoE layer; each expert then runs over its slice of the gathered rows.
void MoeBlock::run_on_host(const DeviceLayer& w, const model::MoeSpec& spec, std::int64_t T,
                           Activations& act, int hidden_size) {
  const int E = spec.experts, K = spec.top_k, H = hidden_size;
  router_host_.ensure(std::size_t(T) * std::size_t(E));
  check(cudaMemcpyAsync(router_host_.get(), act.router.get(), std::size_t(T * E) * 4,
                        cudaMemcpyDeviceToHost, stream_),
        "copying router scores");
  check(cudaStreamSynchronize(stream_), "running the router");
  const MoeRouting r = route_tokens(std::span(router_host_.get(), std::size_t(T * E)), T, E, K,
                                    spec.norm_topk_prob, spec.routing);
  const std::size_t n = std::size_t(T * K);
  std::vector<float> weight(n);
  for (std::size_t i = 0; i < n; ++i) weight[i] = r.weight[std::size_t(r.source[i])];
  // One upload: routed rows' tokens, each token's sources, their weights.
  moe_host_.ensure(3 * n);
  std::copy(r.token.begin(), r.token.end(), reinterpret_cast<std::int32_t*>(moe_host_.get()));
  std::copy(r.source.begin(), r.source.end(), reinterpret_cast<std::int32_t*>(moe_host_.get() + n));
  std::copy(weight.begin(), weight.end(), reinterpret_cast<float*>(moe_host_.get() + 2 * n));
  moe_device_.ensure(3 * n);
  check(cudaMemcpyAsync(moe_device_.get(), moe_host_.get(), 3 * n * 4, cudaMemcpyHostToDevice,
                        stream_),
        "copying the routing");
  const auto* token = reinterpret_cast<const std::int32_t*>(moe_device_.get());
  const auto* source = reinterpret_cast<const std::int32_t*>(moe_device_.get() + n);
  const auto* weights = reinterpret_cast<const float*>(moe_device_.get() + 2 * n);
  check(kernels::gather_rows(act.h.get(), token, int(n), H, act.routed.get(), stream_),
        "gather_rows");
  for (int e = 0; e < E; ++e) {
    const std::int64_t first = r.offsets[std::size_t(e)],
                       rows = r.offsets[std::size_t(e) + 1] - first;
    if (rows == 0) continue;
    const DeviceMlp& expert = w.experts[std::size_t(e)];
    const std::uint16_t* in = act.routed.get() + first * H;
    std::uint16_t* out = act.expert_out.get() + first * H;
    std::uint16_t* projected = act.gate.get() + first * 2 * expert.width();
    std::uint16_t* middle = act.up.get() + first * expert.width();
    if (spec.activation == model::ExpertActivation::kClampedSwiGlu) {
      // gpt-oss's expert, its biases riding with the linears.
      linears_.run(expert.gate_up, in, rows, nullptr, projected);
      check(kernels::clamped_swiglu_interleaved(projected, rows, expert.width(), spec.swiglu_alpha,
                                                spec.swiglu_limit, middle, stream_, layer_),
            "clamped_swiglu_interleaved");
      linears_.run(expert.down, middle, rows, nullptr, out);
      continue;
    }
    run_swiglu(linears_, expert, in, rows, nullptr, out, projected, middle, stream_, layer_);
  }
  check(kernels::combine_experts(act.x2.get(), act.expert_out.get(), source, weights, int(T), K, H,
                                 act.x.get(), stream_),
        "combine_experts");
}

}  // namespace nibble::backend::cuda
