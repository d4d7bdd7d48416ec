// The FP64 attention reference (kernels/attention/attention_ref.h) that the GPU attention tests
// trust: hand-checkable cases and the invariances a paged cache must keep; gpt-oss's sinks and
// sliding window against hand-computed weights and against plain attention where they change
// nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention/attention_ref.h"

namespace nibble::kernels {
namespace {

TEST(AttentionRef, FirstPositionReturnsItsOwnValue) {
  // One key: softmax over one score is 1 whatever q and k are.
  const RefAttentionShape s{2, 1, 4, 4};
  std::vector<float> q{1, 2, 3, 4, -1, 0, 5, 2}, k(16, 0.5f), v(16);
  std::iota(v.begin(), v.end(), 1.0f);
  const std::vector<RefSequence> seqs{{0, 1, {0}}};
  const auto out = paged_attention_ref(q, k, v, s, seqs, 0.5);
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(out[std::size_t(h * 4 + d)], v[std::size_t(d)]);
}

TEST(AttentionRef, TwoKeysWeighByTheirScores) {
  // Position 1 sees keys 0 and 1: weights e^{s0}, e^{s1} normalised.
  const RefAttentionShape s{1, 1, 2, 2};
  const std::vector<float> q{1, 0, 1, 0}, k{0, 0, 2, 0}, v{1, 0, 0, 1};
  const std::vector<RefSequence> seqs{{0, 2, {0}}};
  const auto out = paged_attention_ref(q, k, v, s, seqs, 1.0);
  const double w1 = std::exp(2.0) / (1 + std::exp(2.0));
  EXPECT_NEAR(out[2], 1 - w1, 1e-15);
  EXPECT_NEAR(out[3], w1, 1e-15);
  EXPECT_DOUBLE_EQ(out[0], 1.0);  // row 0 sees only key 0
}

TEST(AttentionRef, BlockTablePermutationDoesNotChangeTheResult) {
  // The same keys stored in shuffled blocks, found through the shuffled table, give the same
  // output; GQA: query head h reads KV head h / (Hq / Hkv).
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const RefAttentionShape s{4, 2, 8, 4};
  const int blocks = 6, len = 21;
  std::vector<float> k(std::size_t(blocks * 4 * 2 * 8)), v(k.size()), q(std::size_t(5 * 4 * 8));
  for (auto* x : {&k, &v, &q})
    for (auto& f : *x) f = normal(rng);
  std::vector<int> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<float> k2(k.size()), v2(v.size());
  const std::size_t per_block = 4 * 2 * 8;
  for (int b = 0; b < blocks; ++b)
    for (std::size_t i = 0; i < per_block; ++i) {
      k2[std::size_t(perm[std::size_t(b)]) * per_block + i] = k[std::size_t(b) * per_block + i];
      v2[std::size_t(perm[std::size_t(b)]) * per_block + i] = v[std::size_t(b) * per_block + i];
    }
  const std::vector<RefSequence> plain{{len - 5, 5, {0, 1, 2, 3, 4, 5}}};
  const std::vector<RefSequence> shuffled{
      {len - 5, 5, {perm[0], perm[1], perm[2], perm[3], perm[4], perm[5]}}};
  const auto a = paged_attention_ref(q, k, v, s, plain, 0.3);
  const auto b = paged_attention_ref(q, k2, v2, s, shuffled, 0.3);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_DOUBLE_EQ(a[i], b[i]);
  // Heads 0 and 1 share KV head 0 but have different queries: different outputs.
  EXPECT_NE(a[0], a[8]);
}

// Random queries and a cache of `blocks` blocks (identity table) for the features' cases.
struct RandomCache {
  std::vector<float> q, k, v;
};
RandomCache random_cache(const RefAttentionShape& s, int rows, int blocks, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  RandomCache c;
  c.q.resize(std::size_t(rows * s.q_heads * s.head_dim));
  c.k.resize(std::size_t(blocks * s.block_size * s.kv_heads * s.head_dim));
  c.v.resize(c.k.size());
  for (auto* x : {&c.q, &c.k, &c.v})
    for (auto& f : *x) f = normal(rng);
  return c;
}

TEST(AttentionRef, SinksOfMinusInfinityAndAWindowOverEverythingArePlainAttention) {
  // exp(-inf) adds nothing to a denominator; a window of the whole context hides no key. Exactly
  // the plain result, for a chunk starting mid-sequence and a decode.
  const RefAttentionShape s{8, 2, 16, 4};
  const RandomCache c = random_cache(s, 11, 8, 11);
  const std::vector<RefSequence> seqs{{20, 10, {3, 1, 4, 0, 5, 2, 7, 6}}, {8, 1, {0, 1, 2}}};
  const std::vector<float> no_sinks(8, -INFINITY);
  const auto plain = paged_attention_ref(c.q, c.k, c.v, s, seqs, 0.25);
  for (const RefAttentionFeatures f :
       {RefAttentionFeatures{no_sinks, 0}, RefAttentionFeatures{{}, 30},
        RefAttentionFeatures{{}, 1 << 20}, RefAttentionFeatures{no_sinks, 31}}) {
    const auto got = paged_attention_ref(c.q, c.k, c.v, s, seqs, 0.25, f);
    ASSERT_EQ(got.size(), plain.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], plain[i]) << i;
  }
}

TEST(AttentionRef, ASinkTakesItsShareOfTheSoftmax) {
  // Position 1 sees keys 0 and 1 with scores 0 and 2; head 0's sink ln 3, head 1's none:
  // head 0 weighs v0, v1 by 1 / (1 + e^2 + 3) and e^2 / (1 + e^2 + 3): the sink's 3 / (...)
  // weighs nothing. Position 0, one key of score 0: v0 / (1 + 3) for head 0, v0 for head 1.
  const RefAttentionShape s{2, 1, 2, 2};
  const std::vector<float> q{1, 0, 1, 0, 1, 0, 1, 0}, k{0, 0, 2, 0}, v{1, 0, 0, 1};
  const std::vector<float> sinks{float(std::log(3.0)), -INFINITY};
  const std::vector<RefSequence> seqs{{0, 2, {0}}};
  const auto out = paged_attention_ref(q, k, v, s, seqs, 1.0, {sinks, 0});
  EXPECT_NEAR(out[0], 1.0 / 4.0, 1e-7);  // row 0, head 0 (the sink's logit is a float)
  EXPECT_NEAR(out[1], 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(out[2], 1.0);  // row 0, head 1
  const double den = 1 + std::exp(2.0) + 3;
  EXPECT_NEAR(out[4], 1 / den, 1e-7);  // row 1, head 0
  EXPECT_NEAR(out[5], std::exp(2.0) / den, 1e-7);
  const double w1 = std::exp(2.0) / (1 + std::exp(2.0));  // row 1, head 1: plain
  EXPECT_NEAR(out[6], 1 - w1, 1e-15);
  EXPECT_NEAR(out[7], w1, 1e-15);
}

TEST(AttentionRef, AWindowOfTwoSeesTheLatestTwoKeys) {
  // Keys at positions 0, 1, 2 with scores 5, 0, 1 for q = (1, 0): position 2 with a window of 2
  // sees keys 1 and 2 only (key 0's large score would otherwise dominate); position 1 sees 0, 1.
  const RefAttentionShape s{1, 1, 2, 4};
  const std::vector<float> q{1, 0, 1, 0, 1, 0}, k{5, 0, 0, 0, 1, 0, 0, 0},
      v{1, 0, 0, 1, 3, 3, 0, 0};
  const std::vector<RefSequence> seqs{{0, 3, {0}}};
  const auto out = paged_attention_ref(q, k, v, s, seqs, 1.0, {{}, 2});
  EXPECT_DOUBLE_EQ(out[0], 1.0);  // position 0: its own key
  EXPECT_DOUBLE_EQ(out[1], 0.0);
  const double p01 = std::exp(5.0) / (std::exp(5.0) + 1);  // position 1: keys 0, 1
  EXPECT_NEAR(out[2], p01, 1e-15);
  EXPECT_NEAR(out[3], 1 - p01, 1e-15);
  const double p2 = std::exp(1.0) / (1 + std::exp(1.0));  // position 2: keys 1, 2
  EXPECT_NEAR(out[4], 3 * p2, 1e-14);
  EXPECT_NEAR(out[5], (1 - p2) + 3 * p2, 1e-14);
}

TEST(AttentionRef, AWindowOfOneReturnsEachRowsOwnValue) {
  const RefAttentionShape s{4, 2, 8, 4};
  const RandomCache c = random_cache(s, 9, 4, 5);
  const std::vector<RefSequence> seqs{{3, 9, {2, 0, 3, 1}}};
  const auto out = paged_attention_ref(c.q, c.k, c.v, s, seqs, 0.3, {{}, 1});
  const std::vector<int> table{2, 0, 3, 1};
  for (int i = 0; i < 9; ++i)
    for (int h = 0; h < 4; ++h)
      for (int d = 0; d < 8; ++d) {
        const int pos = 3 + i, slot = table[std::size_t(pos / 4)] * 4 + pos % 4;
        EXPECT_DOUBLE_EQ(out[std::size_t((i * 4 + h) * 8 + d)],
                         c.v[std::size_t((slot * 2 + h / 2) * 8 + d)]);
      }
}

TEST(AttentionRef, RefusesSinksOfTheWrongLengthAndNegativeWindows) {
  const RefAttentionShape s{2, 1, 2, 2};
  const std::vector<float> q(4), k(4), v(4), one_sink{0.0f};
  const std::vector<RefSequence> seqs{{0, 1, {0}}};
  EXPECT_THROW((void)paged_attention_ref(q, k, v, s, seqs, 1.0, {one_sink, 0}),
               std::invalid_argument);
  EXPECT_THROW((void)paged_attention_ref(q, k, v, s, seqs, 1.0, {{}, -1}), std::invalid_argument);
}

TEST(AttentionRef, RefusesTablesTooShort) {
  const RefAttentionShape s{1, 1, 2, 2};
  const std::vector<float> q(6), k(8), v(8);
  const std::vector<RefSequence> seqs{{0, 3, {0}}};  // position 2 needs block 1
  EXPECT_THROW((void)paged_attention_ref(q, k, v, s, seqs, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::kernels
