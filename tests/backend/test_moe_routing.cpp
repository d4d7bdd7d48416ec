// MoE routing: top-k of the softmax, ties to the lower expert, renormalised weights, rows grouped
// by expert in token order, and each token's sources pointing back at its rows.
#include "engine/backend/moe_routing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nibble::backend {
namespace {

TEST(MoeRouting, PicksTopKGroupsByExpertAndPointsBack) {
  // 3 tokens, 4 experts, k = 2.
  std::vector<float> logits = {0.0f,  2.0f, 1.0f, -1.0f,  // -> experts 1, 2
                               3.0f,  3.0f, 0.0f, 0.0f,   // tie -> 0, 1
                               -5.0f, 0.0f, 0.0f, 4.0f};  // -> 3, then the tie 1 before 2
  const MoeRouting r = route_tokens(logits, 3, 4, 2, /*norm_topk_prob=*/true);
  EXPECT_EQ(r.offsets, (std::vector<std::int64_t>{0, 1, 4, 5, 6}));
  EXPECT_EQ(r.token, (std::vector<std::int32_t>{1, 0, 1, 2, 0, 2}));
  for (std::size_t t = 0; t < 3; ++t) {
    float sum = 0.0f;
    for (std::size_t j = 0; j < 2; ++j) {
      const auto row = std::size_t(r.source[t * 2 + j]);
      EXPECT_EQ(r.token[row], std::int32_t(t));
      sum += r.weight[row];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-6f);
  }
  // Token 0: softmax(0, 2, 1, -1) renormalised over experts 1 and 2: e^2 / (e^2 + e^1).
  EXPECT_NEAR(r.weight[std::size_t(r.source[0])],
              std::exp(2.0f) / (std::exp(2.0f) + std::exp(1.0f)), 1e-6f);
  EXPECT_NEAR(r.weight[std::size_t(r.source[2])], 0.5f, 1e-6f);
}

TEST(MoeRouting, WithoutRenormalisationWeightsAreTheSoftmax) {
  std::vector<float> logits = {1.0f, 0.0f, 0.0f};
  const MoeRouting r = route_tokens(logits, 1, 3, 1, /*norm_topk_prob=*/false);
  const float e = std::exp(1.0f);
  EXPECT_NEAR(r.weight[0], e / (e + 2.0f), 1e-6f);
  EXPECT_EQ(r.offsets, (std::vector<std::int64_t>{0, 1, 1, 1}));
}

// gpt-oss: the top k logits, then a softmax over those k only.
TEST(MoeRouting, TopKThenSoftmaxWeighsOnlyThePicked) {
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 2.0f};
  const MoeRouting r =
      route_tokens(logits, 1, 4, 2, /*norm_topk_prob=*/false, model::MoeRouting::kTopKSoftmax);
  EXPECT_EQ(r.offsets, (std::vector<std::int64_t>{0, 0, 1, 1, 2}));
  const double den = std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(r.weight[std::size_t(r.source[0])], std::exp(3.0) / den, 1e-6);
  EXPECT_NEAR(r.weight[std::size_t(r.source[1])], std::exp(2.0) / den, 1e-6);
  // The logits are left as they were (no softmax over all experts).
  EXPECT_EQ(logits, (std::vector<float>{0.5f, 3.0f, -1.0f, 2.0f}));
}

}  // namespace
}  // namespace nibble::backend
