// The CPU reference of the device MoE routing (kernels/moe/moe_routing_ref.h) against the engine's
// routing (engine/backend/moe_routing.h, what the CPU backend runs): the same picks, weights, row
// order and sources on fixed-seed random logits with ties, and a row-block table that covers each
// expert's rows exactly once within the fixed bound. The spread router's logits reference
// against double dot products and against its stated summation order on hand-checked cases.
#include "kernels/moe/moe_routing_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "kernels/nvfp4/bf16.h"

#include "engine/backend/moe_routing.h"

namespace nibble::kernels {
namespace {

// Logits drawn from a few levels so that ties (equal probabilities) are common.
std::vector<float> tied_logits(std::mt19937& rng, std::int64_t tokens, int experts, int levels) {
  std::uniform_int_distribution<int> level(0, levels - 1);
  std::vector<float> v(std::size_t(tokens * experts));
  for (auto& x : v) x = 0.5f * float(level(rng)) - 1.0f;
  return v;
}

void expect_blocks_cover(const MoeRoutingRef& r, int experts, int block_rows) {
  std::size_t b = 0;
  for (int e = 0; e < experts; ++e) {
    for (std::int32_t row = r.offsets[std::size_t(e)]; row < r.offsets[std::size_t(e) + 1];
         row += block_rows) {
      ASSERT_LT(b, r.blocks.size());
      EXPECT_EQ(r.blocks[b].expert, e);
      EXPECT_EQ(r.blocks[b].row_begin, row);
      EXPECT_EQ(r.blocks[b].row_end, std::min(row + block_rows, r.offsets[std::size_t(e) + 1]));
      ++b;
    }
  }
  for (; b < r.blocks.size(); ++b) EXPECT_EQ(r.blocks[b].expert, -1);
}

class MoeRoutingRefVsEngine
    : public ::testing::TestWithParam<std::tuple<std::int64_t, int, int, bool>> {};

TEST_P(MoeRoutingRefVsEngine, SamePicksOrderAndWeights) {
  const auto [tokens, experts, k, norm] = GetParam();
  std::mt19937 rng(std::uint32_t(tokens * 131 + experts * 7 + k));
  // top_k_first: gpt-oss's order (top k logits, then a softmax over them), norm ignored.
  for (const int levels : {3, 1000})
    for (const bool top_k_first : {false, true}) {
      const std::vector<float> logits = tied_logits(rng, tokens, experts, levels);
      for (const int block_rows : {1, 8, 16, 64}) {
        const MoeRoutingRef ref = moe_route_ref(
            logits, tokens, experts, k,
            MoeScoring{.norm_topk_prob = norm, .top_k_first = top_k_first}, block_rows);
        std::vector<float> copy = logits;
        const backend::MoeRouting engine = backend::route_tokens(
            copy, tokens, experts, k, norm,
            top_k_first ? model::MoeRouting::kTopKSoftmax : model::MoeRouting::kSoftmaxTopK);
        ASSERT_EQ(ref.offsets.size(), engine.offsets.size());
        for (std::size_t e = 0; e < ref.offsets.size(); ++e)
          ASSERT_EQ(ref.offsets[e], engine.offsets[e]) << "expert " << e;
        EXPECT_EQ(ref.token, engine.token);
        EXPECT_EQ(ref.source, engine.source);
        for (std::size_t i = 0; i < ref.weight.size(); ++i) {
          // The engine keeps weights in row order, the reference in (token, pick) order.
          EXPECT_EQ(ref.weight[i], engine.weight[std::size_t(ref.source[i])]) << i;
          EXPECT_EQ(ref.token[std::size_t(ref.source[i])], std::int32_t(i / std::size_t(k)));
        }
        EXPECT_EQ(std::int64_t(ref.blocks.size()),
                  moe_max_row_blocks(tokens * k, experts, block_rows));
        expect_blocks_cover(ref, experts, block_rows);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeRoutingRefVsEngine,
    ::testing::Values(std::make_tuple(1, 8, 2, true), std::make_tuple(1, 128, 8, true),
                      std::make_tuple(7, 8, 8, true), std::make_tuple(33, 64, 6, false),
                      std::make_tuple(300, 128, 8, true), std::make_tuple(5, 512, 16, true),
                      std::make_tuple(1000, 60, 4, false), std::make_tuple(1, 32, 4, false),
                      std::make_tuple(64, 128, 4, false)));  // gpt-oss-20b's and 120b's routers

// gpt-oss's order by hand: the top k logits (ties to the lower id), then a softmax over those k
// only, whatever the other logits are; the weights sum to 1 without norm_topk_prob.
TEST(MoeRoutingRef, TopKFirstSoftmaxesOverThePicksOnly) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -50.0f, 0.0f, 2.0f, 1.0f};
  const MoeRoutingRef r =
      moe_route_ref(logits, 2, 4, 2, MoeScoring{.norm_topk_prob = false, .top_k_first = true}, 1);
  EXPECT_EQ(r.expert, (std::vector<std::int32_t>{1, 3, 2, 3}));
  EXPECT_EQ(r.weight[0], 0.5f);
  EXPECT_EQ(r.weight[1], 0.5f);
  // exp(0) / (exp(0) + exp(-1)) and exp(-1) / (...): the -50 logit plays no part.
  EXPECT_FLOAT_EQ(r.weight[2], float(1.0 / (1.0 + std::exp(-1.0))));
  EXPECT_FLOAT_EQ(r.weight[3], float(std::exp(-1.0) / (1.0 + std::exp(-1.0))));
  // Softmax first over the same row gives other weights (the -50 and 0 logits count).
  const MoeRoutingRef soft = moe_route_ref(logits, 2, 4, 2, false, 1);
  EXPECT_EQ(soft.expert, r.expert);
  EXPECT_LT(soft.weight[2], r.weight[2]);
}

TEST(MoeRoutingRef, TiesGoToTheLowerExpertAndTheBoundHoldsWhenEveryTokenPicksOneExpert) {
  // Every token: expert 3 first (the largest logit), then the four-way tie 0, 1, 2, 4 -> 0.
  const int experts = 5, k = 2;
  const std::int64_t tokens = 9;
  std::vector<float> logits;
  for (std::int64_t t = 0; t < tokens; ++t)
    logits.insert(logits.end(), {0.0f, 0.0f, 0.0f, 1.0f, 0.0f});
  const MoeRoutingRef r = moe_route_ref(logits, tokens, experts, k, true, 4);
  for (std::int64_t t = 0; t < tokens; ++t) {
    EXPECT_EQ(r.expert[std::size_t(t * k)], 3);
    EXPECT_EQ(r.expert[std::size_t(t * k + 1)], 0);
  }
  EXPECT_EQ(r.offsets, (std::vector<std::int32_t>{0, 9, 9, 9, 18, 18}));
  // Experts 0 and 3 with 9 rows each: 3 blocks of <= 4 rows apiece, then the empty tail.
  ASSERT_EQ(r.blocks.size(), std::size_t(5 + 5));
  EXPECT_EQ(r.blocks[2].row_begin, 8);
  EXPECT_EQ(r.blocks[2].row_end, 9);
  EXPECT_EQ(r.blocks[3].expert, 3);
  EXPECT_EQ(r.blocks[6].expert, -1);
}

// The row-block bound: never more blocks than routed rows (decode: k blocks, one per pick), else
// ceil(rows / B) + active experts.
TEST(MoeRowBlocks, BoundIsTheSmallerOfRowsAndBlocksPlusExperts) {
  EXPECT_EQ(moe_max_row_blocks(8, 128, 8), 8);    // T = 1, k = 8: 1 + 8 = 9 before
  EXPECT_EQ(moe_max_row_blocks(64, 128, 8), 64);  // T = 8: 8 + 64 = 72 before
  EXPECT_EQ(moe_max_row_blocks(64, 8, 16), 12);   // 4 + 8
  EXPECT_EQ(moe_max_row_blocks(4096, 128, 64), 192);
  EXPECT_EQ(moe_max_row_blocks(0, 128, 8), 0);
}

// The router's bias (gpt-oss) is one FP32 add after the sum: the logits without it, plus it.
TEST(MoeRouterLogitsRef, BiasIsAddedAfterTheSum) {
  std::mt19937 rng(40);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t tokens = 2;
  const int hidden = 2880, experts = 32;
  std::vector<std::uint16_t> x(std::size_t(tokens * hidden)), w(std::size_t(experts * hidden)),
      bias(static_cast<std::size_t>(experts));
  for (auto& v : x) v = nvfp4::float_to_bf16(normal(rng));
  for (auto& v : w) v = nvfp4::float_to_bf16(normal(rng) / std::sqrt(float(hidden)));
  for (auto& v : bias) v = nvfp4::float_to_bf16(normal(rng));
  const std::vector<float> plain = moe_router_logits_ref(x, w, tokens, hidden, experts);
  const std::vector<float> biased = moe_router_logits_ref(x, w, tokens, hidden, experts, bias);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int e = 0; e < experts; ++e) {
      const std::size_t i = std::size_t(t * experts + e);
      EXPECT_EQ(biased[i], plain[i] + nvfp4::bf16_to_float(bias[std::size_t(e)])) << i;
    }
}

// moe_router_logits_ref: FP32 sums of BF16 products within 1e-5 of the double dot product, for
// hidden sizes below, at and past one piece per thread (2048 = 256 pieces; 4104: a second round).
TEST(MoeRouterLogitsRef, CloseToDoubleDotProducts) {
  std::mt19937 rng(20);
  for (const int hidden : {8, 136, 2048, 4104}) {
    const std::int64_t tokens = 3;
    const int experts = 5;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::uint16_t> x(std::size_t(tokens * hidden)), w(std::size_t(experts * hidden));
    for (auto& v : x) v = nvfp4::float_to_bf16(normal(rng));
    for (auto& v : w) v = nvfp4::float_to_bf16(normal(rng) / std::sqrt(float(hidden)));
    const std::vector<float> got = moe_router_logits_ref(x, w, tokens, hidden, experts);
    ASSERT_EQ(got.size(), std::size_t(tokens * experts));
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (int e = 0; e < experts; ++e) {
        double want = 0.0, scale = 0.0;
        for (int h = 0; h < hidden; ++h) {
          const double p = double(nvfp4::bf16_to_float(x[std::size_t(t * hidden + h)])) *
                           nvfp4::bf16_to_float(w[std::size_t(e * hidden + h)]);
          want += p;
          scale += std::fabs(p);
        }
        EXPECT_NEAR(got[std::size_t(t * experts + e)], want, 1e-5 * scale)
            << "hidden " << hidden << " t " << t << " e " << e;
      }
    }
  }
}

// The order is the stated one. x = 1; w: 2^24 in piece 0's first column, 1 in pieces 1, 3 and 256.
// Piece 256 joins thread 0's sum first (2^24 + 1 rounds to 2^24: lost); the butterfly adds lanes
// 1 and 3 (both odd) before lane 0's side: 2^24 + (1 + 1) = 2^24 + 2 exactly. A left-to-right sum
// gives 2^24 (each 1 lost), the exact sum 2^24 + 3 rounds to 2^24 + 4.
TEST(MoeRouterLogitsRef, SumsInTheDevicesOrder) {
  const int hidden = 257 * 8;
  const std::vector<std::uint16_t> x(std::size_t(hidden), nvfp4::float_to_bf16(1.0f));
  std::vector<std::uint16_t> w(std::size_t(hidden), 0);
  w[0] = nvfp4::float_to_bf16(16777216.0f);
  for (const int piece : {1, 3, 256}) w[std::size_t(piece * 8)] = nvfp4::float_to_bf16(1.0f);
  const std::vector<float> got = moe_router_logits_ref(x, w, 1, hidden, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], 16777218.0f);
}

}  // namespace
}  // namespace nibble::kernels
