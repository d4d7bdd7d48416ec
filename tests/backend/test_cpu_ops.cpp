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
