// The FP64 attention reference (kernels/attention/attention_ref.h) that the GPU attention tests
// trust: hand-checkable cases and the invariances a paged cache must keep.
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

TEST(AttentionRef, RefusesTablesTooShort) {
  const RefAttentionShape s{1, 1, 2, 2};
  const std::vector<float> q(6), k(8), v(8);
  const std::vector<RefSequence> seqs{{0, 3, {0}}};  // position 2 needs block 1
  EXPECT_THROW((void)paged_attention_ref(q, k, v, s, seqs, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::kernels
