// The sampling pass's CPU reference (kernels/sampling/sampling_ref.h): the random numbers against
// Philox's published answers, each filter keeping exactly the right set on crafted rows, the
// penalties and bitmask, raw logprobs, seeds reproducible and draws following the distribution.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "kernels/sampling/sampling_ref.h"

namespace nibble::kernels {
namespace {

using sampling_math::Philox4;
using sampling_math::philox4x32_10;

std::vector<float> logits_of(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(float(std::log(p)));
  return out;
}

std::vector<std::int32_t> kept(const std::vector<float>& logits, const SamplingRow& row,
                               std::span<const SamplingPenalty> penalties = {},
                               std::span<const std::uint32_t> mask = {}) {
  return kept_tokens_reference(logits, row, penalties, mask);
}

SampledRow sample(const std::vector<float>& logits, const SamplingRow& row,
                  std::span<const SamplingPenalty> penalties = {},
                  std::span<const std::uint32_t> mask = {}) {
  std::vector<TopLogprob> top;
  return sample_row_reference(logits, row, penalties, mask, top);
}

std::map<int, double> frequencies(const std::vector<float>& logits, SamplingRow row, int draws) {
  std::map<int, double> freq;
  for (int i = 0; i < draws; ++i) {
    row.position = std::uint64_t(i);
    freq[sample(logits, row).token] += 1.0 / draws;
  }
  return freq;
}

TEST(SamplingRef, PhiloxMatchesPublishedAnswers) {
  // Random123's known-answer vectors for philox4x32-10.
  Philox4 a = philox4x32_10(Philox4{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(a.v[0], 0x6627e8d5u);
  EXPECT_EQ(a.v[1], 0xe169c58du);
  EXPECT_EQ(a.v[2], 0xbc57ac4cu);
  EXPECT_EQ(a.v[3], 0x9b00dbd8u);
  Philox4 b = philox4x32_10(Philox4{{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u);
  EXPECT_EQ(b.v[0], 0x408f276du);
  EXPECT_EQ(b.v[1], 0x41c83b0eu);
  EXPECT_EQ(b.v[2], 0xa20bc7c6u);
  EXPECT_EQ(b.v[3], 0x6d5451fdu);
  Philox4 c = philox4x32_10(Philox4{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                            0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(c.v[0], 0xd16cfe09u);
  EXPECT_EQ(c.v[1], 0x94fdccebu);
  EXPECT_EQ(c.v[2], 0x5001e420u);
  EXPECT_EQ(c.v[3], 0x24126ea1u);
}

TEST(SamplingRef, ExponentialsAreFinitePositiveAndFineNearZeroAndKeysKeepOrder) {
  using namespace sampling_math;
  EXPECT_GT(exponential(0u), 0.0f);
  EXPECT_TRUE(std::isfinite(exponential(~0u)));
  EXPECT_GT(exponential(~0u), 15.0f);
  // Near zero, where the race is decided, neighbouring bit patterns give distinct variates.
  EXPECT_LT(exponential(1000u), exponential(1001u));
  EXPECT_NEAR(exponential(1u << 20), -std::log1p(-1048576.5 / 4294967296.0), 1e-10);
  double sum = 0, sum_sq = 0;  // Exp(1): mean 1, variance 1
  for (std::uint32_t g = 0; g < 25000; ++g) {
    const Philox4 r = token_randoms(77, 5, g);
    for (std::uint32_t w : r.v) {
      sum += exponential(w);
      sum_sq += double(exponential(w)) * exponential(w);
    }
  }
  EXPECT_NEAR(sum / 1e5, 1.0, 0.015);
  EXPECT_NEAR(sum_sq / 1e5 - (sum / 1e5) * (sum / 1e5), 1.0, 0.04);
  const float values[] = {-INFINITY, -3.5f, -0.0f, 0.0f, 1e-30f, 2.0f, INFINITY};
  for (std::size_t i = 1; i < std::size(values); ++i) {
    EXPECT_LT(order_key(std::bit_cast<std::uint32_t>(values[i - 1])),
              order_key(std::bit_cast<std::uint32_t>(values[i])));
    EXPECT_EQ(float_bits_of_key(order_key(std::bit_cast<std::uint32_t>(values[i]))),
              std::bit_cast<std::uint32_t>(values[i]));
  }
}

TEST(SamplingRef, GreedyTakesTheArgmaxLowestIdOnTies) {
  SamplingRow row;
  row.temperature = 0;
  EXPECT_EQ(sample({0.1f, 3.0f, 2.9f}, row).token, 1);
  EXPECT_EQ(sample({5.0f, 1.0f, 5.0f}, row).token, 0);
}

TEST(SamplingRef, TopKKeepsTheKLargestAndTiesAtTheThreshold) {
  SamplingRow row;
  row.top_k = 3;
  EXPECT_EQ(kept({0.5f, 4.0f, -1.0f, 3.0f, 2.0f, 1.0f}, row), (std::vector<std::int32_t>{1, 3, 4}));
  // Token 5 ties the third largest: it stays.
  EXPECT_EQ(kept({0.5f, 4.0f, -1.0f, 3.0f, 2.0f, 2.0f}, row),
            (std::vector<std::int32_t>{1, 3, 4, 5}));
  row.top_k = 6;  // the whole vocabulary: off
  EXPECT_EQ(kept({0.5f, 4.0f, -1.0f, 3.0f, 2.0f, 1.0f}, row).size(), 6u);
}

TEST(SamplingRef, TopPKeepsTheSmallestPrefixReachingP) {
  const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingRow row;
  row.top_p = 0.85f;  // 0.5, 0.8 (< 0.85), 0.95
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{1, 2, 3}));
  row.top_p = 0.75f;  // 0.5, 0.8
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{1, 3}));
  row.top_p = 0.3f;  // the top token alone reaches it
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{1}));
  // After top-k 2, p is of the two's mass 0.8: 0.5 / 0.8 = 0.625 < 0.7 keeps both.
  row.top_k = 2;
  row.top_p = 0.7f;
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{1, 3}));
  row.top_p = 0.6f;
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{1}));
}

TEST(SamplingRef, MinPIsRelativeToTheMostLikely) {
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingRow row;
  row.min_p = 0.5f;  // 0.25
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{0, 1}));
  row.min_p = 0.29f;  // 0.145
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{0, 1, 2}));
  row.temperature = 0.5f;  // after temperature: 0.25, 0.09, 0.0225 over 0.25 -> 0.36, 0.09
  EXPECT_EQ(kept(logits, row), (std::vector<std::int32_t>{0, 1}));
}

TEST(SamplingRef, DrawsFollowTheKeptDistribution) {
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingRow row;
  row.seed = 11;
  auto f = frequencies(logits, row, 40000);
  EXPECT_NEAR(f[0], 0.5, 0.012);
  EXPECT_NEAR(f[1], 0.3, 0.012);
  EXPECT_NEAR(f[2], 0.15, 0.01);
  EXPECT_NEAR(f[3], 0.05, 0.006);
  row.top_k = 2;
  f = frequencies(logits, row, 40000);
  EXPECT_NEAR(f[0], 0.5 / 0.8, 0.012);
  EXPECT_EQ(f.count(2) + f.count(3), 0u);
  row.top_k = 0;
  row.temperature = 0.5f;
  f = frequencies(logits, row, 40000);
  EXPECT_NEAR(f[0], 0.25 / 0.3625, 0.012);
  EXPECT_NEAR(f[3], 0.0025 / 0.3625, 0.003);
}

TEST(SamplingRef, UniformRowOverAManyTokenVocabularyIsUniform) {
  // Chi-square over 64 tokens, 64000 draws: the 99.9% point of chi2(63) is about 103.
  const std::vector<float> logits(64, 1.5f);
  SamplingRow row;
  row.seed = 3;
  std::vector<int> counts(64);
  for (int i = 0; i < 64000; ++i) {
    row.position = std::uint64_t(i);
    ++counts[std::size_t(sample(logits, row).token)];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - 1000.0) * (c - 1000.0) / 1000.0;
  EXPECT_LT(chi2, 103.0);
}

TEST(SamplingRef, SeedAndPositionDecideTheDraw) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(5000);
  for (float& v : logits) v = normal(gen);
  SamplingRow row;
  auto draws = [&](std::uint64_t seed) {
    std::vector<int> tokens;
    row.seed = seed;
    for (std::uint64_t p = 0; p < 40; ++p) {
      row.position = p;
      tokens.push_back(sample(logits, row).token);
    }
    return tokens;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
  const std::vector<int> a = draws(42);
  EXPECT_GT(std::set<int>(a.begin(), a.end()).size(), 20u);  // positions give fresh numbers
}

// The reference skips the logarithm of tokens that cannot win the race; a brute-force race over
// the kept set must pick the same tokens.
TEST(SamplingRef, TheRaceIsTheArgmaxOfWeightOverExponential) {
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int vocab = 50 + trial * 37;
    const float scale = 0.2f + 0.05f * float(trial % 40);
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    for (float& v : logits) v = scale * normal(gen);
    SamplingRow row;
    row.temperature = 0.5f + 0.01f * float(trial % 100);
    row.top_k = trial % 3 == 0 ? 17 : 0;
    row.seed = gen();
    row.position = std::uint64_t(trial);
    const auto keep = kept(logits, row);
    const float max_y = *std::max_element(logits.begin(), logits.end()) / row.temperature;
    std::uint64_t best = 0;
    for (std::int32_t i : keep) {
      const auto r = sampling_math::token_randoms(row.seed, row.position, std::uint32_t(i / 4));
      const float w = std::exp(logits[std::size_t(i)] / row.temperature - max_y);
      const float score = w / sampling_math::exponential(r.v[i % 4]);
      best = std::max(best, sampling_math::pack_argmax(
                                sampling_math::order_key(std::bit_cast<std::uint32_t>(score)), i));
    }
    EXPECT_EQ(sample(logits, row).token, sampling_math::unpack_argmax_id(best)) << trial;
  }
}

TEST(SamplingRef, PenaltiesAsTheSamplerDefinesThem) {
  SamplingRow row;
  row.temperature = 0;
  row.repetition_penalty = 2.0f;
  const SamplingPenalty prompt_only[] = {{0, 0}};
  EXPECT_EQ(sample({2.0f, 1.9f}, row, prompt_only).token, 1);    // 2.0 -> 1.0
  EXPECT_EQ(sample({-1.0f, -1.5f}, row, prompt_only).token, 1);  // -1.0 -> -2.0
  SamplingRow f;
  f.temperature = 0;
  f.frequency_penalty = 0.3f;
  const SamplingPenalty twice[] = {{0, 2}};
  EXPECT_EQ(sample({1.0f, 0.5f}, f, twice).token, 1);        // 1.0 - 0.6
  EXPECT_EQ(sample({1.0f, 0.5f}, f, prompt_only).token, 0);  // the prompt does not count
  SamplingRow p;
  p.temperature = 0;
  p.presence_penalty = 0.45f;
  EXPECT_EQ(sample({1.0f, 0.5f}, p, twice).token, 0);
  p.presence_penalty = 0.55f;
  EXPECT_EQ(sample({1.0f, 0.5f}, p, twice).token, 1);
  const SamplingPenalty outside[] = {{-1, 3}, {7, 1}};  // ignored, not a crash
  EXPECT_EQ(sample({1.0f, 0.5f}, p, outside).token, 0);
}

TEST(SamplingRef, BitmaskedTokensAreNeverDrawn) {
  std::vector<float> logits(70, 0.0f);
  logits[3] = 10.0f;
  std::vector<std::uint32_t> mask(3, 0);
  mask[0] = 1u << 5;
  mask[2] = 1u << 1;  // token 65
  SamplingRow row;
  row.temperature = 0;
  EXPECT_EQ(sample(logits, row, {}, mask).token, 5);
  row.temperature = 1.0f;
  std::set<int> seen;
  for (std::uint64_t p = 0; p < 200; ++p) {
    row.position = p;
    seen.insert(sample(logits, row, {}, mask).token);
  }
  EXPECT_EQ(seen, (std::set<int>{5, 65}));
}

TEST(SamplingRef, LogprobsAreOfTheRawLogits) {
  SamplingRow row;
  row.temperature = 0;
  row.repetition_penalty = 10.0f;
  row.num_top_logprobs = 3;
  const auto logits = logits_of({0.3, 0.6, 0.05, 0.05});
  const SamplingPenalty listed[] = {{1, 0}};
  std::vector<TopLogprob> top;
  const SampledRow s = sample_row_reference(logits, row, listed, {}, top);
  EXPECT_EQ(s.token, 0);  // 1 penalised below 0
  EXPECT_NEAR(s.logprob, std::log(0.3), 1e-6);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_NEAR(top[0].logprob, std::log(0.6), 1e-6);
  EXPECT_EQ(top[1].token, 0);
  EXPECT_EQ(top[2].token, 2);  // tied with 3: the lower id
  row.num_top_logprobs = 10;   // more than the vocabulary
  sample_row_reference(logits, row, listed, {}, top);
  EXPECT_EQ(top.size(), 4u);
}

}  // namespace
}  // namespace nibble::kernels
