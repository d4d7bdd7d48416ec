// CPU reference ops against hand-computed values.
#include "engine/backend/cpu/cpu_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>

namespace nibble::backend::cpu {
namespace {

TEST(CpuOps, RmsNormScalesByRootMeanSquareAndWeight) {
  std::vector<float> x = {3.0f, 4.0f, 0.0f, 0.0f, 1.0f, 1.0f};  // two rows of 3
  std::vector<float> w = {1.0f, 2.0f, 0.5f};
  rms_norm(x, 3, w, 0.0f);
  const float r = std::sqrt(25.0f / 3.0f);
  EXPECT_NEAR(x[0], 3.0f / r, 1e-6);
  EXPECT_NEAR(x[1], 8.0f / r, 1e-6);
  EXPECT_NEAR(x[2], 0.0f, 1e-6);
  const float r2 = std::sqrt(2.0f / 3.0f);
  EXPECT_NEAR(x[4], 2.0f / r2, 1e-6);
  EXPECT_NEAR(x[5], 0.5f / r2, 1e-6);
}

TEST(CpuOps, Llama3RopeScalingKeepsShortScalesLongAndBlendsTheBand) {
  model::RopeConfig rope;
  rope.theta = 500000.0;
  auto plain = rope_inverse_frequencies(rope, 8);
  ASSERT_EQ(plain.size(), 4u);
  EXPECT_NEAR(plain[1], 3.7606030931e-02, 1e-12);
  EXPECT_NEAR(plain[3], 5.3182958969e-05, 1e-15);
  rope.llama3 = true;  // factor 8, low 1, high 4, original 8192 (Llama 3.1)
  rope.factor = 8.0;
  auto scaled = rope_inverse_frequencies(rope, 8);
  EXPECT_DOUBLE_EQ(scaled[0], 1.0);                 // wavelength 6.3 < 2048: kept
  EXPECT_NEAR(scaled[1], 3.7606030931e-02, 1e-12);  // 167 < 2048: kept
  EXPECT_NEAR(scaled[2], 5.2484616099e-04, 1e-13);  // 4443 in [2048, 8192]: blended
  EXPECT_NEAR(scaled[3], 6.6478698712e-06, 1e-16);  // 118142 > 8192: divided by 8
}

// gpt-oss's YaRN (theta 150000, factor 32, original 4096, beta 32 and 1) at head_dim 16: the
// correction range is dimensions 2.02 to 4.35 (floored and ceiled to 2 to 5 under truncate), so
// frequencies 0-2 keep their value, 5-7 are divided by 32 and 3-4 blend (values: transformers'
// formula evaluated in Python).
TEST(CpuOps, YarnKeepsFastFrequenciesSlowsSlowOnesAndBlendsTheRamp) {
  model::RopeConfig rope;
  rope.theta = 150000.0;
  rope.yarn = true;
  rope.factor = 32.0;
  rope.original_max_position_embeddings = 4096;
  rope.truncate = false;
  const std::vector<double> want = {1.0,
                                    2.2541800020e-01,
                                    5.0813274815e-02,
                                    6.7949594897e-03,
                                    4.5648391922e-04,
                                    1.8188336682e-05,
                                    4.0999784818e-06,
                                    9.2420895024e-07};
  const auto got = rope_inverse_frequencies(rope, 16);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i] / want[i], 1.0, 1e-9) << i;
  rope.truncate = true;
  const auto truncated = rope_inverse_frequencies(rope, 16);
  EXPECT_NEAR(truncated[3] / 7.7554660575e-03, 1.0, 1e-9);
  EXPECT_NEAR(truncated[4] / 9.1445440119e-04, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(truncated[5], got[5]);
}

TEST(CpuOps, RopeScaleMultipliesTheRotatedHead) {
  std::vector<double> inv = {1.0, 0.5};
  std::vector<float> plain = {1.0f, 2.0f, 3.0f, 4.0f}, scaled = plain;
  apply_rope(plain, inv, 3);
  apply_rope(scaled, inv, 3, 1.3465735902799727);  // YaRN's 0.1 ln(32) + 1
  for (std::size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(scaled[i], plain[i] * 1.3465735902799727, 1e-5);
}

// Scores (1, 2) with a sink of 0: exp(s) / (e + e^2 + 1); the weights no longer sum to 1.
TEST(CpuOps, SinkJoinsTheDenominatorOnly) {
  std::vector<float> x = {1.0f, 2.0f};
  softmax_with_sink(x, 0.0f);
  const double den = std::exp(1.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(x[0], std::exp(1.0) / den, 1e-7);
  EXPECT_NEAR(x[1], std::exp(2.0) / den, 1e-7);
  // A sink far above the scores takes nearly all the weight; far below, none of it.
  std::vector<float> high = {0.0f, 0.0f}, low = {0.0f, 0.0f};
  softmax_with_sink(high, 30.0f);
  softmax_with_sink(low, -30.0f);
  EXPECT_LT(high[0], 1e-12);
  EXPECT_NEAR(low[0], 0.5f, 1e-7);
}

// (up + 1) * g * sigmoid(alpha g), g = min(gate, limit), up clamped to [-limit, limit].
TEST(CpuOps, ClampedSwigluClampsGateAboveAndUpBothWays) {
  const float a = 1.702f, lim = 7.0f;
  const auto glu = [&](double g) { return g / (1.0 + std::exp(-a * g)); };
  EXPECT_NEAR(clamped_swiglu_value(1.0f, 0.5f, a, lim), 1.5 * glu(1.0), 1e-6);
  EXPECT_NEAR(clamped_swiglu_value(9.0f, 0.0f, a, lim), glu(7.0), 1e-5);           // gate capped
  EXPECT_NEAR(clamped_swiglu_value(-9.0f, 0.0f, a, lim), glu(-9.0), 1e-7);         // not below
  EXPECT_NEAR(clamped_swiglu_value(2.0f, 12.0f, a, lim), 8.0 * glu(2.0), 1e-5);    // up <= 7
  EXPECT_NEAR(clamped_swiglu_value(2.0f, -12.0f, a, lim), -6.0 * glu(2.0), 1e-5);  // up >= -7
}

TEST(CpuOps, RopeRotatesHalfPairs) {
  std::vector<double> inv = {1.0, 0.5};
  std::vector<float> head = {1.0f, 2.0f, 3.0f, 4.0f};
  apply_rope(head, inv, 0);
  EXPECT_EQ(head, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  apply_rope(head, inv, 2);  // pair (0, 2) by angle 2, pair (1, 3) by angle 1
  EXPECT_NEAR(head[0], 1.0 * std::cos(2.0) - 3.0 * std::sin(2.0), 1e-6);
  EXPECT_NEAR(head[2], 3.0 * std::cos(2.0) + 1.0 * std::sin(2.0), 1e-6);
  EXPECT_NEAR(head[1], 2.0 * std::cos(1.0) - 4.0 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(head[3], 4.0 * std::cos(1.0) + 2.0 * std::sin(1.0), 1e-6);
}

TEST(CpuOps, SoftmaxAndSilu) {
  std::vector<float> x = {0.0f, std::log(3.0f)};
  softmax(x);
  EXPECT_NEAR(x[0], 0.25f, 1e-7);
  EXPECT_NEAR(x[1], 0.75f, 1e-7);
  EXPECT_NEAR(silu(2.0f), 2.0f / (1.0f + std::exp(-2.0f)), 1e-7);
  EXPECT_EQ(silu(0.0f), 0.0f);
}

TEST(CpuOps, QuantizedLinearEqualsDenseLinearOfItsDequantizedWeights) {
  std::mt19937 rng(std::random_device{}());  // fresh inputs each run
  std::normal_distribution<float> normal;
  const std::int64_t out = 24, in = 48, tokens = 3;
  std::vector<float> w(std::size_t(out * in)), x(std::size_t(tokens * in));
  for (auto& v : w) v = normal(rng);
  for (auto& v : x) v = normal(rng);
  model::Linear q;
  q.out_features = out;
  q.in_features = in;
  q.quantized = true;
  q.fp4 = nvfp4::quantize_matrix(w, out, in);
  q.bias.assign(std::size_t(out), 0.5f);
  model::Linear d = q;
  d.quantized = false;
  d.dense = nvfp4::dequantize_matrix(q.fp4);
  ThreadPool pool(2);
  std::vector<float> yq(std::size_t(tokens * out)), yd(yq.size());
  linear_forward(q, x, tokens, yq, pool);
  linear_forward(d, x, tokens, yd, pool);
  EXPECT_EQ(yq, yd);
  // And a hand check of one output: sum_k x[t,k] * w[n,k] + b.
  double ref = 0.5;
  for (std::int64_t k = 0; k < in; ++k)
    ref += double(x[std::size_t(in + k)]) * d.dense[std::size_t(5 * in + k)];
  EXPECT_NEAR(yd[std::size_t(out + 5)], ref, 1e-4);
}

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (std::int64_t n : {1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    for (int round = 0; round < 20; ++round)
      pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
        for (auto i = b; i < e; ++i) ++hits[std::size_t(i)];
      });
    for (auto& h : hits) EXPECT_EQ(h.load(), 20);
  }
}

}  // namespace
}  // namespace nibble::backend::cpu
