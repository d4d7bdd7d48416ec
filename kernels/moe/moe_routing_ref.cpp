#include "kernels/moe/moe_routing_ref.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>

#include "kernels/softmax_ref.h"

namespace nibble::kernels {

MoeRoutingRef moe_route_ref(std::span<const float> logits, std::int64_t tokens, int experts, int k,
                            MoeScoring scoring, int block_rows) {
  const auto E = std::size_t(experts), K = std::size_t(k), T = std::size_t(tokens);
  MoeRoutingRef r;
  r.expert.resize(T * K);
  r.weight.resize(T * K);
  std::vector<float> p(E);
  std::vector<std::size_t> order(E);
  for (std::size_t t = 0; t < T; ++t) {
    const std::span<const float> row = logits.subspan(t * E, E);
    std::copy(row.begin(), row.end(), p.begin());
    if (!scoring.top_k_first) softmax_ref(p);
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return p[a] > p[b]; });
    const std::span<float> picked = std::span(r.weight).subspan(t * K, K);
    for (std::size_t j = 0; j < K; ++j) {
      r.expert[t * K + j] = std::int32_t(order[j]);
      picked[j] = p[order[j]];
    }
    if (scoring.top_k_first) {
      softmax_ref(picked);
    } else if (scoring.norm_topk_prob) {
      float sum = 0.0f;
      for (float v : picked) sum += v;
      for (float& v : picked) v /= sum;
    }
  }
  r.offsets.assign(E + 1, 0);
  for (auto e : r.expert) ++r.offsets[std::size_t(e) + 1];
  std::partial_sum(r.offsets.begin(), r.offsets.end(), r.offsets.begin());
  r.token.resize(T * K);
  r.source.resize(T * K);
  std::vector<std::int32_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (std::size_t i = 0; i < T * K; ++i) {  // (token, pick) order: tokens rise inside an expert
    const std::int32_t row = next[std::size_t(r.expert[i])]++;
    r.token[std::size_t(row)] = std::int32_t(i / K);
    r.source[i] = row;
  }
  r.blocks.assign(std::size_t(moe_max_row_blocks(std::int64_t(T * K), experts, block_rows)),
                  MoeRowBlock{-1, 0, 0});
  std::size_t b = 0;
  for (std::size_t e = 0; e < E; ++e)
    for (std::int32_t first = r.offsets[e]; first < r.offsets[e + 1]; first += block_rows)
      r.blocks[b++] = {std::int32_t(e), first, std::min(first + block_rows, r.offsets[e + 1])};
  return r;
}

namespace {

float bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(std::uint32_t(bits) << 16);
}

}  // namespace

std::vector<float> moe_router_logits_ref(std::span<const std::uint16_t> x,
                                         std::span<const std::uint16_t> router, std::int64_t tokens,
                                         int hidden, int experts,
                                         std::span<const std::uint16_t> bias) {
  constexpr int kThreads = kMoeRouterThreads, kLanes = 32;
  const auto H = std::size_t(hidden), pieces = H / 8;
  std::vector<float> logits(std::size_t(tokens) * std::size_t(experts));
  std::array<float, kThreads> thread_sums{};
  for (std::size_t t = 0; t < std::size_t(tokens); ++t) {
    for (std::size_t e = 0; e < std::size_t(experts); ++e) {
      thread_sums.fill(0.0f);
      const std::uint16_t* xr = x.data() + t * H;
      const std::uint16_t* wr = router.data() + e * H;
      for (std::size_t p = 0; p < pieces; ++p) {
        float piece = 0.0f;  // the piece's 8 products as fmas into 0, in column order
        for (std::size_t c = p * 8; c < p * 8 + 8; ++c)
          piece = std::fma(bf16_value(wr[c]), bf16_value(xr[c]), piece);
        thread_sums[p % kThreads] += piece;
      }
      float sum = 0.0f;
      for (int warp = 0; warp < kThreads / kLanes; ++warp) {
        std::array<float, kLanes> lane{};
        std::copy_n(thread_sums.begin() + warp * kLanes, kLanes, lane.begin());
        for (int o = kLanes / 2; o > 0; o /= 2) {  // the xor butterfly: lane l adds lane l ^ o
          std::array<float, kLanes> next{};
          for (int l = 0; l < kLanes; ++l)
            next[std::size_t(l)] = lane[std::size_t(l)] + lane[std::size_t(l ^ o)];
          lane = next;
        }
        sum += lane[0];
      }
      if (!bias.empty()) sum += bf16_value(bias[e]);
      logits[t * std::size_t(experts) + e] = sum;
    }
  }
  return logits;
}

}  // namespace nibble::kernels
