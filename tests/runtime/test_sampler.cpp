#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/runtime/penalty_list.h"
#include "engine/runtime/sampler.h"

namespace nibble::runtime {
namespace {

std::vector<float> logits_of(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(float(std::log(p)));
  return out;
}

std::map<int, double> frequencies(const std::vector<float>& logits, const SamplingParams& params,
                                  int draws, std::uint64_t seed = 7) {
  SamplerRng rng(seed);
  std::map<int, double> freq;
  for (int i = 0; i < draws; ++i)
    freq[sample_token(logits, params, {}, {}, rng).token] += 1.0 / draws;
  return freq;
}

TEST(Sampler, GreedyTakesArgmaxAndLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  SamplerRng rng(1);
  EXPECT_EQ(sample_token(std::vector<float>{0.1f, 3.0f, 2.9f}, p, {}, {}, rng).token, 1);
  EXPECT_EQ(sample_token(std::vector<float>{5.0f, 1.0f, 5.0f}, p, {}, {}, rng).token, 0);
}

TEST(Sampler, FollowsTheDistribution) {
  SamplingParams p;
  auto f = frequencies(logits_of({0.5, 0.3, 0.2}), p, 40000);
  EXPECT_NEAR(f[0], 0.5, 0.015);
  EXPECT_NEAR(f[1], 0.3, 0.015);
  EXPECT_NEAR(f[2], 0.2, 0.015);
}

TEST(Sampler, TemperatureSharpens) {
  SamplingParams p;
  p.temperature = 0.5f;  // probabilities squared, renormalized: .25/.38, .09/.38, .04/.38
  auto f = frequencies(logits_of({0.5, 0.3, 0.2}), p, 40000);
  EXPECT_NEAR(f[0], 0.25 / 0.38, 0.015);
  EXPECT_NEAR(f[2], 0.04 / 0.38, 0.01);
}

TEST(Sampler, TopKTopPMinP) {
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams k;
  k.top_k = 2;
  auto fk = frequencies(logits, k, 20000);
  EXPECT_NEAR(fk[0], 0.5 / 0.8, 0.02);
  EXPECT_EQ(fk.count(2) + fk.count(3), 0u);

  SamplingParams topp;
  topp.top_p = 0.85f;  // 0.5, 0.8 (< 0.85), 0.95 -> keeps three
  auto fp = frequencies(logits, topp, 20000);
  EXPECT_EQ(fp.count(3), 0u);
  EXPECT_NEAR(fp[2], 0.15 / 0.95, 0.015);

  SamplingParams minp;
  minp.min_p = 0.5f;  // threshold 0.25 keeps 0.5 and 0.3
  auto fm = frequencies(logits, minp, 20000);
  EXPECT_EQ(fm.count(2) + fm.count(3), 0u);
  EXPECT_NEAR(fm[1], 0.3 / 0.8, 0.02);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  const std::vector<float> logits(1000, 0.0f);  // uniform over 1000 tokens
  auto draw_many = [&](std::uint64_t seed) {
    SamplerRng rng(seed);
    std::vector<int> tokens;
    for (int i = 0; i < 50; ++i) tokens.push_back(sample_token(logits, p, {}, {}, rng).token);
    return tokens;
  };
  EXPECT_EQ(draw_many(42), draw_many(42));
  EXPECT_NE(draw_many(42), draw_many(43));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  SamplerRng rng(1);
  const std::vector<int> prompt = {0};
  // token 0: 2.0 -> 1.0, below token 1's 1.9
  EXPECT_EQ(sample_token(std::vector<float>{2.0f, 1.9f}, p, prompt, {}, rng).token, 1);
  // token 0: -1.0 -> -2.0, below token 1's -1.5
  EXPECT_EQ(sample_token(std::vector<float>{-1.0f, -1.5f}, p, prompt, {}, rng).token, 1);
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountOutputTokensOnly) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.3f;
  SamplerRng rng(1);
  const std::vector<int> output = {0, 0};
  // 1.0 - 2 * 0.3 = 0.4 < 0.5
  EXPECT_EQ(sample_token(std::vector<float>{1.0f, 0.5f}, p, {}, output, rng).token, 1);
  // The same tokens in the prompt do not count.
  EXPECT_EQ(sample_token(std::vector<float>{1.0f, 0.5f}, p, output, {}, rng).token, 0);
  SamplingParams q;
  q.temperature = 0;
  q.presence_penalty = 0.45f;  // 1.0 - 0.45 = 0.55 > 0.5, once however many times it appeared
  EXPECT_EQ(sample_token(std::vector<float>{1.0f, 0.5f}, q, {}, output, rng).token, 0);
  q.presence_penalty = 0.55f;
  EXPECT_EQ(sample_token(std::vector<float>{1.0f, 0.5f}, q, {}, output, rng).token, 1);
}

TEST(Sampler, LogprobsComeFromRawLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 10.0f;  // must not change reported logprobs
  p.logprobs = 2;
  SamplerRng rng(1);
  const auto logits = logits_of({0.6, 0.3, 0.1});
  const std::vector<int> prompt = {0};
  SampledToken t = sample_token(logits, p, prompt, {}, rng);
  EXPECT_EQ(t.token, 1);  // 0 penalized below 1
  EXPECT_NEAR(t.logprob, std::log(0.3), 1e-5);
  ASSERT_EQ(t.top_logprobs.size(), 2u);
  EXPECT_EQ(t.top_logprobs[0].token, 0);
  EXPECT_NEAR(t.top_logprobs[0].logprob, std::log(0.6), 1e-5);
  EXPECT_EQ(t.top_logprobs[1].token, 1);
}

}  // namespace
}  // namespace nibble::runtime

namespace nibble::runtime {
namespace {

TEST(PenaltyList, FoldsOnlyNewTokensAndCountsOutputOccurrences) {
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  PenaltyList list(p);
  std::vector<int> tokens = {5, 6, 5};  // prompt
  list.update(tokens, 3);
  ASSERT_EQ(list.entries().size(), 2u);
  EXPECT_EQ(list.entries()[0].output_count, 0);
  tokens.push_back(6);
  tokens.push_back(9);
  list.update(tokens, 3);
  list.update(tokens, 3);  // nothing new: nothing counted twice
  ASSERT_EQ(list.entries().size(), 3u);
  EXPECT_EQ(list.entries()[1].token, 6);
  EXPECT_EQ(list.entries()[1].output_count, 1);
  EXPECT_EQ(list.entries()[2].token, 9);
  EXPECT_EQ(list.entries()[2].output_count, 1);

  SamplingParams f;  // frequency only: the prompt is not listed
  f.frequency_penalty = 0.5f;
  PenaltyList output_only(f);
  output_only.update(tokens, 3);
  ASSERT_EQ(output_only.entries().size(), 2u);
  EXPECT_EQ(output_only.entries()[0].token, 6);

  PenaltyList none(SamplingParams{});
  none.update(tokens, 3);
  EXPECT_TRUE(none.entries().empty());
}

}  // namespace
}  // namespace nibble::runtime
