#include "engine/backend/moe_routing.h"

#include <algorithm>
#include <numeric>

#include "engine/backend/cpu/cpu_ops.h"

namespace nibble::backend {

MoeRouting route_tokens(std::span<float> router_logits, std::int64_t tokens, int experts, int k,
                        bool norm_topk_prob, model::MoeRouting routing) {
  const auto E = std::size_t(experts), K = std::size_t(k), T = std::size_t(tokens);
  std::vector<std::int32_t> choice(T * K);  // expert of token t's j-th pick
  std::vector<float> prob(T * K);
  std::vector<std::size_t> order(E);
  for (std::size_t t = 0; t < T; ++t) {
    std::span<float> p = router_logits.subspan(t * E, E);
    const bool softmax_first = routing == model::MoeRouting::kSoftmaxTopK;
    if (softmax_first) cpu::softmax(p);
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return p[a] > p[b]; });
    for (std::size_t j = 0; j < K; ++j) {
      choice[t * K + j] = std::int32_t(order[j]);
      prob[t * K + j] = p[order[j]];
    }
    std::span<float> picked = std::span(prob).subspan(t * K, K);
    if (!softmax_first) {
      cpu::softmax(picked);
    } else if (norm_topk_prob) {
      float sum = 0.0f;
      for (float v : picked) sum += v;
      for (float& v : picked) v /= sum;
    }
  }
  MoeRouting r;
  r.offsets.assign(E + 1, 0);
  for (auto e : choice) ++r.offsets[std::size_t(e) + 1];
  std::partial_sum(r.offsets.begin(), r.offsets.end(), r.offsets.begin());
  r.token.resize(T * K);
  r.weight.resize(T * K);
  r.source.resize(T * K);
  std::vector<std::int64_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (std::size_t t = 0; t < T; ++t)  // tokens in order within each expert's slice
    for (std::size_t j = 0; j < K; ++j) {
      const auto row = std::size_t(next[std::size_t(choice[t * K + j])]++);
      r.token[row] = std::int32_t(t);
      r.weight[row] = prob[t * K + j];
      r.source[t * K + j] = std::int32_t(row);
    }
  return r;
}

}  // namespace nibble::backend
