// Speculative verify steps as decode rows on the CUDA backend (step_layout.h
// verify_rows_as_decodes), host code that runs without a GPU: each verify item's token j becomes
// a one-token row at start + j with the item's tables and its j-th sampling request or logits
// row; the rows' layout (one tile a row, attending up to its own position, slots through the
// shared table) and their packing into a decode graph's padded inputs.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/backend/cuda/step_layout.h"

namespace nibble::backend::cuda {
namespace {

constexpr int kBlock = 8;

struct Step {
  std::vector<std::int32_t> a_tokens = {4, 70, 71}, b_tokens = {9};
  std::vector<int> a_table = {3, 7}, b_table = {1};
  std::vector<DeviceSampling> requests = std::vector<DeviceSampling>(4);
  std::vector<BatchItem> items;
  Step() {
    BatchItem a{a_tokens, 13, a_table, {}};  // the last token at 13, drafts at 14 and 15
    a.num_logits = 3;
    a.sample = &requests[0];
    BatchItem b{b_tokens, 5, b_table, {}};  // a plain decode beside it
    b.sample = &requests[3];
    items = {a, b};
  }
};

TEST(VerifyRows, EachTokenBecomesADecodeRowOfItsSequence) {
  Step step;
  std::vector<BatchItem> rows;
  ASSERT_TRUE(verify_rows_as_decodes(step.items, rows));
  ASSERT_EQ(rows.size(), 4u);
  const int starts[] = {13, 14, 15, 5};
  const std::int32_t tokens[] = {4, 70, 71, 9};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].tokens.size(), 1u);
    EXPECT_EQ(rows[r].tokens[0], tokens[r]);
    EXPECT_EQ(rows[r].start, starts[r]);
    EXPECT_EQ(rows[r].num_logits, 1);
    EXPECT_EQ(rows[r].sample, &step.requests[r]);  // row j: the item's j-th request
    EXPECT_TRUE(rows[r].logits.empty());
  }
  // The verify rows share their sequence's table (no copy, nothing refuses it).
  for (std::size_t r : {0u, 1u, 2u}) EXPECT_EQ(rows[r].block_table.data(), step.a_table.data());
  EXPECT_EQ(rows[3].block_table.data(), step.b_table.data());

  // As a step: one tile a row, each attending to positions [0, its own]; its key and value
  // written through the shared table (14 and 15: block 7 rows 6 and 7).
  const StepLayout s = layout_step(rows, kBlock, /*rows_per_tile=*/4);
  EXPECT_EQ(s.positions, (std::vector<std::int32_t>{13, 14, 15, 5}));
  EXPECT_EQ(s.slots, (std::vector<std::int64_t>{7 * 8 + 5, 7 * 8 + 6, 7 * 8 + 7, 1 * 8 + 5}));
  ASSERT_EQ(s.tiles.size(), 4u);
  for (std::int32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(s.tiles[std::size_t(r)].row0, r);
    EXPECT_EQ(s.tiles[std::size_t(r)].rows, 1);
    EXPECT_EQ(s.tiles[std::size_t(r)].position0, starts[r]);
  }
  EXPECT_EQ(s.logit_rows, (std::vector<std::int32_t>{0, 1, 2, 3}));
}

TEST(VerifyRows, LogitsRowsAndWindowTablesFollowTheRows) {
  constexpr std::size_t V = 6;
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4};
  const std::vector<int> table = {0, 2, 5}, window = {-1, 2, 5};
  std::vector<float> logits(4 * V);
  BatchItem item{tokens, 17, table, logits};
  item.num_logits = 4;
  item.window_block_table = window;
  std::vector<BatchItem> rows;
  ASSERT_TRUE(verify_rows_as_decodes(std::span(&item, 1), rows));
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(rows[j].logits.data(), logits.data() + j * V);
    EXPECT_EQ(rows[j].logits.size(), V);
    EXPECT_EQ(rows[j].sample, nullptr);
    EXPECT_EQ(rows[j].window_block_table.data(), window.data());
  }
}

// A target handing its hidden states to a drafter (mtp, eagle3): row j takes the item's j-th
// hidden_out row, so that a replay's rows come back where the item wants them.
TEST(VerifyRows, HiddenOutRowsFollowTheRows) {
  constexpr std::size_t kWidth = 5;
  Step step;
  std::vector<float> a_hidden(3 * kWidth), b_hidden(kWidth);
  step.items[0].hidden_out = a_hidden;
  step.items[1].hidden_out = b_hidden;
  std::vector<BatchItem> rows;
  ASSERT_TRUE(verify_rows_as_decodes(step.items, rows));
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(rows[j].hidden_out.data(), a_hidden.data() + j * kWidth);
    EXPECT_EQ(rows[j].hidden_out.size(), kWidth);
  }
  EXPECT_EQ(rows[3].hidden_out.data(), b_hidden.data());
  EXPECT_EQ(rows[3].hidden_out.size(), kWidth);
  // Without hidden_out, none.
  Step plain;
  ASSERT_TRUE(verify_rows_as_decodes(plain.items, rows));
  for (const BatchItem& row : rows) EXPECT_TRUE(row.hidden_out.empty());
}

TEST(VerifyRows, OtherStepsAreLeftAsTheyAre) {
  Step step;
  std::vector<BatchItem> rows = {BatchItem{}};
  // Decodes only: decode rows already.
  EXPECT_FALSE(verify_rows_as_decodes(std::span(step.items).subspan(1), rows));
  EXPECT_TRUE(rows.empty());
  // A prefill chunk (logits at its last token only) among the items.
  const std::vector<std::int32_t> chunk = {5, 6, 7};
  const std::vector<int> table = {4};
  std::vector<BatchItem> mixed = step.items;
  mixed.push_back({chunk, 0, table, {}});
  EXPECT_FALSE(verify_rows_as_decodes(mixed, rows));
  mixed.back().sample = &step.requests[3];  // num_logits 1 of 3 tokens
  EXPECT_FALSE(verify_rows_as_decodes(mixed, rows));
  // A hybrid model's item (its recurrent state runs token after token in its slot).
  std::vector<BatchItem> hybrid = step.items;
  hybrid[0].state_slot = 2;
  EXPECT_FALSE(verify_rows_as_decodes(hybrid, rows));
  EXPECT_TRUE(rows.empty());
  // An MTP module's item (hidden_in: an input the decode graphs do not read).
  const std::vector<float> hidden(3 * 4);
  std::vector<BatchItem> module = step.items;
  module[0].hidden_in = hidden;
  EXPECT_FALSE(verify_rows_as_decodes(module, rows));
  EXPECT_TRUE(rows.empty());
}

// The rows in a decode graph's inputs: padded to the bucket, each real row its own copy of the
// sequence's table, tile and cache row; padding rows at the scratch block.
TEST(VerifyRows, PackIntoADecodeGraphsPaddedRows) {
  Step step;
  std::vector<BatchItem> rows;
  ASSERT_TRUE(verify_rows_as_decodes(step.items, rows));
  const DecodeStepOffsets at = decode_step_offsets(8);
  std::vector<std::byte> bytes;
  pack_decode_step(rows, kBlock, /*rows=*/5, /*scratch_block=*/9, at, bytes);
  auto read = [&](std::size_t offset, auto& value, std::size_t index) {
    std::memcpy(&value, bytes.data() + offset + index * sizeof(value), sizeof(value));
  };
  const int positions[] = {13, 14, 15, 5, 0};
  const std::int64_t slots[] = {61, 62, 63, 13, 9 * 8};
  for (std::size_t r = 0; r < 5; ++r) {
    std::int32_t position = 0;
    std::int64_t slot = 0;
    AttentionTile tile;
    read(at.positions, position, r);
    read(at.slots, slot, r);
    read(at.tiles, tile, r);
    EXPECT_EQ(position, positions[r]) << r;
    EXPECT_EQ(slot, slots[r]) << r;
    EXPECT_EQ(tile.position0, positions[r]) << r;
    EXPECT_EQ(tile.rows, 1);
    std::int32_t first_block = 0;
    read(at.block_tables, first_block, std::size_t(tile.table_offset));
    EXPECT_EQ(first_block, r < 3 ? 3 : r == 3 ? 1 : 9) << r;
  }
}

}  // namespace
}  // namespace nibble::backend::cuda
