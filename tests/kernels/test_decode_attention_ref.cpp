// The decode attention kernel's plan (kernels/attention/decode_attention_plan.h: split rule, key
// partition, clusters) and the FP64 model of its decomposition (decode_attention_ref.h) against
// the plain FP64 reference: every split count gives the same attention, the partition covers
// every key once, and the split rule keeps paged_decode_splits' contract for decode graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#include "kernels/attention/attention_ref.h"
#include "kernels/attention/decode_attention_plan.h"
#include "kernels/attention/decode_attention_ref.h"

namespace nibble::kernels {
namespace {

TEST(DecodePlan, SplitKeysCoverEveryKeyOnceInWholeChunks) {
  for (const int chunk : {16, 32})
    for (int keys = 1; keys <= 3000; keys += keys < 200 ? 1 : 37)
      for (int splits = 1; splits <= 128; splits *= 2) {
        int next = 0;
        for (int s = 0; s < splits; ++s) {
          const decode_plan::KeyRange r = decode_plan::split_keys(keys, s, splits, chunk);
          ASSERT_EQ(r.begin, next) << keys << " keys, split " << s << " of " << splits;
          ASSERT_LE(r.begin, r.end);
          ASSERT_TRUE(r.begin % chunk == 0 || r.begin == keys);
          next = r.end;
        }
        ASSERT_EQ(next, keys) << keys << " keys, " << splits << " splits";
      }
}

TEST(DecodePlan, SplitRuleKeepsTheDecodeGraphContract) {
  // Powers of two, non-decreasing in the context, through every power of two up to the longest
  // context's value (the counts a decode graph bucket captures), within ~2 blocks an SM.
  for (const int kv_heads : {1, 4, 8})
    for (const int head_dim : {64, 128, 256})
      for (const int rows : {1, 2, 8, 64})
        for (const int sm_count : {0, 20, 132})
          for (const int per_sm : {1, 2, 4}) {
            int last = 1;
            std::vector<int> seen{1};
            for (int position = 0; position < 131072; position += 3) {
              const int s =
                  decode_plan::splits(kv_heads, head_dim, rows, position, sm_count, per_sm);
              ASSERT_EQ(decode_plan::pow2_at_most(s), s);
              ASSERT_GE(s, last) << "position " << position;
              if (s != last) {
                ASSERT_EQ(s, 2 * last) << "position " << position << " skipped a power of two";
                seen.push_back(s);
              }
              last = s;
            }
            if (sm_count == 0) {
              EXPECT_EQ(last, 1);
            } else if (last > 1) {
              EXPECT_LE(std::int64_t(rows) * kv_heads * last, std::int64_t(per_sm) * sm_count);
            }
          }
}

TEST(DecodePlan, SplitRuleOnTheServedShapes) {
  // H100 (132 SMs), head_dim 128. Llama-3.1-8B (8 KV heads), batch 1: a 66-key decode in one block
  // (3 warps of 32 keys), 512 keys in a cluster of 4, 1,024 in one of 8; 32k keys 32 splits
  // (256 blocks, 4 partials). Qwen3-30B-A3B (4 KV heads): 64. Batch 8: 4.
  EXPECT_EQ(decode_plan::splits(8, 128, 1, 65, 132), 1);
  EXPECT_EQ(decode_plan::splits(8, 128, 1, 511, 132), 4);
  EXPECT_EQ(decode_plan::splits(8, 128, 1, 1023, 132), 8);
  EXPECT_EQ(decode_plan::splits(8, 128, 1, 4095, 132), 8);
  EXPECT_EQ(decode_plan::splits(8, 128, 1, 32767, 132), 32);
  EXPECT_EQ(decode_plan::splits(4, 128, 1, 32767, 132), 64);
  EXPECT_EQ(decode_plan::splits(8, 128, 8, 32767, 132), 4);
  EXPECT_EQ(decode_plan::cluster_size(32), 8);
  EXPECT_EQ(decode_plan::partials(32), 4);
  EXPECT_EQ(decode_plan::partials(8), 1);
  EXPECT_EQ(decode_plan::cluster_size(2), 2);
}

struct Problem {
  RefAttentionShape shape;
  std::vector<RefSequence> seqs;
  std::vector<float> q, k, v;
};

Problem random_problem(int q_heads, int kv_heads, int D, int block, const std::vector<int>& keys,
                       std::mt19937_64& rng) {
  Problem p{{q_heads, kv_heads, D, block}, {}, {}, {}, {}};
  int blocks = 2;
  for (const int n : keys) blocks += (n + block - 1) / block;
  std::vector<int> pool(static_cast<std::size_t>(blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  int used = 0;
  for (const int n : keys) {
    const int need = (n + block - 1) / block;
    p.seqs.push_back({n - 1, 1, std::vector<int>(pool.begin() + used, pool.begin() + used + need)});
    used += need;
  }
  std::normal_distribution<float> normal;
  p.q.resize(keys.size() * std::size_t(q_heads * D));
  p.k.resize(std::size_t(blocks) * std::size_t(block * kv_heads * D));
  p.v.resize(p.k.size());
  for (auto* x : {&p.q, &p.k, &p.v})
    for (float& e : *x) e = normal(rng) * 1.5f;
  return p;
}

TEST(DecodeAttentionModel, EverySplitCountGivesTheReferenceAttention) {
  std::mt19937_64 rng(2026112601);
  const std::vector<int> keys{1, 2, 15, 16, 17, 31, 32, 33, 66, 100, 511, 513, 1000, 2049};
  struct Shape {
    int q_heads, kv_heads, D, block;
  };
  for (const Shape s : {Shape{8, 2, 64, 16}, Shape{24, 8, 128, 16}, Shape{8, 1, 128, 12},
                        Shape{16, 2, 256, 16}, Shape{7, 7, 64, 5}}) {
    const Problem p = random_problem(s.q_heads, s.kv_heads, s.D, s.block, keys, rng);
    const double scale = 1.0 / std::sqrt(double(s.D));
    const std::vector<double> want = paged_attention_ref(p.q, p.k, p.v, p.shape, p.seqs, scale);
    for (int splits = 1; splits <= 128; splits *= 2) {
      const std::vector<double> got =
          decode_attention_model(p.q, p.k, p.v, p.shape, p.seqs, scale, splits);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
      EXPECT_LT(worst, 1e-12) << "D " << s.D << " G " << s.q_heads / s.kv_heads << " splits "
                              << splits;
    }
  }
}

TEST(DecodeAttentionModel, SinksAndWindowsGiveTheReferenceAttentionForEverySplitCount) {
  // gpt-oss's shape (GQA 8, head_dim 64) and a head_dim 128 one; windows that cut inside a cache
  // block, on a block boundary, of one key and past the context; the splits over the window's
  // keys alone.
  std::mt19937_64 rng(2026120601);
  const std::vector<int> keys{1, 2, 16, 17, 100, 128, 129, 130, 144, 145, 600};
  std::normal_distribution<float> normal;
  for (const auto& [q_heads, kv_heads, D] : {std::tuple{64, 8, 64}, std::tuple{16, 2, 128}}) {
    const Problem p = random_problem(q_heads, kv_heads, D, 16, keys, rng);
    std::vector<float> sinks(static_cast<std::size_t>(q_heads));
    for (float& x : sinks) x = 2.0f * normal(rng);
    const double scale = 1.0 / std::sqrt(double(D));
    for (const int window : {0, 1, 16, 128, 3000})
      for (const bool with_sinks : {false, true}) {
        const RefAttentionFeatures f{
            with_sinks ? std::span<const float>(sinks) : std::span<const float>(), window};
        const std::vector<double> want =
            paged_attention_ref(p.q, p.k, p.v, p.shape, p.seqs, scale, f);
        for (int splits = 1; splits <= 64; splits *= 2) {
          const std::vector<double> got =
              decode_attention_model(p.q, p.k, p.v, p.shape, p.seqs, scale, splits, f);
          double worst = 0;
          for (std::size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
          EXPECT_LT(worst, 1e-12) << "D " << D << " window " << window << " sinks " << with_sinks
                                  << " splits " << splits;
        }
      }
  }
}

TEST(DecodePlan, AWindowsKeysStartAtItsFirstKey) {
  EXPECT_EQ(decode_plan::first_key(0, 128), 0);
  EXPECT_EQ(decode_plan::first_key(127, 128), 0);
  EXPECT_EQ(decode_plan::first_key(128, 128), 1);
  EXPECT_EQ(decode_plan::first_key(8191, 128), 8064);
  EXPECT_EQ(decode_plan::first_key(8191, 1), 8191);
  EXPECT_EQ(decode_plan::first_key(8191, 0), 0);
  const decode_plan::KeyRange r = decode_plan::offset(decode_plan::split_keys(128, 1, 4, 32), 8064);
  EXPECT_EQ(r.begin, 8096);
  EXPECT_EQ(r.end, 8128);
}

TEST(DecodeAttentionModel, RejectsWhatTheKernelCannotRun) {
  std::mt19937_64 rng(7);
  Problem p = random_problem(4, 2, 64, 16, {40}, rng);
  EXPECT_THROW(decode_attention_model(p.q, p.k, p.v, p.shape, p.seqs, 0.125, 3),
               std::invalid_argument);  // not a power of two
  p.seqs[0].count = 2;
  EXPECT_THROW(decode_attention_model(p.q, p.k, p.v, p.shape, p.seqs, 0.125, 2),
               std::invalid_argument);  // a prefill row
}

}  // namespace
}  // namespace nibble::kernels
