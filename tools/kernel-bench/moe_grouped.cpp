#include "tools/kernel-bench/moe_grouped.h"

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kernels/moe/moe_experts.h"
#include "kernels/moe/moe_routing_ref.h"
#include "tools/kernel-bench/bench_util.h"

namespace nibble::bench {
namespace {

constexpr int kCopies = 2, kRoutings = 20;

template <class T>
T* device_alloc(std::size_t count, std::vector<void*>& allocations) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T)));
  allocations.push_back(p);
  return static_cast<T*>(p);
}

// Two copies of every expert's gate_up and down, as device tables.
struct ExpertCopies {
  std::array<kernels::MoeExpertWeights, kCopies> weights;
  double bytes_per_expert = 0;  // codes + scale bytes streamed (one per 16 values), unpadded
};

// An expert weight [n, k] in the W4A16 layout: NVFP4, or MXFP4 as gpt-oss ships it (random codes,
// E8M0 exponents 2^-6 .. 2^-3).
nvfp4::W4A16Weight random_expert(std::int64_t n, std::int64_t k, bool mxfp4, std::mt19937_64& rng) {
  if (!mxfp4) {
    const RandomNvfp4 w = random_nvfp4(n, k, rng);
    return nvfp4::repack_for_w4a16(w.packed, w.scales, n, k, 1e-2f);
  }
  std::vector<std::uint8_t> packed(std::size_t(n * k / 2)), e8m0(std::size_t(n * k / 32));
  std::uniform_int_distribution<int> byte(0, 255), exponent(121, 124);
  for (auto& b : packed) b = std::uint8_t(byte(rng));
  for (auto& e : e8m0) e = std::uint8_t(exponent(rng));
  return nvfp4::repack_mxfp4_for_w4a16(packed, e8m0, n, k);
}

ExpertCopies make_experts(const MoeBenchShape& shape, std::mt19937_64& rng,
                          std::vector<void*>& allocations) {
  ExpertCopies c;
  const std::int64_t kHidden = shape.hidden, kInter = shape.inter;
  std::array<std::vector<kernels::W4A16DeviceWeight>, kCopies> gate_up, down;
  for (int e = 0; e < shape.experts; ++e) {
    const auto gu_r = random_expert(2 * kInter, kHidden, shape.gpt_oss, rng);
    const auto dn_r = random_expert(kHidden, kInter, shape.gpt_oss, rng);
    for (int copy = 0; copy < kCopies; ++copy) {
      gate_up[std::size_t(copy)].push_back(upload_w4a16(gu_r, allocations));
      down[std::size_t(copy)].push_back(upload_w4a16(dn_r, allocations));
    }
    c.bytes_per_expert = double(3 * kInter * kHidden) * (0.5 + 1.0 / 16);
  }
  for (int copy = 0; copy < kCopies; ++copy) {
    auto table = [&](const std::vector<kernels::W4A16DeviceWeight>& host) {
      auto* d = device_alloc<kernels::W4A16DeviceWeight>(host.size(), allocations);
      CHECK_CUDA(cudaMemcpy(d, host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice));
      return kernels::W4A16GroupedWeights{d, host[0]};
    };
    kernels::MoeExpertWeights& w = c.weights[std::size_t(copy)];
    w.fused = true;
    w.gate_up = table(gate_up[std::size_t(copy)]);
    w.down = table(down[std::size_t(copy)]);
  }
  return c;
}

// The router and routing alone at decode sizes, moe_router_route against cuBLAS + the one-block
// route.
// kRouterCopies router copies (100 MB, past the L2) rotate over kRouterCalls calls a graph, so
// the weights come from DRAM as in a decode step.
void bench_moe_router(const MoeBenchShape& shape, int reps, cudaStream_t stream,
                      cublasHandle_t cublas, std::mt19937_64& rng) {
  constexpr int kRouterCopies = 200, kRouterCalls = 200;
  const int kExperts = shape.experts, kTopK = shape.k;
  const std::int64_t kHidden = shape.hidden;
  const kernels::MoeScoring scoring{!shape.gpt_oss, shape.gpt_oss};
  std::vector<void*> local;
  std::vector<std::uint16_t*> routers;
  for (int i = 0; i < kRouterCopies; ++i) {
    routers.push_back(device_alloc<std::uint16_t>(std::size_t(kExperts * kHidden), local));
    if (i == 0) {
      fill_random_bf16(routers[0], std::size_t(kExperts * kHidden), rng);
    } else {
      CHECK_CUDA(cudaMemcpy(routers.back(), routers[0], std::size_t(kExperts * kHidden) * 2,
                            cudaMemcpyDeviceToDevice));
    }
  }
  std::printf(
      "\nrouter + routing alone (E %d, H %lld, k %d; weights rotated past the L2): cuBLAS = the\n"
      "BF16 router GEMM (FP32 out), route = moe_route's one-block kernel; us per call\n",
      kExperts, (long long)kHidden, kTopK);
  std::printf("%6s %9s %9s %13s %13s\n", "T", "cuBLAS", "route", "cuBLAS+route", "router_route");
  for (const std::int64_t T : {1, 2, 4, 8}) {
    const int block_rows = kernels::plan_moe_experts(T, kExperts, kTopK).block_rows;
    auto* x = device_alloc<std::uint16_t>(std::size_t(T * kHidden), local);
    fill_random_bf16(x, std::size_t(T * kHidden), rng);
    auto* logits = device_alloc<float>(std::size_t(T * kExperts), local);
    auto* words = device_alloc<std::int32_t>(
        std::size_t(kernels::moe_routing_words(T, kExperts, kTopK, block_rows)), local);
    const kernels::MoeRouting r = kernels::moe_routing_views(words, T, kExperts, kTopK, block_rows);
    auto cublas_router = [&](int i, cudaStream_t s) {
      CHECK_CUBLAS(cublasSetStream(cublas, s));
      const float alpha = 1.0f, beta = 0.0f;
      CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, kExperts, int(T), int(kHidden),
                                &alpha, routers[std::size_t(i % kRouterCopies)], CUDA_R_16BF,
                                int(kHidden), x, CUDA_R_16BF, int(kHidden), &beta, logits,
                                CUDA_R_32F, kExperts, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    auto route = [&](int, cudaStream_t s) {
      CHECK_CUDA(kernels::moe_route(logits, T, kExperts, kTopK, scoring, block_rows, r, s));
    };
    const double cublas_us = median_us(reps, stream, cublas_router, kRouterCalls);
    const double route_us = median_us(reps, stream, route, kRouterCalls);
    const double both_us = median_us(
        reps, stream,
        [&](int i, cudaStream_t s) {
          cublas_router(i, s);
          route(i, s);
        },
        kRouterCalls);
    const double router_route_us = median_us(
        reps, stream,
        [&](int i, cudaStream_t s) {
          CHECK_CUDA(kernels::moe_router_route(x, routers[std::size_t(i % kRouterCopies)], T,
                                               int(kHidden), kExperts, kTopK, scoring, block_rows,
                                               logits, r, s));
        },
        kRouterCalls);
    std::printf("%6lld %9.1f %9.1f %13.1f %13.1f\n", (long long)T, cublas_us, route_us, both_us,
                router_route_us);
    std::fflush(stdout);
  }
  for (void* p : local) CHECK_CUDA(cudaFree(p));
}

// The dev build's timeline of the last one launch (-DNIBBLE_MOE_TIMELINE=ON): per phase, the
// spread over the blocks of when they passed it, from the first block's entry.
void print_one_launch_timeline() {
  kernels::MoeDecodeTimeline t;
  if (kernels::w4a16_moe_decode_timeline(&t) != cudaSuccess || t.at.empty()) return;
  const char* names[] = {"entry",  "waited",       "probabilities",    "ranked",
                         "routed", "gate_up done", "down wait passed", "down done"};
  std::uint64_t t0 = UINT64_MAX;
  for (const auto& b : t.at) t0 = std::min(t0, b[kernels::MoeDecodeTimeline::kEntry]);
  std::printf("  one launch's last run (us from the first block's entry; %zu blocks):\n",
              t.at.size());
  for (int p = 0; p < kernels::MoeDecodeTimeline::kPoints; ++p) {
    std::vector<double> us;
    const bool routed_here = t.at[0][kernels::MoeDecodeTimeline::kProbabilities] != 0;
    if (!routed_here && (p == kernels::MoeDecodeTimeline::kProbabilities ||
                         p == kernels::MoeDecodeTimeline::kRanked))
      continue;
    for (std::size_t b = 0; b < t.at.size(); ++b) {
      if (p == kernels::MoeDecodeTimeline::kGateUpDone && int(b) % t.slices >= t.gate_slices)
        continue;  // a down slice only
      us.push_back(double(t.at[b][std::size_t(p)] - t0) / 1e3);
    }
    std::sort(us.begin(), us.end());
    std::printf("    %-17s min %6.2f  p10 %6.2f  p50 %6.2f  p90 %6.2f  max %6.2f\n", names[p],
                us.front(), us[us.size() / 10], us[us.size() / 2], us[us.size() * 9 / 10],
                us.back());
  }
  std::map<int, int> per_sm, spread;
  for (const int sm : t.sm) ++per_sm[sm];
  for (const auto& [sm, blocks] : per_sm) ++spread[blocks];
  std::printf("    blocks an SM (blocks: SMs):");
  for (const auto& [blocks, sms] : spread) std::printf(" %d: %d", blocks, sms);
  std::printf("\n");
}

}  // namespace

void bench_moe_grouped(int reps, double copy_gbs, cudaStream_t stream, const MoeBenchShape& shape) {
  const int kExperts = shape.experts, kTopK = shape.k;
  const std::int64_t kHidden = shape.hidden, kInter = shape.inter;
  const kernels::MoeScoring scoring{!shape.gpt_oss, shape.gpt_oss};
  std::mt19937_64 rng(2026);
  std::vector<void*> allocations;
  cublasHandle_t cublas;
  CHECK_CUBLAS(cublasCreate(&cublas));
  const ExpertCopies experts = make_experts(shape, rng, allocations);
  // gpt-oss: every expert's gate_up and down biases (BF16), the clamped SwiGLU's constants.
  auto* gate_up_bias = device_alloc<std::uint16_t>(std::size_t(kExperts * 2 * kInter), allocations);
  auto* down_bias = device_alloc<std::uint16_t>(std::size_t(kExperts * kHidden), allocations);
  fill_random_bf16(gate_up_bias, std::size_t(kExperts * 2 * kInter), rng);
  fill_random_bf16(down_bias, std::size_t(kExperts * kHidden), rng);
  const kernels::W4A16ClampedSwiglu swiglu{gate_up_bias, down_bias, 1.702f, 7.0f};
  std::printf(
      "MoE experts, %s shapes (E %d, k %d, hidden %lld, moe_intermediate %lld), "
      "%.2f MB per expert; every call another routing and copy\n",
      shape.name, kExperts, kTopK, (long long)kHidden, (long long)kInter,
      experts.bytes_per_expert / 1e6);
  if (shape.gpt_oss)
    std::printf(
        "gpt-oss: MXFP4 experts, top k then softmax, biases and the clamped SwiGLU; layer: 0 (the\n"
        "  unfused path refuses the clamped SwiGLU), the fused columns where the plan fuses\n");
  std::printf(
      "unfused: gate_up, down = the grouped GEMMs alone; layer = route, gather, gate_up, SiLU,\n"
      "  down, combine (from router logits)\n"
      "fused (NIBBLE_MOE_FUSED, slice plans): route, gate_up + gather + SiLU, down + combine\n"
      "+router: fused, the BF16 router linear before the route (--moe-fused-router): the\n"
      "  whole MoE block; compare it with fused + cuBLAS router (the router the other paths run)\n"
      "+r.gemm: T = 1, the router linear alone, then gate_up and down routing the token in their\n"
      "  own blocks (NIBBLE_MOE_ROUTE_IN_GEMM): no route launch\n"
      "+r.one: +r.gemm with gate_up and down as one launch (NIBBLE_MOE_ONE_LAUNCH)\n"
      "%%copy: the active experts' weight bytes over the time, against the copy ceiling\n");
  std::printf("%6s %6s %9s %5s %8s %8s %8s %6s %7s %9s %6s %9s %6s %9s %9s %6s %9s %9s %6s %13s\n",
              "T", "active", "tile", "rows", "gate_up", "down", "GEMMs", "%copy", "route", "layer",
              "%copy", "fused", "%copy", "f.gate_up", "+router", "%copy", "+r.gemm", "+r.one",
              "%copy", "cuBLAS router");
  for (const std::int64_t T : {1, 4, 8, 64, 512, 4096}) {
    const std::int64_t routed = T * kTopK;
    kernels::MoeGroupedPlan plan = kernels::plan_moe_experts(T, kExperts, kTopK);
    std::vector<void*> local;
    // Per routing: logits and the routing arrays (routed once here for the GEMM-only timings).
    std::vector<float*> logits;
    std::vector<std::int32_t*> words;
    double active = 0;
    const auto routing_words = std::size_t(kernels::moe_routing_words(T, kExperts, kTopK, 1));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int r = 0; r < kRoutings; ++r) {
      std::vector<float> host(std::size_t(T * kExperts));
      for (auto& v : host) v = normal(rng);
      const kernels::MoeRoutingRef ref =
          kernels::moe_route_ref(host, T, kExperts, kTopK, scoring, plan.block_rows);
      active += double(std::set<std::int32_t>(ref.expert.begin(), ref.expert.end()).size());
      logits.push_back(device_alloc<float>(host.size(), local));
      CHECK_CUDA(cudaMemcpy(logits.back(), host.data(), host.size() * 4, cudaMemcpyHostToDevice));
      words.push_back(device_alloc<std::int32_t>(routing_words, local));
      CHECK_CUDA(kernels::moe_route(
          logits.back(), T, kExperts, kTopK, scoring, plan.block_rows,
          kernels::moe_routing_views(words.back(), T, kExperts, kTopK, plan.block_rows), stream));
    }
    active /= kRoutings;
    auto* hidden = device_alloc<std::uint16_t>(std::size_t(T * kHidden), local);
    auto* residual = device_alloc<std::uint16_t>(std::size_t(T * kHidden), local);
    auto* out = device_alloc<std::uint16_t>(std::size_t(T * kHidden), local);
    auto* routed_x = device_alloc<std::uint16_t>(std::size_t(routed * kHidden), local);
    auto* projected = device_alloc<std::uint16_t>(std::size_t(routed * 2 * kInter), local);
    auto* middle = device_alloc<std::uint16_t>(std::size_t(routed * kInter), local);
    auto* expert_out = device_alloc<std::uint16_t>(std::size_t(routed * kHidden), local);
    fill_random_bf16(hidden, std::size_t(T * kHidden), rng);
    fill_random_bf16(residual, std::size_t(T * kHidden), rng);
    fill_random_bf16(routed_x, std::size_t(routed * kHidden), rng);
    fill_random_bf16(middle, std::size_t(routed * kInter), rng);
    const std::int64_t max_blocks = kernels::moe_max_row_blocks(routed, kExperts, plan.block_rows);
    auto blocks = [&](int i) {
      return kernels::moe_routing_views(words[std::size_t(i % kRoutings)], T, kExperts, kTopK,
                                        plan.block_rows)
          .blocks;
    };
    const double gate_up_us = median_us(reps, stream, [&](int i, cudaStream_t s) {
      CHECK_CUDA(kernels::w4a16_grouped_linear(
          routed_x, routed, experts.weights[std::size_t(i % kCopies)].gate_up, blocks(i),
          max_blocks, plan.block_rows, plan.tile, projected, s));
    });
    const double down_us = median_us(reps, stream, [&](int i, cudaStream_t s) {
      CHECK_CUDA(kernels::w4a16_grouped_linear(
          middle, routed, experts.weights[std::size_t(i % kCopies)].down, blocks(i), max_blocks,
          plan.block_rows, plan.tile, expert_out, s));
    });
    // The whole layer from router logits: route, gather, gate_up, SiLU * up, down, combine
    // (unfused), or route, gate_up + gather + SiLU, down + combine (fused).
    auto* layer_words = device_alloc<std::int32_t>(routing_words, local);
    auto* arrivals =
        device_alloc<std::int32_t>(std::size_t(kernels::moe_arrival_words(T, kHidden)), local);
    const double route_us = median_us(reps, stream, [&](int i, cudaStream_t s) {
      CHECK_CUDA(kernels::moe_route(
          logits[std::size_t(i % kRoutings)], T, kExperts, kTopK, scoring, plan.block_rows,
          kernels::moe_routing_views(layer_words, T, kExperts, kTopK, plan.block_rows), s));
    });
    const bool can_fuse = kernels::moe_experts_fused(experts.weights[0], plan);
    const double fused_gate_up_us =
        !can_fuse ? 0.0 : median_us(reps, stream, [&](int i, cudaStream_t s) {
          const kernels::MoeRouting r = kernels::moe_routing_views(
              words[std::size_t(i % kRoutings)], T, kExperts, kTopK, plan.block_rows);
          CHECK_CUDA(kernels::w4a16_grouped_gate_up_silu(
              hidden, r.token, experts.weights[std::size_t(i % kCopies)].gate_up, r.blocks,
              max_blocks, plan.block_rows, middle, s, true, shape.gpt_oss ? &swiglu : nullptr));
        });
    // A BF16 router [E, H] for the fused router + route (the logits it writes go to a scratch).
    auto* router = device_alloc<std::uint16_t>(std::size_t(kExperts * kHidden), local);
    fill_random_bf16(router, std::size_t(kExperts * kHidden), rng);
    auto* router_logits = device_alloc<float>(std::size_t(T * kExperts), local);
    const bool can_route_in_gemm = plan.route_in_gemm;
    auto layer = [&](bool fuse, bool fuse_router = false, bool route_in_gemm = false,
                     bool one_launch = false) {
      if (shape.gpt_oss && !fuse) return 0.0;  // the unfused path has no clamped SwiGLU
      plan.route_in_gemm = route_in_gemm;
      plan.one_launch = one_launch;
      plan.fuse = fuse;
      plan.fuse_router = fuse_router;
      return median_us(reps, stream, [&](int i, cudaStream_t s) {
        const kernels::MoeExpertsArgs a{
            .router_logits = fuse_router ? router_logits : logits[std::size_t(i % kRoutings)],
            .router_weight = fuse_router ? router : nullptr,
            .hidden = hidden,
            .residual = residual,
            .out = out,
            .tokens = T,
            .experts = kExperts,
            .k = kTopK,
            .hidden_size = int(kHidden),
            .norm_topk_prob = !shape.gpt_oss,
            .top_k_first = shape.gpt_oss,
            .routing_words = layer_words,
            .routed = routed_x,
            .arrivals = arrivals,
            .projected = projected,
            .middle = middle,
            .expert_out = expert_out,
            .clamped_swiglu = shape.gpt_oss ? &swiglu : nullptr};
        CHECK_CUDA(kernels::moe_experts(experts.weights[std::size_t(i % kCopies)], a, plan, s));
      });
    };
    const double layer_us = layer(false);
    const double fused_us = can_fuse ? layer(true) : 0.0;
    plan.fuse_router = true;
    const bool can_fuse_router =
        kernels::moe_router_fused(experts.weights[0], plan, T, int(kHidden), true);
    const double router_us = can_fuse_router ? layer(true, true) : 0.0;
    const double in_gemm_us = can_fuse_router && can_route_in_gemm ? layer(true, true, true) : 0.0;
    // The same as one launch (zeroed counts on entry; every call leaves them zero).
    CHECK_CUDA(cudaMemset(
        arrivals, 0, std::size_t(kernels::moe_arrival_words(T, kHidden)) * sizeof(std::int32_t)));
    const double one_launch_us =
        can_fuse_router && can_route_in_gemm ? layer(true, true, true, true) : 0.0;
    if (one_launch_us > 0) print_one_launch_timeline();
    // The unfused paths' router: cuBLAS BF16 x BF16 -> FP32, as the backend runs it
    // (engine/backend/cuda/device_linear.cpp).
    const double cublas_router_us = median_us(reps, stream, [&](int, cudaStream_t s) {
      CHECK_CUBLAS(cublasSetStream(cublas, s));
      const float alpha = 1.0f, beta = 0.0f;
      CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, kExperts, int(T), int(kHidden),
                                &alpha, router, CUDA_R_16BF, int(kHidden), hidden, CUDA_R_16BF,
                                int(kHidden), &beta, router_logits, CUDA_R_32F, kExperts,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    const double gemm_us = gate_up_us + down_us;
    auto copy_percent = [&](double us) {
      return us > 0 ? 100.0 * active * experts.bytes_per_expert / us / 1e3 / copy_gbs : 0.0;
    };
    std::printf(
        "%6lld %6.1f %9s %5d %8.1f %8.1f %8.1f %6.1f %7.1f %9.1f %6.1f %9.1f %6.1f %9.1f %9.1f "
        "%6.1f %9.1f %9.1f %6.1f %13.1f\n",
        (long long)T, active, plan.tile == kernels::W4A16Tile::kM64 ? "kM64" : "kSlice16",
        plan.block_rows, gate_up_us, down_us, gemm_us, copy_percent(gemm_us), route_us, layer_us,
        copy_percent(layer_us), fused_us, copy_percent(fused_us), fused_gate_up_us, router_us,
        copy_percent(router_us), in_gemm_us, one_launch_us, copy_percent(one_launch_us),
        cublas_router_us);
    std::fflush(stdout);
    for (void* p : local) CHECK_CUDA(cudaFree(p));
  }
  for (void* p : allocations) CHECK_CUDA(cudaFree(p));
  bench_moe_router(shape, reps, stream, cublas, rng);
  CHECK_CUBLAS(cublasDestroy(cublas));
}

}  // namespace nibble::bench
