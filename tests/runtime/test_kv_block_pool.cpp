#include <gtest/gtest.h>

#include <numeric>

#include "engine/runtime/kv_block_pool.h"

namespace nibble::runtime {
namespace {

Sequence make_seq(std::int64_t id, std::vector<int> tokens) {
  Sequence s;
  s.id = id;
  s.num_prompt_tokens = int(tokens.size());
  s.tokens = std::move(tokens);
  return s;
}

std::vector<int> range(int begin, int end) {
  std::vector<int> v(std::size_t(end - begin));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// Admits the whole sequence and marks every token computed, as a finished prefill would.
void prefill(KvBlockPool& pool, Sequence& s) {
  const int cached = pool.cached_prefix_tokens(s);
  ASSERT_TRUE(pool.can_allocate(s, s.num_tokens() - cached));
  pool.allocate(s, s.num_tokens() - cached);
  s.num_computed_tokens = s.num_tokens();
  pool.commit_computed(s);
}

TEST(KvBlockPool, AllocatesAndFreesEveryBlock) {
  KvBlockPool pool(8, 16, true);
  Sequence a = make_seq(1, range(0, 40));  // 3 blocks
  prefill(pool, a);
  EXPECT_EQ(a.block_table.size(), 3u);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_DOUBLE_EQ(pool.usage(), 3.0 / 8);
  pool.free(a);
  EXPECT_EQ(pool.num_free_blocks(), 8);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
  EXPECT_TRUE(a.block_table.empty());
}

TEST(KvBlockPool, SharesFullPrefixBlocksAndCountsHits) {
  KvBlockPool pool(16, 16, true);
  Sequence a = make_seq(1, range(0, 40));
  prefill(pool, a);
  std::vector<int> b_tokens = range(0, 32);
  b_tokens.push_back(999);
  Sequence b = make_seq(2, b_tokens);
  EXPECT_EQ(pool.cached_prefix_tokens(b), 32);
  prefill(pool, b);
  EXPECT_EQ(b.num_cached_prompt_tokens, 32);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_NE(b.block_table[2], a.block_table[2]);
  EXPECT_EQ(pool.num_free_blocks(), 16 - 4);  // 3 for a, 1 new for b
  EXPECT_EQ(pool.prefix_stats().queried_tokens, 40u + 33u);
  EXPECT_EQ(pool.prefix_stats().hit_tokens, 32u);
}

TEST(KvBlockPool, AlwaysLeavesTheLastTokenToCompute) {
  KvBlockPool pool(16, 16, true);
  Sequence a = make_seq(1, range(0, 32));
  prefill(pool, a);
  Sequence same = make_seq(2, range(0, 32));
  EXPECT_EQ(pool.cached_prefix_tokens(same), 16);  // not 32: the last token's logits are needed
}

TEST(KvBlockPool, DifferentEarlierTokensMeanNoSharing) {
  KvBlockPool pool(16, 16, true);
  Sequence a = make_seq(1, range(0, 40));
  prefill(pool, a);
  std::vector<int> t = range(0, 40);
  t[3] = 77;  // first block differs, so the second block's chained hash differs too
  Sequence b = make_seq(2, t);
  EXPECT_EQ(pool.cached_prefix_tokens(b), 0);
}

TEST(KvBlockPool, FreedPrefixesStayCachedUntilTheBlocksAreNeeded) {
  KvBlockPool pool(4, 16, true);
  Sequence a = make_seq(1, range(0, 33));  // 3 blocks, 2 full and hashed
  prefill(pool, a);
  pool.free(a);
  Sequence again = make_seq(2, range(0, 33));
  EXPECT_EQ(pool.cached_prefix_tokens(again), 32);
  // A sequence needing all 4 blocks evicts them.
  Sequence big = make_seq(3, range(1000, 1064));
  prefill(pool, big);
  pool.free(big);
  EXPECT_EQ(pool.cached_prefix_tokens(again), 0);
}

TEST(KvBlockPool, EvictsUnhashedBlocksBeforeCachedPrefixes) {
  KvBlockPool pool(4, 16, true);
  Sequence a = make_seq(1, range(0, 20));  // block 0 hashed, block 1 partial
  prefill(pool, a);
  pool.free(a);
  Sequence b = make_seq(2, range(500, 540));  // needs 3 of the 4 blocks
  prefill(pool, b);
  Sequence again = make_seq(3, range(0, 20));
  EXPECT_EQ(pool.cached_prefix_tokens(again), 16);  // a's full block survived
}

TEST(KvBlockPool, CanAllocateSaysNoWithoutChangingAnything) {
  KvBlockPool pool(2, 16, true);
  Sequence big = make_seq(1, range(0, 40));
  EXPECT_FALSE(pool.can_allocate(big, 40));
  EXPECT_EQ(pool.num_free_blocks(), 2);
  Sequence fits = make_seq(2, range(0, 32));
  EXPECT_TRUE(pool.can_allocate(fits, 32));
}

TEST(KvBlockPool, AppendGrowsByWholeBlocks) {
  KvBlockPool pool(4, 16, false);
  Sequence a = make_seq(1, range(0, 16));
  prefill(pool, a);
  EXPECT_EQ(a.block_table.size(), 1u);
  EXPECT_TRUE(pool.can_append(a, 1));
  pool.append_slots(a, 1);
  EXPECT_EQ(a.block_table.size(), 2u);
  EXPECT_FALSE(pool.can_append(a, 64));
}

TEST(KvBlockPool, PrefixCachingOffNeverShares) {
  KvBlockPool pool(8, 16, false);
  Sequence a = make_seq(1, range(0, 40));
  prefill(pool, a);
  Sequence b = make_seq(2, range(0, 40));
  EXPECT_EQ(pool.cached_prefix_tokens(b), 0);
  EXPECT_EQ(pool.prefix_stats().queried_tokens, 0u);
}

}  // namespace
}  // namespace nibble::runtime
