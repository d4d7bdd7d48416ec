#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>
#include <set>

#include "engine/runtime/scheduler.h"
#include "tests/runtime/test_sequences.h"

namespace nibble::runtime {
namespace {

// Runs one step with a fake model that samples token 7, and finishes sequences that reached
// max_tokens. Returns the step's schedule.
SchedulerOutput step(Scheduler& scheduler) {
  SchedulerOutput out = scheduler.schedule();
  std::vector<int> sampled(out.scheduled.size(), 7);
  scheduler.complete_step(out, sampled);
  for (const auto& s : out.scheduled) {
    if (s.seq->status == SequenceStatus::kRunning &&
        s.seq->num_output_tokens() >= s.seq->params.max_tokens) {
      scheduler.finish(*s.seq);
    }
  }
  return out;
}

TEST(Scheduler, ChunksPrefillUnderTheTokenBudget) {
  KvBlockPool pool(64, 16, false);
  Scheduler scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 128}, pool);
  auto a = make_seq(1, 100, 4), b = make_seq(2, 100, 4), c = make_seq(3, 100, 4);
  scheduler.add(*a);
  scheduler.add(*b);
  scheduler.add(*c);

  SchedulerOutput s1 = step(scheduler);
  ASSERT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(s1.scheduled[0].num_new_tokens, 100);
  EXPECT_TRUE(s1.scheduled[0].samples_next_token);
  EXPECT_EQ(s1.scheduled[1].num_new_tokens, 28);
  EXPECT_FALSE(s1.scheduled[1].samples_next_token);
  EXPECT_EQ(s1.num_batched_tokens, 128);

  SchedulerOutput s2 = step(scheduler);  // a decodes, b finishes its prompt, c starts
  ASSERT_EQ(s2.scheduled.size(), 3u);
  EXPECT_EQ(s2.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(s2.scheduled[1].num_new_tokens, 72);
  EXPECT_TRUE(s2.scheduled[1].samples_next_token);
  EXPECT_EQ(s2.scheduled[2].num_new_tokens, 55);
  EXPECT_EQ(a->num_output_tokens(), 2);
}

TEST(Scheduler, RespectsMaxNumSeqs) {
  KvBlockPool pool(64, 16, false);
  Scheduler scheduler({.max_num_seqs = 2, .max_num_batched_tokens = 1000}, pool);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(make_seq(i, 10, 5));
    scheduler.add(*seqs.back());
  }
  EXPECT_EQ(step(scheduler).scheduled.size(), 2u);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
}

TEST(Scheduler, NoChunkingWaitsForRoom) {
  KvBlockPool pool(64, 16, false);
  Scheduler scheduler(
      {.max_num_seqs = 8, .max_num_batched_tokens = 64, .enable_chunked_prefill = false}, pool);
  auto a = make_seq(1, 40, 2), b = make_seq(2, 40, 2);
  scheduler.add(*a);
  scheduler.add(*b);
  SchedulerOutput s1 = step(scheduler);
  ASSERT_EQ(s1.scheduled.size(), 1u);  // b's 40 tokens do not fit the remaining 24
}

TEST(Scheduler, PreemptsTheNewestWhenTheCacheIsFullAndRecomputesIt) {
  // 4 blocks of 4 tokens. Two sequences of 7 prompt tokens take 2 blocks each; the first
  // decode that needs a third block must preempt the newer sequence.
  KvBlockPool pool(4, 4, false);
  Scheduler scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 64}, pool);
  auto a = make_seq(1, 7, 6), b = make_seq(2, 7, 6, 100);
  scheduler.add(*a);
  scheduler.add(*b);
  step(scheduler);  // both prefilled, each sampled one token: 8 tokens, 7 computed
  SchedulerOutput s2 = step(scheduler);  // decode token 8: fits in block 2
  EXPECT_TRUE(s2.preempted.empty());
  SchedulerOutput s3 = step(scheduler);  // a needs a 3rd block -> b is preempted
  ASSERT_EQ(s3.preempted.size(), 1u);
  EXPECT_EQ(s3.preempted[0], b.get());
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(b->num_output_tokens(), 2);  // generated tokens are kept, KV is recomputed
  EXPECT_EQ(scheduler.num_preemptions(), 1u);
  while (!scheduler.idle()) step(scheduler);
  EXPECT_EQ(a->num_output_tokens(), 6);
  EXPECT_EQ(b->num_output_tokens(), 6);
  EXPECT_EQ(pool.num_free_blocks(), 4);
}

// Many random sequences through a small cache: every one completes with exactly max_tokens
// outputs, no block is ever held by two sequences (no prefix sharing here), and the pool
// ends empty.
TEST(Scheduler, RandomWorkloadCompletesWithoutLeaks) {
  std::mt19937 rng(1234);
  KvBlockPool pool(40, 16, false);
  Scheduler scheduler({.max_num_seqs = 12, .max_num_batched_tokens = 96}, pool);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 60; ++i) {
    seqs.push_back(make_seq(i, 1 + int(rng() % 150), 1 + int(rng() % 40), i * 1000));
    scheduler.add(*seqs.back());
  }
  int steps = 0;
  while (!scheduler.idle() && steps < 100000) {
    SchedulerOutput out = step(scheduler);
    ++steps;
    std::set<int> owned;
    for (const auto& s : out.scheduled) {
      EXPECT_LE(s.seq->num_computed_tokens, s.seq->num_tokens());
      for (int block : s.seq->block_table) {
        if (s.seq->status == SequenceStatus::kRunning) {
          EXPECT_TRUE(owned.insert(block).second);
        }
      }
    }
    EXPECT_LE(out.num_batched_tokens, 96);
  }
  EXPECT_TRUE(scheduler.idle());
  for (const auto& s : seqs) EXPECT_EQ(s->num_output_tokens(), s->params.max_tokens) << s->id;
  EXPECT_EQ(pool.num_free_blocks(), 40);
  EXPECT_GT(scheduler.num_preemptions(), 0u);  // the cache is small enough to force some
}

TEST(Scheduler, PrefixCacheHitSkipsComputedTokens) {
  KvBlockPool pool(32, 16, true);
  Scheduler scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 256}, pool);
  auto a = make_seq(1, 64, 1);
  scheduler.add(*a);
  while (!scheduler.idle()) step(scheduler);
  auto b = make_seq(2, 70, 1);  // same first 64 tokens
  scheduler.add(*b);
  SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 70 - 64);
  EXPECT_EQ(b->num_cached_prompt_tokens, 64);
}

}  // namespace
}  // namespace nibble::runtime

namespace nibble::runtime {
namespace {

// Speculative decoding: a decode with drafts is one chunk of 1 + k tokens; after verification
// the rejected drafts' slots are dropped by rolling the computed count back (no copy), blocks
// holding only rejected slots go back to the pool, and only full blocks of accepted tokens are
// offered to the prefix cache.
TEST(SchedulerDrafts, RejectedDraftsReleaseTheirBlocksAndNeverReachThePrefixCache) {
  KvBlockPool pool(16, 4, true);
  Scheduler scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 64}, pool);
  auto a = make_seq(1, 6, 100);
  scheduler.add(*a);
  scheduler.complete_step(scheduler.schedule(), std::vector<int>{50});  // prefill, samples 50
  ASSERT_EQ(a->num_tokens(), 7);
  ASSERT_EQ(a->num_computed_tokens, 6);
  EXPECT_EQ(a->block_table.size(), 2u);

  // Token 50 plus 6 drafts: positions 6..12, four blocks.
  a->draft_tokens = {51, 52, 53, 54, 55, 56};
  SchedulerOutput out = scheduler.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 7);
  EXPECT_EQ(out.scheduled[0].num_draft_tokens, 6);
  EXPECT_TRUE(out.scheduled[0].samples_next_token);
  EXPECT_EQ(out.scheduled[0].num_logits(), 7);
  EXPECT_EQ(a->token_at(6), 50);
  EXPECT_EQ(a->token_at(12), 56);
  EXPECT_EQ(a->block_table.size(), 4u);
  EXPECT_EQ(pool.num_free_blocks(), 12);

  // One draft accepted (51), then the target's own 60: tokens 0..8, computed 0..7.
  scheduler.complete_step(out, std::vector<std::vector<int>>{{51, 60}});
  EXPECT_EQ(a->tokens, (std::vector<int>{0, 1, 2, 3, 4, 5, 50, 51, 60}));
  EXPECT_EQ(a->num_computed_tokens, 8);
  EXPECT_TRUE(a->draft_tokens.empty());
  EXPECT_EQ(a->block_table.size(), 3u) << "the block of rejected slots 12.. is freed";
  EXPECT_EQ(pool.num_free_blocks(), 13);
  EXPECT_EQ(a->block_hashes.size(), 2u) << "blocks 0-3 and 4-7 are full of accepted tokens";

  // A second sequence with the same 8 tokens finds both blocks; one that agrees only up to the
  // rejected draft 52 finds the first.
  auto same = make_seq(2, 9, 1);
  same->tokens = {0, 1, 2, 3, 4, 5, 50, 51, 99};
  EXPECT_EQ(pool.cached_prefix_tokens(*same), 8);
  auto drafted = make_seq(3, 9, 1);
  drafted->tokens = {0, 1, 2, 3, 4, 5, 50, 52, 53};
  EXPECT_EQ(pool.cached_prefix_tokens(*drafted), 4);

  scheduler.finish(*a);
  EXPECT_EQ(pool.num_free_blocks(), 16) << "every block back";
}

TEST(SchedulerDrafts, DraftsShrinkToTheBudgetAndNeverPreempt) {
  KvBlockPool pool(4, 4, false);
  Scheduler scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 3}, pool);
  auto a = make_seq(1, 2, 100);
  scheduler.add(*a);
  scheduler.complete_step(scheduler.schedule(), std::vector<int>{9});
  a->draft_tokens = {1, 2, 3, 4};
  SchedulerOutput out = scheduler.schedule();
  EXPECT_EQ(out.scheduled[0].num_draft_tokens, 2) << "3 tokens a step: the decode and 2 drafts";
  // All four drafts accepted... of the two that ran: the bonus is the target's.
  scheduler.complete_step(out, std::vector<std::vector<int>>{{1, 2, 8}});
  EXPECT_EQ(a->num_computed_tokens, 5);
  EXPECT_EQ(a->num_tokens(), 6);

  // A full cache: both decodes fit their blocks, their drafts would need one more each. The
  // drafts are dropped; nobody is preempted for them.
  KvBlockPool full(3, 4, false);
  Scheduler tight({.max_num_seqs = 4, .max_num_batched_tokens = 64}, full);
  auto c = make_seq(3, 3, 100), d = make_seq(4, 7, 100, 20);
  tight.add(*c);
  tight.add(*d);
  tight.complete_step(tight.schedule(), std::vector<int>{7, 7});
  ASSERT_EQ(full.num_free_blocks(), 0);
  c->draft_tokens = {1, 1};
  d->draft_tokens = {1, 1};
  out = tight.schedule();
  EXPECT_TRUE(out.preempted.empty());
  ASSERT_EQ(out.scheduled.size(), 2u);
  for (const ScheduledSequence& s : out.scheduled) {
    EXPECT_EQ(s.num_draft_tokens, 0);
    EXPECT_EQ(s.num_new_tokens, 1);
    EXPECT_TRUE(s.seq->draft_tokens.empty());
  }
}

}  // namespace
}  // namespace nibble::runtime
