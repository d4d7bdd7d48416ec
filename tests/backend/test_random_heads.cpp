// The random draft heads the GPU tests build (random_model.h: random_mtp_module,
// random_eagle3_head) are heads the CPU backend runs as the loaders' are: an MTP module taken out
// of a Qwen3-Next target (ModelInput::kEmbeddingAndHidden, fc [H, 2 H]) and an EAGLE-3 head of a
// Llama target (ModelInput::kEagle3, q/k/v over 2 H, half the vocabulary through d2t), each
// stepping on hidden states of every width it takes, its logits and hidden_out finite, and a
// different hidden_in giving different logits (the head reads it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/model_description.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/random_model.h"

namespace nibble::backend {
namespace {

using model::Arch;

bool finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

// One step of `n` tokens from position `start` on hidden_in rows of `width`, twice on two caches:
// the second with hidden_in negated. Expects finite logits and hidden_out, and logits that move
// with hidden_in.
void expect_head_steps(Backend& head, int start, int n, std::size_t width, std::uint32_t seed) {
  const model::ModelConfig& c = head.config();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> hidden_in(std::size_t(n) * width);
  for (float& v : hidden_in) v = normal(rng);
  const auto tokens = nibble::testing::random_tokens(rng, start + n, c.vocab_size);
  const std::vector<int> table = {0, 1, 2, 3};
  std::vector<float> logits[2], hidden_out[2];
  for (int run = 0; run < 2; ++run) {
    auto cache = head.new_kv_cache(4, 16);
    std::vector<float> prefix_in(std::size_t(start) * std::size_t(c.hidden_size), 0.5f);
    std::vector<float> prefix_out(std::size_t(start) * std::size_t(c.hidden_state_width()));
    if (start > 0) {
      BatchItem prefix{std::span(tokens).first(std::size_t(start)), 0, table, {}};
      prefix.hidden_in = prefix_in;
      prefix.hidden_out = prefix_out;
      head.forward_batch(*cache, std::span(&prefix, 1));
    }
    std::vector<float> in = hidden_in;
    if (run == 1)  // negated, not scaled: the heads norm what they read
      for (float& v : in) v = -v;
    logits[run].assign(std::size_t(c.logits_size()), NAN);
    hidden_out[run].assign(std::size_t(n) * std::size_t(c.hidden_state_width()), NAN);
    BatchItem item{std::span(tokens).subspan(std::size_t(start)), start, table, logits[run]};
    item.hidden_in = in;
    item.hidden_out = hidden_out[run];
    head.forward_batch(*cache, std::span(&item, 1));
    EXPECT_TRUE(finite(logits[run]));
    EXPECT_TRUE(finite(hidden_out[run]));
  }
  EXPECT_GT(nibble::testing::relative_l2(logits[1], logits[0]), 1e-3);
}

TEST(RandomHeads, AnMtpModuleRunsOnTheCpuBackend) {
  const model::ModelConfig target = testing::qwen3_next_test_config(4, 128, 8);
  model::ModelWeights weights = testing::random_model(target, 1);
  weights.mtp = testing::random_mtp_module(target, 2);
  model::ModelWeights module = model::take_mtp_module(weights);
  ASSERT_EQ(model::describe_model(module.config).input, model::ModelInput::kEmbeddingAndHidden);
  ASSERT_EQ(module.mtp->fc.in_features, 2 * target.hidden_size);
  auto cpu = make_cpu_backend(std::move(module), 2);
  ASSERT_EQ(cpu->config().hidden_state_width(), target.hidden_size);
  expect_head_steps(*cpu, 0, 5, std::size_t(target.hidden_size), 3);
  expect_head_steps(*cpu, 5, 1, std::size_t(target.hidden_size), 4);
}

TEST(RandomHeads, AnEagle3HeadRunsOnTheCpuBackend) {
  const model::ModelWeights target =
      testing::random_model(testing::gpu_test_config(Arch::Llama, 64), 1);
  for (const bool norm_before_residual : {false, true}) {
    SCOPED_TRACE(norm_before_residual ? "norm_before_residual" : "plain residual");
    model::ModelWeights head =
        testing::random_eagle3_head(target, {0, 1, 2}, norm_before_residual, 5);
    const model::ModelDescription d = model::describe_model(head.config);
    ASSERT_EQ(d.input, model::ModelInput::kEagle3);
    ASSERT_TRUE(d.layers[0].attention.reads_embedding);
    EXPECT_EQ(d.layers[0].attention.norm_before_residual, norm_before_residual);
    const int H = target.config.hidden_size;
    EXPECT_EQ(head.layers[0].q.in_features, 2 * H);
    EXPECT_EQ(head.eagle3->fc.in_features, 3 * H);
    ASSERT_EQ(head.eagle3->draft_to_target.size(), std::size_t(target.config.vocab_size / 2));
    EXPECT_EQ(head.eagle3->draft_to_target.back(), target.config.vocab_size - 2);
    auto cpu = make_cpu_backend(std::move(head), 2);
    EXPECT_EQ(cpu->config().logits_size(), target.config.vocab_size / 2);
    expect_head_steps(*cpu, 0, 6, std::size_t(3 * H), 6);  // the target's three hidden states
    expect_head_steps(*cpu, 6, 1, std::size_t(H), 7);      // its own (chained)
  }
}

}  // namespace
}  // namespace nibble::backend
