// Speculative decoding's rollback bookkeeping for hybrid models' state slots
// (engine/backend/state_slot_positions.h), shared by the CPU and CUDA backends: which starts a
// slot's next item may take after a verify step, which snapshot each restores, and the refusals.
#include "engine/backend/state_slot_positions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace nibble::backend {
namespace {

using ::testing::HasSubstr;

// An item of `tokens` tokens at `start` in `slot`, with `num_logits` rows of logits.
BatchItem item(const std::vector<std::int32_t>& tokens, int start, int slot, int num_logits = 1) {
  BatchItem i;
  i.tokens = tokens;
  i.start = start;
  i.state_slot = slot;
  i.num_logits = num_logits;
  return i;
}

// Runs one step's bookkeeping: its restores, then the advance.
std::vector<StateSlotPositions::Restore> step(StateSlotPositions& p,
                                              const std::vector<BatchItem>& items) {
  auto restores = p.prepare("test", items);
  p.advance(items);
  return restores;
}

const std::vector<std::int32_t> kOne = {7}, kFive = {1, 2, 3, 4, 5}, kTen(10, 3);

TEST(StateSlotPositions, OnlyVerifyItemsKeepStates) {
  EXPECT_TRUE(StateSlotPositions::keeps_states(item(kFive, 10, 0, 5)));
  EXPECT_TRUE(StateSlotPositions::keeps_states(item(kFive, 10, 0, 2)));
  EXPECT_FALSE(StateSlotPositions::keeps_states(item(kFive, 0, 0, 1)));  // a prompt chunk
  EXPECT_FALSE(StateSlotPositions::keeps_states(item(kOne, 10, 0, 1)));  // a decode row
}

// A verify step of 5 tokens at 10 (positions 10..14) keeps snapshots 0..4 for positions 11..15:
// each accepted length restores snapshot p - 11, the full acceptance (15, live) none.
TEST(StateSlotPositions, EachAcceptedLengthRestoresItsSnapshot) {
  for (int accepted = 11; accepted <= 15; ++accepted) {
    SCOPED_TRACE(accepted);
    StateSlotPositions p(2);
    step(p, {item(kTen, 0, 1)});
    EXPECT_EQ(p.live(1), 10);
    step(p, {item(kFive, 10, 1, 5)});
    EXPECT_EQ(p.live(1), 15);
    EXPECT_EQ(p.verify_start(1), 10);
    EXPECT_EQ(p.snapshots(1), 5);
    const auto restores = step(p, {item(kOne, accepted, 1)});
    if (accepted == 15) {
      EXPECT_TRUE(restores.empty());
    } else {
      ASSERT_EQ(restores.size(), 1u);
      EXPECT_EQ(restores[0].slot, 1);
      EXPECT_EQ(restores[0].snapshot, accepted - 11);
    }
    EXPECT_EQ(p.live(1), accepted + 1);
    EXPECT_EQ(p.snapshots(1), 0) << "a decode row keeps none";
  }
}

// A verify step after a rollback restores and then keeps its own snapshots; slots in one step
// roll back independently; items without a slot are ignored.
TEST(StateSlotPositions, SlotsRollBackIndependently) {
  StateSlotPositions p(3);
  step(p, {item(kTen, 0, 0), item(kFive, 0, 2)});
  step(p, {item(kFive, 10, 0, 5), item(kFive, 5, 2, 3), item(kOne, 0, -1)});
  const auto restores = step(p, {item(kFive, 12, 0, 5), item(kOne, 10, 2)});
  ASSERT_EQ(restores.size(), 1u) << "slot 2 accepted everything: live, no restore";
  EXPECT_EQ(restores[0].slot, 0);
  EXPECT_EQ(restores[0].snapshot, 1);
  EXPECT_EQ(p.live(0), 17);
  EXPECT_EQ(p.live(2), 11);
  EXPECT_EQ(p.verify_start(0), 12);
  EXPECT_EQ(p.snapshots(0), 5);
  const auto again = step(p, {item(kOne, 13, 0)});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].snapshot, 0);
}

// Starts outside [verify_start + 1, verify_start + count] (and not 0 or live) are the engine's
// logic errors, thrown before any slot changes; start 0 (a new or recomputed sequence) is always
// allowed.
TEST(StateSlotPositions, RefusesPositionsNoStateCovers) {
  StateSlotPositions p(2);
  step(p, {item(kTen, 0, 0), item(kTen, 0, 1)});
  step(p, {item(kFive, 10, 0, 5), item(kFive, 10, 1, 3)});
  for (const int start : {9, 10, 16}) {
    SCOPED_TRACE(start);
    EXPECT_THAT(
        [&] {
          p.prepare("cuda", std::vector{item(kOne, 12, 1), item(kOne, start, 0)});
        },
        ::testing::ThrowsMessage<std::logic_error>(
            HasSubstr("cuda backend: state slot 0 is at position 15 with states kept at positions "
                      "11..15; a step cannot start it at position " +
                      std::to_string(start))));
    EXPECT_EQ(p.live(1), 15) << "slot 1's valid rollback was not applied";
  }
  // Prompt chunks keep no snapshots: after one, only its end (or 0) is a valid start.
  step(p, {item(kOne, 12, 1)});
  step(p, {item(kFive, 13, 1)});
  EXPECT_EQ(p.live(1), 18);
  EXPECT_THAT([&] { p.prepare("cpu", std::vector{item(kOne, 14, 1)}); },
              ::testing::ThrowsMessage<std::logic_error>(
                  HasSubstr("state slot 1 is at position 18 with states kept at positions none; a "
                            "step cannot start it at position 14")));
  EXPECT_TRUE(p.prepare("cpu", std::vector{item(kOne, 0, 1)}).empty());
  // A slot never run: only position 0.
  StateSlotPositions fresh(1);
  EXPECT_THAT([&] { fresh.prepare("cpu", std::vector{item(kOne, 3, 0)}); },
              ::testing::ThrowsMessage<std::logic_error>(
                  HasSubstr("state slot 0 is at position -1 with states kept at positions none")));
}

}  // namespace
}  // namespace nibble::backend
