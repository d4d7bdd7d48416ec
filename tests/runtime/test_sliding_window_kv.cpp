// Sliding-window KV in the block pool and the scheduler: the sliding group's blocks go back to
// the pool as they leave the window, so a long generation holds a bounded number of them; the
// usage ratio counts both groups' blocks; no block serves two tables; admission and preemption
// count both groups; prefix caching takes a hit only as far as the sliding group still has the
// window before it.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "engine/runtime/kv_block_pool.h"
#include "engine/runtime/scheduler.h"
#include "tests/runtime/test_sequences.h"

namespace nibble::runtime {
namespace {

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

int held_window_blocks(const Sequence& s) {
  return int(std::count_if(s.window_block_table.begin(), s.window_block_table.end(),
                           [](int id) { return id != kFreedBlock; }));
}

// One step: every sampling sequence gets token 7; finished ones leave.
void complete(Scheduler& scheduler, const SchedulerOutput& out, int max_tokens) {
  std::vector<int> sampled;
  for (const ScheduledSequence& s : out.scheduled) sampled.push_back(s.samples_next_token ? 7 : -1);
  scheduler.complete_step(out, sampled);
  for (const ScheduledSequence& s : out.scheduled)
    if (s.seq->status == SequenceStatus::kRunning && s.seq->num_output_tokens() >= max_tokens)
      scheduler.finish(*s.seq);
}

TEST(SlidingWindowKv, ALongGenerationHoldsABoundedNumberOfSlidingBlocks) {
  constexpr int kWindow = 128, kBlock = 16, kChunk = 64, kBlocks = 400;
  KvBlockPool pool(kBlocks, kBlock, false, kWindow);
  Scheduler scheduler({.max_num_seqs = 4, .max_num_batched_tokens = kChunk}, pool);
  auto seq = make_seq(1, 300, 2000);  // a chunked prefill, then 2,000 decodes
  scheduler.add(*seq);
  const int bound = ceil_div(kWindow + kChunk, kBlock) + 1;
  int steps = 0, most_held = 0;
  while (!scheduler.idle()) {
    const SchedulerOutput out = scheduler.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    const int end = seq->num_computed_tokens + out.scheduled[0].num_new_tokens;
    EXPECT_EQ(int(seq->block_table.size()), ceil_div(end, kBlock));
    EXPECT_EQ(seq->window_block_table.size(), seq->block_table.size());
    const int held = held_window_blocks(*seq);
    most_held = std::max(most_held, held);
    ASSERT_LE(held, bound) << "at position " << seq->num_computed_tokens;
    // Every block the step's rows can see is there; every block before is back in the pool.
    const int first = std::max(0, seq->num_computed_tokens - kWindow + 1) / kBlock;
    for (int b = 0; b < int(seq->window_block_table.size()); ++b)
      EXPECT_EQ(seq->window_block_table[std::size_t(b)] == kFreedBlock, b < first) << b;
    EXPECT_EQ(pool.num_free_blocks(), kBlocks - int(seq->block_table.size()) - held);
    EXPECT_DOUBLE_EQ(pool.usage(), double(pool.num_held_blocks(*seq)) / kBlocks);
    complete(scheduler, out, 2000);
    ++steps;
  }
  EXPECT_EQ(steps, ceil_div(300, kChunk) + 1999);
  EXPECT_GE(most_held, ceil_div(kWindow, kBlock));  // the window itself is kept
  EXPECT_EQ(pool.num_free_blocks(), kBlocks);
}

// Several sequences through a pool that must preempt: at every step the usage ratio is the
// blocks the sequences hold (both groups) over the pool, no block is in two tables, and every
// sequence completes.
TEST(SlidingWindowKv, UsageCountsBothGroupsThroughPreemption) {
  constexpr int kWindow = 8, kBlock = 4, kBlocks = 40;
  KvBlockPool pool(kBlocks, kBlock, false, kWindow);
  Scheduler scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 16}, pool);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 6; ++i) {
    seqs.push_back(make_seq(i, 10 + 4 * i, 60, 100 * i));
    scheduler.add(*seqs.back());
  }
  int checked = 0;
  while (!scheduler.idle()) {
    const SchedulerOutput out = scheduler.schedule();
    int held = 0;
    std::set<int> ids;
    for (const auto& s : seqs) {
      held += pool.num_held_blocks(*s);
      for (int id : s->block_table) EXPECT_TRUE(ids.insert(id).second) << "block " << id;
      for (int id : s->window_block_table) {
        if (id == kFreedBlock) continue;
        EXPECT_TRUE(ids.insert(id).second) << "block " << id;
      }
    }
    ASSERT_DOUBLE_EQ(pool.usage(), double(held) / kBlocks) << "step " << checked;
    EXPECT_EQ(pool.num_free_blocks(), kBlocks - held);
    complete(scheduler, out, 60);
    ++checked;
  }
  EXPECT_GT(scheduler.num_preemptions(), 0u) << "a pool this small must preempt";
  for (const auto& s : seqs) EXPECT_EQ(s->num_output_tokens(), 60);
  EXPECT_EQ(pool.num_free_blocks(), kBlocks);
}

// The longest sequence the pool admits runs to its end alone, without preempting itself.
TEST(SlidingWindowKv, TheLongestSequenceFits) {
  KvBlockPool pool(40, 4, false, 8);
  const int longest = pool.max_tokens_per_sequence(16);
  EXPECT_EQ(longest, (40 - ((7 + 16 + 3) / 4 + 1)) * 4);  // 33 full blocks beside 7 sliding
  Scheduler scheduler({.max_num_seqs = 1, .max_num_batched_tokens = 16}, pool);
  auto seq = make_seq(1, longest - 20, 20);
  scheduler.add(*seq);
  while (!scheduler.idle()) complete(scheduler, scheduler.schedule(), 20);
  EXPECT_EQ(seq->num_tokens(), longest);
  EXPECT_EQ(scheduler.num_preemptions(), 0u);
}

// A sequence of `tokens`, admitted with room for all of them and computed in one step.
std::unique_ptr<Sequence> computed_seq(KvBlockPool& pool, std::int64_t id,
                                       std::vector<int> tokens) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = std::move(tokens);
  s->num_prompt_tokens = s->num_tokens();
  pool.allocate(*s, s->num_tokens() - pool.cached_prefix_tokens(*s));
  s->num_computed_tokens = s->num_tokens();
  pool.commit_computed(*s);
  return s;
}

std::unique_ptr<Sequence> prompt_of(std::vector<int> tokens) {
  auto s = std::make_unique<Sequence>();
  s->tokens = std::move(tokens);
  s->num_prompt_tokens = s->num_tokens();
  return s;
}

std::vector<int> counting(int from, int count) {
  std::vector<int> out(static_cast<std::size_t>(count));
  std::iota(out.begin(), out.end(), from);
  return out;
}

std::vector<int> joined(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Window 8, blocks of 4: a hit of n blocks (P = 4n tokens) needs the full group's blocks 0..n-1
// and the sliding group's blocks max(0, P - 7) / 4 .. n - 1. A's 40 tokens are cached in both
// groups; its sliding blocks 0..7 leave the window (back to the pool, still cached); then blocks
// are taken from the pool until A's sliding blocks 0 and 1 are reused by another sequence.
// Prompts sharing 20 tokens with A still hit 20 (their window is blocks 3 and 4); prompts sharing
// 8 do not hit at all (their window, blocks 0 and 1, was taken), though the full group has both
// blocks: the hit counter counts only the usable hits.
TEST(SlidingWindowKv, APrefixHitNeedsTheSlidingBlocksOfItsWindow) {
  constexpr int kBlocks = 64;
  KvBlockPool pool(kBlocks, 4, true, 8);
  auto a = computed_seq(pool, 1, counting(0, 40));
  ASSERT_EQ(pool.prefix_stats().hit_tokens, 0u);
  const std::vector<int> a_sliding = a->window_block_table;
  pool.append_slots(*a, 1);  // a decode at position 40: sliding blocks 0..7 leave
  for (int b = 0; b < 8; ++b) EXPECT_EQ(a->window_block_table[std::size_t(b)], kFreedBlock);
  EXPECT_EQ(pool.num_held_blocks(*a), 11 + 3);

  // Everything still cached: the whole prompt but its last token.
  EXPECT_EQ(pool.cached_prefix_tokens(*prompt_of(counting(0, 41))), 40);
  EXPECT_EQ(pool.cached_prefix_tokens(*prompt_of(joined(counting(0, 8), {90, 91, 92}))), 8);

  // Take the 50 free blocks but A's cached sliding blocks 2..7: the 42 never cached ones, then
  // the two freed first (blocks 0 and 1), for another sequence's 88 tokens (22 blocks a group),
  // admitted and not computed yet: its blocks hold nothing a hit could check.
  ASSERT_EQ(pool.num_free_blocks(), kBlocks - 14);
  auto other = prompt_of(counting(500, 88));
  pool.allocate(*other, 88);
  ASSERT_EQ(pool.num_free_blocks(), 6);

  const std::uint64_t hits_before = pool.prefix_stats().hit_tokens;
  auto twenty = computed_seq(pool, 3, joined(counting(0, 20), {90, 91, 92, 93, 94, 95}));
  EXPECT_EQ(twenty->num_cached_prompt_tokens, 20);
  // Blocks before the window of position 20 are not taken; its window's blocks are A's.
  EXPECT_EQ(twenty->window_block_table[0], kFreedBlock);
  EXPECT_EQ(twenty->window_block_table[2], kFreedBlock);
  for (int b = 3; b < 5; ++b)
    EXPECT_EQ(twenty->window_block_table[std::size_t(b)], a_sliding[std::size_t(b)]) << b;
  for (int b = 0; b < 5; ++b)
    EXPECT_EQ(twenty->block_table[std::size_t(b)], a->block_table[std::size_t(b)]) << b;
  EXPECT_EQ(pool.prefix_stats().hit_tokens, hits_before + 20);

  pool.free(*twenty);
  auto eight = prompt_of(joined(counting(0, 8), {90, 91, 92}));
  EXPECT_EQ(pool.cached_prefix_tokens(*eight), 0);  // blocks 0 and 1 of the full group are there
  EXPECT_TRUE(pool.can_allocate(*eight, 11));
  pool.allocate(*eight, 11);
  EXPECT_EQ(eight->num_computed_tokens, 0);
  EXPECT_EQ(pool.prefix_stats().hit_tokens, hits_before + 20);  // the unusable hit not counted
  EXPECT_EQ(pool.prefix_stats().queried_tokens, 40u + 88u + 26u + 11u);
}

// Reuse in both groups through the scheduler: the second of two equal prompts starts at its
// last block's end with the window's sliding blocks shared, and every block comes back.
TEST(SlidingWindowKv, AHitSharesTheWindowsSlidingBlocks) {
  KvBlockPool pool(40, 4, true, 8);
  Scheduler scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 64}, pool);
  auto first = make_seq(1, 30, 1);
  scheduler.add(*first);
  complete(scheduler, scheduler.schedule(), 5);
  auto second = make_seq(2, 30, 1);
  scheduler.add(*second);
  const SchedulerOutput out = scheduler.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(second->num_cached_prompt_tokens, 28);  // 7 blocks; the 30th token is computed
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 2);
  // Position 28's window starts at 21: blocks 5 and 6 shared, 0..4 never taken.
  for (int b = 0; b < 5; ++b) EXPECT_EQ(second->window_block_table[std::size_t(b)], kFreedBlock);
  for (int b = 5; b < 7; ++b)
    EXPECT_EQ(second->window_block_table[std::size_t(b)],
              first->window_block_table[std::size_t(b)]);
  complete(scheduler, out, 1);
  while (!scheduler.idle()) complete(scheduler, scheduler.schedule(), 1);
  EXPECT_EQ(pool.num_free_blocks(), 40);
}

TEST(SlidingWindowKv, RefusesANegativeWindow) {
  EXPECT_THROW(KvBlockPool(8, 4, true, -1), std::invalid_argument);
}

// gpt-oss-20b's shape: 24 layers, 8 KV heads of 64, BF16 (2,048 bytes of K and V a layer and
// token). Without windows a block holds all 24 layers; with them 12, and a sequence of 131,072
// tokens holds 8,192 full blocks and 137 sliding ones (128 + 2,048-token steps).
TEST(SlidingWindowKv, CapacityCountsTheWindow) {
  const std::size_t per_layer_block = 16 * 2048;
  const KvCapacity all = kv_capacity(24 * per_layer_block, 16, 0, 10000, 131072, 2048);
  EXPECT_NEAR(all.tokens_per_gib, double(1 << 30) / (24 * 2048), 1e-6);
  EXPECT_EQ(all.max_full_length_sequences, 10000 / 8192);
  const KvCapacity windowed = kv_capacity(12 * per_layer_block, 16, 128, 20000, 131072, 2048);
  EXPECT_EQ(kv_blocks_per_sequence(131072, 16, 128, 2048), 8192 + 137);
  EXPECT_NEAR(windowed.tokens_per_gib, 131072.0 * double(1 << 30) / (8329.0 * 12 * 16 * 2048),
              1e-6);
  EXPECT_EQ(windowed.max_full_length_sequences, 20000 / 8329);
  EXPECT_GT(windowed.tokens_per_gib, 1.9 * all.tokens_per_gib);
}

}  // namespace
}  // namespace nibble::runtime
