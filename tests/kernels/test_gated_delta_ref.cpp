// The Gated DeltaNet CPU references (kernels/linear_attention/): the delta rule's recurrent and
// chunked forms agree on fresh random inputs at several shapes, chunk sizes and key/value head
// ratios, with and without an initial state; a sequence split into calls at any token equals one
// call; hand-computable cases pin the rule itself (beta 1 overwrites, the decay scales, beta 0
// writes nothing), the gates, the conv1d and the gated norm.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/linear_attention/causal_conv1d_ref.h"
#include "kernels/linear_attention/gated_delta_ref.h"
#include "kernels/linear_attention/gated_norm_ref.h"

#include "tests/kernels/relative_l2.h"

namespace nibble::kernels {
namespace {

using testing::relative_l2;

struct Sequence {
  GatedDeltaShape shape;
  std::int64_t tokens = 0;
  std::vector<float> q, k, v, g, beta, state;
  GatedDeltaInputs inputs(std::int64_t from = 0, std::int64_t count = -1) const {
    if (count < 0) count = tokens - from;
    const auto qk = std::size_t(shape.k_heads * shape.k_dim);
    const auto vv = std::size_t(shape.v_heads * shape.v_dim), gg = std::size_t(shape.v_heads);
    const auto f = std::size_t(from), n = std::size_t(count);
    return {{q.data() + f * qk, n * qk},
            {k.data() + f * qk, n * qk},
            {v.data() + f * vv, n * vv},
            {g.data() + f * gg, n * gg},
            {beta.data() + f * gg, n * gg}};
  }
};

// Random q, k, v ~ N(0, 1); the gates through gated_delta_gates_ref from random projections, as
// the model makes them (A_log = log U(0, 16), dt_bias 1: decays from near 1 to strong).
Sequence random_sequence(std::mt19937_64& rng, GatedDeltaShape shape, std::int64_t tokens,
                         bool with_state) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.01f, 16.0f);
  Sequence s{shape, tokens, {}, {}, {}, {}, {}, {}};
  auto fill = [&](std::vector<float>& x, std::size_t n, float scale) {
    x.resize(n);
    for (auto& e : x) e = normal(rng) * scale;
  };
  fill(s.q, std::size_t(tokens * shape.k_heads * shape.k_dim), 1.0f);
  fill(s.k, s.q.size(), 1.0f);
  fill(s.v, std::size_t(tokens * shape.v_heads * shape.v_dim), 1.0f);
  std::vector<float> a, b, A_log(std::size_t(shape.v_heads)), dt_bias(A_log.size(), 1.0f);
  fill(a, std::size_t(tokens * shape.v_heads), 2.0f);
  fill(b, a.size(), 2.0f);
  for (auto& x : A_log) x = std::log(uniform(rng));
  s.g.resize(a.size());
  s.beta.resize(a.size());
  gated_delta_gates_ref(tokens, shape.v_heads, a, b, A_log, dt_bias, s.g, s.beta);
  if (with_state)
    fill(s.state, std::size_t(shape.state_floats()), 0.3f);
  else
    s.state.assign(std::size_t(shape.state_floats()), 0.0f);
  return s;
}

std::size_t out_size(const Sequence& s) {
  return std::size_t(s.tokens * s.shape.v_heads * s.shape.v_dim);
}

TEST(GatedDeltaRef, ChunkedEqualsRecurrent) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const GatedDeltaShape shapes[] = {{1, 1, 8, 8}, {2, 4, 16, 8}, {2, 2, 32, 16}, {1, 3, 8, 24}};
  int checked = 0;
  for (const GatedDeltaShape& shape : shapes) {
    for (const std::int64_t tokens : {1, 5, 64, 130}) {
      for (const int chunk : {64, 7, 1}) {
        for (const bool with_state : {false, true}) {
          const Sequence s = random_sequence(rng, shape, tokens, with_state);
          std::vector<float> state_r = s.state, state_c = s.state;
          std::vector<float> out_r(out_size(s)), out_c(out_size(s));
          gated_delta_recurrent_ref(shape, tokens, s.inputs(), state_r, out_r);
          gated_delta_chunked_ref(shape, tokens, s.inputs(), state_c, out_c, chunk);
          EXPECT_LT(relative_l2(out_r, out_c), 1e-6)
              << shape.k_heads << "/" << shape.v_heads << " heads, T " << tokens << ", chunk "
              << chunk;
          EXPECT_LT(relative_l2(state_r, state_c), 1e-6);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 4 * 3 * 2);
}

// The device kernels' shapes (k_dim 64 and 128, two value heads a key head), chunks of 64 as the
// chunked kernel runs them, prompts ending inside a chunk, from a random state: the form
// gated_deltanet_chunked.h computes on tensor cores is the recurrent one.
TEST(GatedDeltaRef, ChunkedEqualsRecurrentAtKernelShapes) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const GatedDeltaShape shapes[] = {{2, 4, 64, 64}, {1, 2, 128, 128}, {2, 4, 128, 64}};
  for (const GatedDeltaShape& shape : shapes) {
    for (const std::int64_t tokens : {63, 65, 150}) {
      const Sequence s = random_sequence(rng, shape, tokens, true);
      std::vector<float> state_r = s.state, state_c = s.state;
      std::vector<float> out_r(out_size(s)), out_c(out_size(s));
      gated_delta_recurrent_ref(shape, tokens, s.inputs(), state_r, out_r);
      gated_delta_chunked_ref(shape, tokens, s.inputs(), state_c, out_c, 64);
      EXPECT_LT(relative_l2(out_r, out_c), 1e-6)
          << shape.k_heads << "/" << shape.v_heads << " heads, " << shape.k_dim << "x"
          << shape.v_dim << ", T " << tokens;
      EXPECT_LT(relative_l2(state_r, state_c), 1e-6);
      // The state moved: a test that a no-op would fail.
      EXPECT_GT(relative_l2(s.state, state_c), 1e-2);
    }
  }
}

TEST(GatedDeltaRef, SplitIntoCallsEqualsOneCall) {
  std::mt19937_64 rng(std::random_device{}());
  const GatedDeltaShape shape{2, 4, 16, 8};
  const std::int64_t tokens = 100;
  const Sequence s = random_sequence(rng, shape, tokens, true);
  std::vector<float> whole_state = s.state, whole(out_size(s));
  gated_delta_recurrent_ref(shape, tokens, s.inputs(), whole_state, whole);
  const std::size_t per_token = std::size_t(shape.v_heads * shape.v_dim);
  for (const std::int64_t split : {1, 37, 64, 99}) {
    for (const bool chunked : {false, true}) {
      std::vector<float> state = s.state, out(out_size(s));
      auto run = [&](std::int64_t from, std::int64_t count) {
        std::span<float> o(out.data() + std::size_t(from) * per_token,
                           std::size_t(count) * per_token);
        if (chunked)
          gated_delta_chunked_ref(shape, count, s.inputs(from, count), state, o, 16);
        else
          gated_delta_recurrent_ref(shape, count, s.inputs(from, count), state, o);
      };
      run(0, split);
      run(split, tokens - split);
      EXPECT_LT(relative_l2(whole, out), 1e-6) << "split at " << split;
      EXPECT_LT(relative_l2(whole_state, state), 1e-6) << "split at " << split;
    }
  }
}

// One head of k_dim = v_dim = 1, k = q = 1 (normalised: 1 / sqrt(1 + 1e-6)).
std::vector<float> scalar_rule(const std::vector<float>& v, const std::vector<float>& g,
                               const std::vector<float>& beta, bool chunked) {
  const GatedDeltaShape shape{1, 1, 1, 1};
  const auto T = std::int64_t(v.size());
  const std::vector<float> ones(v.size(), 1.0f);
  std::vector<float> state(1, 0.0f), out(v.size());
  const GatedDeltaInputs in{ones, ones, v, g, beta};
  if (chunked)
    gated_delta_chunked_ref(shape, T, in, state, out, 2);
  else
    gated_delta_recurrent_ref(shape, T, in, state, out);
  return out;
}

TEST(GatedDeltaRef, HandComputedCases) {
  for (const bool chunked : {false, true}) {
    // beta 1, no decay, the same key: the state's value for that key is overwritten by each v.
    const auto overwrite = scalar_rule({2.0f, 3.0f, -1.0f}, {0, 0, 0}, {1, 1, 1}, chunked);
    EXPECT_NEAR(overwrite[0], 2.0, 1e-5);
    EXPECT_NEAR(overwrite[1], 3.0, 1e-5);
    EXPECT_NEAR(overwrite[2], -1.0, 1e-5);
    // decay 1/2 with beta 0: nothing written, the state halves.
    const auto decay = scalar_rule({2.0f, 7.0f, 7.0f}, {0.0f, std::log(0.5f), std::log(0.5f)},
                                   {1.0f, 0.0f, 0.0f}, chunked);
    EXPECT_NEAR(decay[1], 1.0, 1e-5);
    EXPECT_NEAR(decay[2], 0.5, 1e-5);
    // beta 1/2 from an empty state: half of v, then halfway towards the next v.
    const auto half = scalar_rule({4.0f, 8.0f}, {0, 0}, {0.5f, 0.5f}, chunked);
    EXPECT_NEAR(half[0], 2.0, 1e-5);
    EXPECT_NEAR(half[1], 5.0, 1e-5);
  }
}

TEST(GatedDeltaRef, Gates) {
  // g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b); softplus is linear above 20.
  const std::vector<float> a{0.0f, 25.0f}, b{0.0f, 100.0f}, A_log{0.0f, std::log(2.0f)},
      dt_bias{0.0f, 5.0f};
  std::vector<float> g(2), beta(2);
  gated_delta_gates_ref(1, 2, a, b, A_log, dt_bias, g, beta);
  EXPECT_NEAR(g[0], -std::log(2.0), 1e-7);
  EXPECT_NEAR(beta[0], 0.5, 1e-7);
  EXPECT_NEAR(g[1], -2.0 * 30.0, 1e-5);
  EXPECT_NEAR(beta[1], 1.0, 1e-7);
}

TEST(CausalConv1dRef, HandCaseAndSplits) {
  // One channel, kernel 2, weights [1, 2]: out_t = silu(x_{t-1} + 2 x_t).
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  std::vector<float> state(1, 0.0f), out(2);
  causal_conv1d_ref(2, 1, 2, std::vector<float>{1.0f, 3.0f}, std::vector<float>{1.0f, 2.0f}, state,
                    out);
  EXPECT_NEAR(out[0], silu(2.0), 1e-6);
  EXPECT_NEAR(out[1], silu(7.0), 1e-6);
  EXPECT_EQ(state[0], 3.0f);

  // Random: a prompt split into calls (the last one token at a time, as decode runs) equals one.
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int C = 24, K = 4;
  const std::int64_t T = 20;
  std::vector<float> x(std::size_t(T * C)), w(std::size_t(C * K));
  for (auto& e : x) e = normal(rng);
  for (auto& e : w) e = normal(rng);
  std::vector<float> whole_state(std::size_t((K - 1) * C), 0.0f), whole(x.size());
  causal_conv1d_ref(T, C, K, x, w, whole_state, whole);
  for (const std::int64_t split : {1, 2, 7, 17}) {
    std::vector<float> st(whole_state.size(), 0.0f), out_split(x.size());
    causal_conv1d_ref(split, C, K, std::span<const float>(x.data(), std::size_t(split * C)), w, st,
                      std::span<float>(out_split.data(), std::size_t(split * C)));
    for (std::int64_t t = split; t < T; ++t)
      causal_conv1d_ref(1, C, K, std::span<const float>(x.data() + t * C, std::size_t(C)), w, st,
                        std::span<float>(out_split.data() + t * C, std::size_t(C)));
    EXPECT_EQ(out_split, whole) << "split at " << split;
    EXPECT_EQ(st, whole_state) << "split at " << split;
  }
  // Zero state = zero padding: the first output sees only the last weight.
  EXPECT_NEAR(whole[0], silu(double(w[K - 1]) * x[0]), 1e-6);
}

TEST(GatedRmsNormRef, HandCase) {
  // x = [3, 4]: rms = sqrt(12.5); z = 0 gates everything off, large z passes it.
  const std::vector<float> x{3.0f, 4.0f, 3.0f, 4.0f}, w{1.0f, 2.0f};
  const std::vector<float> z{0.0f, 0.0f, 40.0f, 40.0f};
  std::vector<float> y(4);
  gated_rms_norm_ref(2, 2, x, z, w, 0.0f, y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 3.0 / std::sqrt(12.5) * 40.0, 1e-4);
  EXPECT_NEAR(y[3], 2.0 * 4.0 / std::sqrt(12.5) * 40.0, 1e-4);
}

TEST(GatedDeltaRef, RefusesMismatchedSizes) {
  const GatedDeltaShape shape{2, 3, 4, 4};  // 3 % 2 != 0
  std::vector<float> none, state(std::size_t(shape.state_floats()));
  EXPECT_THROW(gated_delta_recurrent_ref(shape, 0, {none, none, none, none, none}, state, none),
               std::invalid_argument);
  const GatedDeltaShape ok{1, 1, 4, 4};
  std::vector<float> q(4), v(4), g(1), out(4), wrong_state(3);
  EXPECT_THROW(gated_delta_chunked_ref(ok, 1, {q, q, v, g, g}, wrong_state, out),
               std::invalid_argument);
}

}  // namespace
}  // namespace nibble::kernels
